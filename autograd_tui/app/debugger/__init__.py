"""The debugger screen, one module per job: ``screen.py`` (``DebuggerScreen``: the layout,
the session, every key's action), ``keys.py`` (its key bindings), ``panes.py`` (drawing
the state at the shown event), ``driver.py`` (the keys that drive the engine),
``play.py`` (play and jumps), ``dialogs.py`` (the keys that open a dialog) and
``shown.py`` (the screen as those members see it); ``rank_screen.py`` (``RankScreen``:
one rank's debugger among several, with the ranks bar)."""

from autograd_tui.app.debugger.rank_screen import RankScreen
from autograd_tui.app.debugger.screen import DebuggerScreen

__all__ = ["DebuggerScreen", "RankScreen"]
