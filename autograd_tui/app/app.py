"""``AutogradApp``: the Textual app.  Small on purpose: the title, the stylesheet, the
graph's colours for each theme, notifications as text, the screen stack (the debugger
screen, dialogs over it) and the exit code.

Everything the person sees and every key is the debugger screen's
(``debugger/screen.py``); it opens what the app is given with ``Session.open``.
"""

from __future__ import annotations

from typing import Any

from textual.app import App

from autograd_tui.app.debugger import DebuggerScreen
from autograd_tui.app.theme import theme_defaults
from autograd_tui.history.recordings import Recording
from autograd_tui.words import plain


class AutogradApp(App[int]):
    """The debugger over a scenario (a name, a file, or a torch script's ``Scenario``) and
    its options, or over a recording: ``Session.open``'s arguments."""

    TITLE = "autograd-tui"
    CSS_PATH = "app.tcss"
    # Nothing has the focus at start (Textual would focus the first table, even the hidden
    # list view); focusing re-composes the footer, a third of the time to the first frame.
    AUTO_FOCUS = None

    def __init__(self, scenario: Any = None, *, params: dict[str, Any] | None = None,
                 policy: str = "round-robin", seed: int = 0,
                 engine_overrides: dict[str, Any] | None = None,
                 recording: Recording | None = None) -> None:
        super().__init__()
        self.debugger = DebuggerScreen(scenario=scenario, params=params or {}, policy=policy,
                                       seed=seed, engine_overrides=engine_overrides or {},
                                       recording=recording)

    async def on_mount(self) -> None:
        # Awaited: the debugger's widgets are mounted and its session open before the app
        # is ready (a default screen composes after that: keys sent at once found none).
        await self.push_screen(self.debugger)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """The graph's colours (``graph-ready``, ...: ``palette``) for the current theme."""
        return {**super().get_theme_variable_defaults(), **theme_defaults(self.current_theme)}

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Textual's ``notify``, always as text: a message may carry names or errors from
        a recording (markup is never read, control characters are made visible)."""
        super().notify(plain(message), title=plain(title), severity=severity,
                       timeout=timeout, markup=False)

    async def action_quit(self) -> None:
        """ctrl+q and the palette's Quit, as q: the debugger closes its session (every
        engine thread) and the app exits with its code."""
        await self.debugger.action_quit()
