"""``AutogradApp``: the Textual app.  Small on purpose: the title, the stylesheet, the
graph's colours for each theme, notifications as text, the screen stack (the debugger
screen, dialogs over it) and the exit code.

Everything the person sees and every key is the debugger screen's
(``debugger/screen.py``); it opens what the app is given with ``Session.open``.  Given
several ranks' recordings, the app holds one debugger screen per rank (``RankScreen``,
installed so that each keeps its position) and ``<``/``>`` show another one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual import events
from textual.app import App

from autograd_tui.app.debugger import DebuggerScreen, RankScreen
from autograd_tui.app.program_output import ProgramOutput, redirect_log_handlers
from autograd_tui.app.screens import OutputScreen
from autograd_tui.app.serve_link import ServeLink
from autograd_tui.app.theme import theme_defaults
from autograd_tui.history.fields import rank_of
from autograd_tui.history.recordings import Recording
from autograd_tui.words import plain


class AutogradApp(App[int]):
    """The debugger over a scenario (a name, a file, or a torch script's ``Scenario``) and
    its options, or over a recording: ``Session.open``'s arguments; or over several ranks'
    ``recordings``, side by side (ordered by the rank each header names)."""

    TITLE = "autograd-tui"
    CSS_PATH = "app.tcss"
    # Nothing has the focus at start (Textual would focus the first table, even the hidden
    # list view); focusing re-composes the footer, a third of the time to the first frame.
    AUTO_FOCUS = None

    def __init__(self, scenario: Any = None, *, params: dict[str, Any] | None = None,
                 policy: str = "round-robin", seed: int = 0,
                 engine_overrides: dict[str, Any] | None = None,
                 recording: Recording | None = None,
                 recordings: Sequence[Recording] = ()) -> None:
        super().__init__()
        self.ranks: list[RankScreen] = rank_screens(recordings)
        self.debugger: DebuggerScreen = self.ranks[0] if self.ranks else DebuggerScreen(
            scenario=scenario, params=params or {}, policy=policy, seed=seed,
            engine_overrides=engine_overrides or {}, recording=recording)
        self.link = ServeLink(self.debugger)  # under `serve`: ends with it; --follow
        self.output = ProgramOutput()  # what the program writes while the app runs (o)
        self._restore_logs: Any = lambda: None

    def on_print(self, event: events.Print) -> None:
        """The program's own output (``begin_capture_print``): kept, counted in the title."""
        self.output.add(event.text, event.stderr)
        self.debugger.update_title()

    @property
    def output_note(self) -> str:
        """For the title: how many lines the program wrote (``o`` shows them)."""
        n = len(self.output)
        return f"output: {n} line{'s' if n != 1 else ''} (o)" if n else ""

    def action_output(self) -> None:
        """``o`` (the debugger's key): the program's output."""
        self.push_screen(OutputScreen(self.output))

    def action_ddp(self) -> None:
        """``D`` (the debugger's key): DDP's buckets per rank at the shown event."""
        from autograd_tui.app.widgets.ddp_pane import DdpScreen

        if self.debugger.session is not None:
            self.push_screen(DdpScreen(self.debugger))

    def on_unmount(self) -> None:
        self._restore_logs()

    async def on_mount(self) -> None:
        self.begin_capture_print(self, stdout=True, stderr=True)
        self._restore_logs = redirect_log_handlers()
        # Awaited: the debugger's widgets are mounted and its session open before the app
        # is ready (a default screen composes after that: keys sent at once found none).
        for screen in self.ranks:  # installed: a rank not shown keeps its screen, its place
            self.install_screen(screen, name=f"rank {screen.rank}")
        await self.push_screen(self.debugger)
        self.link.start()  # under `serve` only: ends with it, --follow

    def action_follow_leader(self) -> None:
        """``L`` (the debugger's key): under ``serve --follow``, back to the leader."""
        self.link.follow_again()

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """The graph's colours (``graph-ready``, ...: ``palette``) for the current theme."""
        return {**super().get_theme_variable_defaults(), **theme_defaults(self.current_theme)}

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Textual's ``notify``, always as text: a message may carry names or errors from
        a recording (markup is never read, control characters are made visible)."""
        super().notify(plain(message), title=plain(title), severity=severity,
                       timeout=timeout, markup=False)

    def rank_places(self) -> list[tuple[int, int, int]]:
        """Every rank's (rank, shown event, newest event), for the ranks bar."""
        return [screen.place() for screen in self.ranks]

    async def action_rank(self, step: int) -> None:
        """``<``/``>``: the previous or next rank's debugger, where it was left."""
        if len(self.ranks) < 2 or self.screen is not self.debugger:
            return
        i = self.ranks.index(self.debugger) if self.debugger in self.ranks else 0
        self.debugger = self.ranks[(i + step) % len(self.ranks)]
        await self.switch_screen(self.debugger)
        self.debugger.show_ranks()  # type: ignore[attr-defined]

    async def action_quit(self) -> None:
        """ctrl+q and the palette's Quit, as q: the debugger closes its session (every
        engine thread) and the app exits with its code (every rank's session closed)."""
        for screen in self.ranks:
            if screen is not self.debugger:
                screen.close_session()
        await self.debugger.action_quit()


def rank_screens(recordings: Sequence[Recording]) -> list[RankScreen]:
    """One debugger screen per recording, in the order of the ranks their headers name
    (a recording that names none: its place in the list)."""
    ranks = [rank_of(rec.header, i) for i, rec in enumerate(recordings)]
    return [RankScreen(rank, len(rec.events), recording=rec)
            for rank, rec in sorted(zip(ranks, recordings, strict=True), key=lambda r: r[0])]
