"""``AutogradApp``: the debugger's keys (step, run, pause a thread, breakpoints, restart,
scenarios, export; every binding of the app, in ``BINDINGS`` here) on top of
``ReplayView`` (play, jumps, copy) and ``SessionView``, which shows the session.

Steps and runs go through the controller from worker threads, so the UI never waits
on the engine.  The panes are in ``widgets/``, the dialogs in ``screens/``.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

from textual import work
from textual.binding import Binding

from autograd_tui.app import render
from autograd_tui.app.palette import BindingCommands
from autograd_tui.app.replay_view import ReplayView
from autograd_tui.app.screens import (
    BreakpointsScreen,
    ExportScreen,
    HelpScreen,
    ScenarioScreen,
    TextScreen,
)
from autograd_tui.app.widgets import ThreadsPane
from autograd_tui.control.nonfinite import explain, first_nonfinite
from autograd_tui.session import Breakpoint, Session


class AutogradApp(ReplayView):
    """The debugger: ``ReplayView`` (``SessionView`` with play, jumps and copy) with the keys
    that drive a live run."""

    TITLE = "autograd-tui"
    CSS_PATH = "app.tcss"
    # Nothing has the focus at start (Textual would focus the first table, even the hidden
    # list view); focusing re-composes the footer, a third of the time to the first frame.
    AUTO_FOCUS = None
    COMMANDS = ReplayView.COMMANDS | {BindingCommands}  # ctrl+p: every key below, too
    # A tooltip is the command palette's help line for the key (and the footer's on hover).
    BINDINGS = [
        Binding("space", "toggle_run", "Run/Pause",
                tooltip="Run the engine to a breakpoint or the end, or pause it; in a replay "
                        "or behind the newest event, play or pause the history"),
        Binding("n", "step", "Step", tooltip="The scheduler picks a thread; it moves one event"),
        Binding("left", "back", "Back", tooltip="Step back one event in the history"),
        Binding("right", "forward", "Fwd", tooltip="Step forward one event in the history"),
        Binding("c", "continue", "Continue", tooltip="Run to the next breakpoint"),
        Binding("b", "breakpoints", "Breakpts", tooltip="Add, list or clear breakpoints"),
        Binding("p", "pause_thread", "Pause thr",
                tooltip="Pause or resume the thread selected in the threads pane"),
        Binding("g", "goto", "Go to", tooltip="Go to an event index"),
        # priority: a focused table (the threads pane, once a row is clicked; the list
        # view) would take home/end for scrolling.
        Binding("home", "first", "First", show=False, priority=True,
                tooltip="The first event (before any: at 0)"),
        Binding("end", "last", "Last", show=False, priority=True, tooltip="The newest event"),
        Binding("v", "toggle_view", "View", tooltip="Graph view, grouped view, list view"),
        Binding("d", "details", "Details", tooltip="Show or hide the node details"),
        Binding("r", "restart", "Restart", tooltip="Run the scenario again from the start"),
        Binding("s", "scenarios", "Scenarios", tooltip="Open another scenario (a filtered list)"),
        Binding("e", "export", "Export", tooltip="Export a Graphviz snapshot of the shown state"),
        Binding("t", "notes", "Notes", tooltip="The scenario's teaching notes"),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="Every key"),
        Binding("q", "quit", "Quit", tooltip="Quit (tears down every engine thread)"),
        *[Binding(str(k), f"step_thread({k})", f"Step {k}", show=False,
                  tooltip=f"Step thread {k} only (its number in the threads pane)")
          for k in range(1, 10)],
        Binding("shift+left", "pan(-8, 0)", show=False),
        Binding("shift+right", "pan(8, 0)", show=False),
        Binding("shift+up", "pan(0, -4)", show=False),
        Binding("shift+down", "pan(0, 4)", show=False),
        # replay.py, replay_view.py: play speed, jumps, copy
        Binding("plus,equals_sign", "faster", "Faster", key_display="+", show=False,
                tooltip="Play faster (more events per second)"),
        Binding("minus", "slower", "Slower", key_display="-", show=False,
                tooltip="Play slower (fewer events per second)"),
        Binding("slash", "jump", "Jump", key_display="/",
                tooltip="Jump to the next event of a kind or a node (push, #5, MulBackward0)"),
        Binding("right_square_bracket", "jump_next", "Next match", key_display="]",
                show=False, tooltip="Repeat the last jump: the next matching event"),
        Binding("left_square_bracket", "jump_prev", "Prev match", key_display="[",
                show=False, tooltip="Repeat the last jump backwards: the previous match"),
        Binding("y", "copy_event", "Copy event",
                tooltip="Copy the shown event's line to the clipboard"),
        Binding("Y", "copy_node", "Copy node", show=False,
                tooltip="Copy the node details (d) to the clipboard"),
    ]

    def __init__(self, scenario: Any = None, *, params: dict[str, Any] | None = None,
                 policy: str = "round-robin", seed: int = 0,
                 engine_overrides: dict[str, Any] | None = None,
                 recording: Any = None) -> None:
        super().__init__()
        self._scenario_name = scenario or "linear-relu"
        self._params = params or {}
        self._policy, self._seed = policy, seed
        self._engine_overrides = engine_overrides or {}
        self._recording = recording
        self._auto_running = False
        self._stepped_thread = False
        self._drive_lock = threading.Lock()  # one controller request at a time

    def _open(self) -> None:
        """Start the session: a live run of the scenario, or the recording."""
        from autograd_tui.scenarios import ScenarioError

        self._close_session()
        self._auto_running = False
        self._reset()
        try:
            if self._recording is not None:
                self.session = Session.from_recording(self._recording)
            else:
                from autograd_tui import scenarios
                from autograd_tui.session.program_errors import load_scenario
                from autograd_tui.session.run import Run

                sc = self._scenario_name  # a name, a path or a Scenario (autograd-tui torch)
                run = Run(sc if isinstance(sc, scenarios.Scenario) else load_scenario(sc),
                          self._params,
                          policy=self._policy, seed=self._seed,
                          engine_overrides=self._engine_overrides)
                self.session = Session.from_run(run)
        except ScenarioError as e:
            self.session = None
            self.notify(str(e), title="cannot open", severity="error", timeout=10)
        self._update_title()
        self._tick(force=True)
        s = self.session
        if s is not None and s.live and (steps := s.schedule_steps()):
            # --policy schedule:... (explore prints such commands): open where it leads
            self.notify(f"running the schedule's {steps} steps; then n steps on, left walks "
                        "back", timeout=4)
            self._follow = True
            self._drive("schedule")
        elif s is not None and s.live:
            self.notify("n steps, space runs, ? shows every key", timeout=4)

    def _close_session(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    # --- actions: the engine --------------------------------------------------------------
    def _live(self, *, forward_in_replay: bool = False) -> Session | None:
        """The live session, or None: in a replay there is no engine to drive, so ``n``
        walks the recording and the other engine keys say which keys do."""
        s = self.session
        if s is None:
            return None
        if not s.live:
            if forward_in_replay:
                self.action_forward()
            else:
                self.notify("replay: space plays; left/right/home/end/g and / walk it",
                            timeout=3)
            return None
        return s

    def action_step(self) -> None:
        s = self._live(forward_in_replay=True)
        if s is None:
            return
        if s.finished:
            self._say_finished()
            return
        self._stop_play()  # the view follows the engine again
        self._follow = True
        self._drive("step")

    def action_step_thread(self, k: int) -> None:
        s = self._live()
        if s is None:
            return
        names = [r[0] for r in render.threads_rows(s.state_at(self._seen), s.thread_states())]
        if not 1 <= k <= len(names):
            self.notify(f"there is no thread {k} (threads 1..{len(names)})", severity="warning")
            return
        self._stop_play()  # the view follows the engine again
        self._follow = True
        self._drive("thread", names[k - 1])

    def action_toggle_run(self) -> None:
        """Run or pause the engine; play or pause the history in a replay, or when the
        cursor is behind the newest event (and the engine is not running)."""
        s = self.session
        if s is None:
            return
        if not self._auto_running and (self.player.playing or not s.live
                                       or self.cursor < self._seen):
            self.action_play()
            return
        if self._auto_running:
            s.stop()
            return
        if s.finished:
            self._say_finished()
            return
        self._start_run(s)

    def _start_run(self, s: Session) -> None:
        # Set on the UI thread, so that space pressed again before the worker starts stops it.
        s.arm()
        self._auto_running = True
        self._stop_play()  # the view follows the engine again
        self._follow = True
        self._drive("run")

    def action_continue(self) -> None:
        s = self._live()
        if s is None:
            return
        if s.finished:
            self._say_finished()
            return
        if not s.breakpoints:
            self.notify("no breakpoints set (b): running to the end", timeout=3)
        self._start_run(s)

    def _say_finished(self) -> None:
        s = self.session
        assert s is not None
        self.notify(f"the run has ended ({s.status}); r restarts, s picks another scenario",
                    timeout=4)

    @work(thread=True, group="driver")
    def _drive(self, what: str, thread: str | None = None) -> None:
        """Blocking controller calls, off the UI thread.

        Not an exclusive worker: cancelling one that has not started yet dropped
        key presses (n pressed quickly stepped fewer times).  A lock makes the
        requests run one at a time."""
        s = self.session
        if s is None:
            return
        with self._drive_lock:
            if self.session is not s or s.finished:
                if what == "run" and self.session is s:
                    self._auto_running = False
                return  # restarted, switched or quit while this request waited
            self._stepped_thread = what == "thread"
            try:
                if what == "step":
                    r = s.step_any()
                elif what == "thread":
                    assert thread is not None
                    r = s.step_thread(thread)
                elif what == "schedule":
                    r = s.run_schedule()
                else:
                    r = s.run_until_breakpoint(arm=False)
            finally:
                if what == "run":
                    self._auto_running = False
        if self.session is s:
            self.call_from_thread(self._after_drive, r)

    def _after_drive(self, r: Any) -> None:
        if r.status == "breakpoint":
            found = [f for e in r.events if (f := first_nonfinite(e)) is not None]
            s = self.session
            if found and s is not None and any(b.nonfinite for b in s.breakpoints):
                self.notify(explain(found[0], s.history), title="breakpoint", timeout=15)
            else:
                self.notify(f"breakpoint: {r.events[-1].kind if r.events else ''}", timeout=3)
        elif r.status == "paused" and r.report is not None:
            self.notify(r.report.explanation, title="paused", timeout=6)
        elif r.status == "stuck" and r.report is not None:
            self.notify(r.report.explanation, title="stuck", severity="error", timeout=10)
        elif r.status == "blocked" and r.thread and self._stepped_thread:
            self.notify(f"{r.thread} is blocked: it cannot move until another thread does",
                        timeout=3)
        self._tick()

    def action_pause_thread(self) -> None:
        s = self._live()
        if s is None:
            return
        name = self.query_one(ThreadsPane).selected_thread()
        if name is None:
            return
        paused = s.toggle_pause(name)
        self.notify(f"{name} {'paused' if paused else 'resumed'}", timeout=2)
        self._draw(force=True)

    def action_breakpoints(self) -> None:
        s = self.session
        if s is None:
            return

        def done(bps: list[Breakpoint] | None) -> None:
            if bps is not None:
                s.breakpoints = bps

        self.push_screen(BreakpointsScreen(s.breakpoints), done)

    def action_restart(self) -> None:
        self._open()

    def action_scenarios(self) -> None:
        from autograd_tui import scenarios

        items = [(sc.name, sc.summary) for sc in scenarios.builtins()]

        def done(name: str | None) -> None:
            if name:
                self._scenario_name, self._params, self._recording = name, {}, None
                self._engine_overrides = {}
                self._open()

        self.push_screen(ScenarioScreen(items), done)

    # --- actions: notes, help, export ---------------------------------------------------
    def action_notes(self) -> None:
        s = self.session
        if s is not None:
            self.push_screen(TextScreen(s.notes, f"teaching notes: {s.scenario_name}"))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_export(self) -> None:
        s = self.session
        if s is None:
            return
        # a file name, whatever the scenario's name (a recording's may be a path)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", s.scenario_name).strip("._") or "run"
        default = f"autograd-{name}-{self.cursor:04d}.svg"

        def done(path: str | None) -> None:
            if path:
                self._export(path)

        self.push_screen(ExportScreen(default), done)

    def _export(self, path: str) -> None:
        s = self.session
        assert s is not None
        state = s.state_at(self.cursor)
        try:
            from autograd_tui.export import export_state
        except ImportError:
            self.notify("Graphviz export is not available in this version", severity="warning")
            return
        try:
            msg = export_state(state, Path(path))
        except Exception as e:  # noqa: BLE001 - a bad path or format: one message, no crash
            self.notify(str(e), title="export failed", severity="error", timeout=8)
            return
        self.notify(msg or f"wrote {os.path.abspath(path)}", title="exported", timeout=6)

    # --- quitting -------------------------------------------------------------------------
    async def action_quit(self) -> None:
        if self.session is not None:
            self.session.stop()
        self.workers.cancel_group(self, "driver")
        code = self.session.exit_code if self.session is not None else 0
        self._close_session()
        self.exit(code, return_code=code)  # as run --headless: 1 a failed program, 3 a deadlock

    def on_unmount(self) -> None:
        self._close_session()
