"""``Dialogs``: the debugger's keys that open a dialog over it: go to an event (``g``),
breakpoints (``b``), another scenario (``s``), the teaching notes (``t``), the help (``?``)
and a Graphviz export of the shown state (``e``).  The dialogs themselves are in
``app/screens/``, one module each; this says what each is given and what its answer does.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autograd_tui.app.debugger.shown import Shown
from autograd_tui.app.screens import (
    BreakpointsScreen,
    ConfirmScreen,
    ExportScreen,
    GotoScreen,
    HelpScreen,
    ScenarioScreen,
    TextScreen,
)
from autograd_tui.control.query import graph_words
from autograd_tui.session import Breakpoint, builtin_scenarios
from autograd_tui.words import plain


class Dialogs:
    """The dialogs over what ``shown`` shows: a member of the debugger screen."""

    def __init__(self, shown: Shown) -> None:
        self.shown = shown

    def goto(self) -> None:
        def done(i: int | None) -> None:
            if i is not None:
                self.shown.show_event(i)

        self.shown.app.push_screen(GotoScreen(self.shown.seen), done)

    def breakpoints(self) -> None:
        s = self.shown.session
        if s is None:
            return

        def done(bps: list[Breakpoint] | None) -> None:
            if bps is not None:
                s.breakpoints = bps

        state = s.state_at(self.shown.seen)
        words = graph_words({n: i.name for n, i in state.nodes.items()}, state.node_meta)
        self.shown.app.push_screen(BreakpointsScreen(s.breakpoints, words), done)

    def scenarios(self, chosen: Callable[[str], None]) -> None:
        """The picker; ``chosen`` opens the scenario picked."""
        def done(name: str | None) -> None:
            if name:
                chosen(name)

        self.shown.app.push_screen(ScenarioScreen(builtin_scenarios()), done)

    def notes(self) -> None:
        s = self.shown.session
        if s is not None:
            self.shown.app.push_screen(TextScreen(s.notes,
                                                  f"teaching notes: {s.scenario_name}"))

    def help(self) -> None:
        self.shown.app.push_screen(HelpScreen())

    def export(self) -> None:
        s = self.shown.session
        if s is None:
            return
        # a file name, whatever the scenario's name (a recording's may be a path)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", s.scenario_name).strip("._") or "run"
        default = f"autograd-{name}-{self.shown.cursor:04d}.svg"

        def done(path: str | None) -> None:
            if path:
                self._export(path)

        self.shown.app.push_screen(ExportScreen(default), done)

    def confirm(self, question: str, then: Callable[[], None]) -> None:
        """Ask ``question``; ``then`` runs on yes."""
        self.shown.app.push_screen(ConfirmScreen(question), lambda yes: then() if yes else None)

    def _export(self, path: str) -> None:
        v = self.shown
        s = v.session
        assert s is not None
        state = s.state_at(v.cursor)
        if v.app.is_web:  # serve: never a path the viewer typed (see app/web_export.py)
            from autograd_tui.app import web_export

            web_export.export(v, state, path, self.confirm)
            return
        if os.path.isfile(path) or os.path.islink(path):
            self.confirm(f"{plain(path)} exists: replace it?",
                         lambda: self._write(state, path))
            return
        self._write(state, path)

    def _write(self, state: Any, path: str) -> None:
        v = self.shown
        if path.lower().endswith((".json", ".json.gz")):
            self._chrome_trace(path)
            return
        try:
            from autograd_tui.export import export_state
        except ImportError:
            v.notify("Graphviz export is not available in this version", severity="warning")
            return
        try:
            msg = export_state(state, Path(path))
        except Exception as e:  # noqa: BLE001 - a bad path or format: one message, no crash
            v.notify(str(e), title="export failed", severity="error", timeout=8)
            return
        v.notify(msg or f"wrote {os.path.abspath(path)}", title="exported", timeout=6)

    def _chrome_trace(self, path: str) -> None:
        """``.json``: the events up to the shown one as a Chrome trace (Perfetto), as
        ``autograd-tui chrome-trace`` writes a whole run."""
        from autograd_tui.export.chrome_trace import write_chrome_trace

        v = self.shown
        s = v.session
        assert s is not None
        header = s.run.header() if s.run is not None else (
            s.recording.header if s.recording is not None else None)
        try:
            write_chrome_trace(path, s.events(0, v.cursor), header)
        except Exception as e:  # noqa: BLE001 - a bad path: one message, no crash
            v.notify(str(e), title="export failed", severity="error", timeout=8)
            return
        v.notify(f"wrote {plain(os.path.abspath(path))} (a Chrome trace of events 1..{v.cursor}"
                 "; open it in https://ui.perfetto.dev)", title="exported", timeout=6)
