"""The Textual app: ``AutogradApp`` (``app.py``, small: the screen stack, the stylesheet,
the exit code), the debugger screen that owns every key (``debugger/``), playback's timing
and the jump queries (``playback.py``), its panes (``widgets/``), its dialogs
(``screens/``), the text of each pane (``render.py``) and one stylesheet (``app.tcss``)."""

from autograd_tui.app.app import AutogradApp

__all__ = ["AutogradApp"]
