"""The Textual app: watch, pause, step and rewind a backward pass.

Data flows one way: engine threads append events to the ``Session`` (under a
lock, never touching a widget); a timer (about 30 times a second) notices new
events and redraws the panes from ``EngineState`` at the shown index.  Steps
and runs go through the controller from worker threads, so the UI never waits
on the engine.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import events, work
from textual.actions import SkipAction
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.geometry import Size
from textual.reactive import Reactive, var
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from autograd_tui import render
from autograd_tui.screens import (
    HELP,
    BreakpointsScreen,
    ExportScreen,
    GotoScreen,
    ScenarioScreen,
    TextScreen,
)
from autograd_tui.session import Session
from autograd_tui.tables import LineTable, Row, TextLine, TextView, ThreadsTable, cells
from autograd_tui.words import format_event

MIN_WIDTH, MIN_HEIGHT = 80, 24
LIST_VIEW_ABOVE = 60  # nodes: larger graphs open in the compact list view
LAZY_LIST_ABOVE = 2000  # nodes: the list view makes only the rows on screen
REFRESH_HZ = 30
NODE_COLUMNS = ("id", "node", "device", "state", "deps", "seq", "where")
SIDE_PANES = ("#queues", "#not-ready", "#graph-tasks")  # their heights only grow in a run


class Timeline(TextLine):
    """A scrub bar of the whole run: where the shown event sits."""

    _shown: tuple[int, int, str] | None = None

    def on_resize(self) -> None:
        # The first show() runs before layout (width 0): draw again at the real width.
        if self._shown is not None:
            self.show(*self._shown)

    def show(self, index: int, total: int, status: str) -> None:
        self._shown = (index, total, status)
        width = max(self.size.width - 24, 10)
        pos = 0 if total == 0 else round(index / total * (width - 1))
        bar = Text("▕")
        bar.append("━" * pos, style="bold")
        bar.append("●", style="bold yellow")
        bar.append("─" * max(width - pos - 1, 0), style="dim")
        bar.append("▏ ")
        bar.append(f"{index}/{total}", style="bold")
        bar.append(f"  {status}", style="bold red" if status == "deadlock" else "")
        self.update(bar)


class AutogradApp(App[int]):
    """One screen: graph, threads, queues, not_ready, GraphTasks, events, timeline."""

    TITLE = "autograd-tui"
    CSS_PATH = "app.tcss"
    # Nothing has the focus at start (Textual would focus the first table, even the hidden
    # list view); focusing re-composes the footer, a third of the time to the first frame.
    AUTO_FOCUS = None
    BINDINGS = [
        Binding("space", "toggle_run", "Run/Pause"),
        Binding("n", "step", "Step"),
        Binding("left", "back", "Back"),
        Binding("right", "forward", "Fwd"),
        Binding("c", "continue", "Continue"),
        Binding("b", "breakpoints", "Breakpts"),
        Binding("p", "pause_thread", "Pause thr"),
        Binding("g", "goto", "Go to"),
        # priority: a focused table (the threads pane, once a row is clicked; the list
        # view) would take home/end for scrolling.
        Binding("home", "first", "First", show=False, priority=True),
        Binding("end", "last", "Last", show=False, priority=True),
        Binding("v", "toggle_view", "View"),
        Binding("d", "details", "Details"),
        Binding("r", "restart", "Restart"),
        Binding("s", "scenarios", "Scenarios"),
        Binding("e", "export", "Export"),
        Binding("t", "notes", "Notes"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
        *[Binding(str(k), f"step_thread({k})", f"Step {k}", show=False) for k in range(1, 10)],
        Binding("shift+left", "pan(-8, 0)", show=False),
        Binding("shift+right", "pan(8, 0)", show=False),
        Binding("shift+up", "pan(0, -4)", show=False),
        Binding("shift+down", "pan(0, 4)", show=False),
    ]

    # Neither repaints the whole screen when it changes (a reactive of the App does, by
    # default): the panes that show them update themselves.
    cursor: var[int] = var(0)
    sub_title: Reactive[str] = Reactive("", compute=False, repaint=False)

    def __init__(self, scenario: str | None = None, *, params: dict[str, Any] | None = None,
                 policy: str = "round-robin", seed: int = 0,
                 engine_overrides: dict[str, Any] | None = None,
                 recording: Any = None) -> None:
        super().__init__()
        self._scenario_name = scenario or "linear-relu"
        self._params = params or {}
        self._policy, self._seed = policy, seed
        self._engine_overrides = engine_overrides or {}
        self._recording = recording
        self.session: Session | None = None
        self._follow = True  # the shown index follows the newest event
        self._seen = -1
        self._auto_running = False
        self._stepped_thread = False
        self._list_view = False
        self._details_node: int | None = None
        self._last_drawn: tuple[int, int] | None = None
        self._announced_deadlock = False
        self._mounted = False
        self._threads_key: tuple[Any, ...] | None = None  # what the threads pane shows
        self._list_raw: list[tuple[str, ...]] | None = None  # what the list view shows
        self._list_cells: dict[tuple[str, ...], Row] = {}
        self._lazy_order: tuple[Any, list[int], list[int]] | None = None  # big graphs
        self._drive_lock = threading.Lock()  # one controller request at a time

    # --- layout ---------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        # Not Textual's Header: its title is re-laid out (the whole screen) at each change.
        yield TextLine(center=True, id="header")
        yield Static("", id="banner")
        with Horizontal(id="main"):
            with Vertical(id="graph-pane"):
                yield TextView(id="graph")
                yield LineTable(NODE_COLUMNS, zebra=True, grow_only=True, id="node-list")
                yield Static("", id="details")
            with Vertical(id="side"):
                with Vertical(id="threads-pane", classes="pane"):
                    yield ThreadsTable(id="threads")
                yield Static("", id="queues", classes="pane")
                yield Static("", id="not-ready", classes="pane")
                yield Static("", id="graph-tasks", classes="pane")
        with Vertical(id="bottom"):
            yield LineTable(("seq", "event"), zebra=True, id="events")
            yield Timeline(id="timeline")
        yield Static("", id="too-small")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#graph-pane").border_title = "graph"
        self.query_one("#threads-pane").border_title = "threads (1-9 step, p pause)"
        self.query_one("#queues").border_title = "ready queues (pop order)"
        self.query_one("#not-ready").border_title = "not_ready"
        self.query_one("#graph-tasks").border_title = "GraphTasks"
        self.query_one("#events").border_title = "events"
        self._check_size()
        self._mounted = True
        self._open()
        self.set_interval(1 / REFRESH_HZ, self._on_timer)

    def _open(self) -> None:
        """Start the session: a live run of the scenario, or the recording."""
        from autograd_tui.scenarios import ScenarioError

        self._close_session()
        self._seen, self._last_drawn, self._announced_deadlock = -1, None, False
        self._follow, self._details_node = True, None
        self._auto_running = False
        self.cursor = 0
        self.query_one("#events", LineTable).clear()  # the new run's events replace these
        self._threads_key = self._list_raw = self._lazy_order = None
        self.query_one("#threads", ThreadsTable).clear()
        self.query_one("#node-list", LineTable).clear()
        for pane in SIDE_PANES:  # a new run: the panes fit its content again
            self.query_one(pane).styles.min_height = None
        try:
            if self._recording is not None:
                self.session = Session.from_recording(self._recording)
            else:
                from autograd_tui import scenarios
                from autograd_tui.runner import Run

                run = Run(scenarios.load(self._scenario_name), self._params,
                          policy=self._policy, seed=self._seed,
                          engine_overrides=self._engine_overrides)
                self.session = Session.from_run(run)
        except ScenarioError as e:
            self.session = None
            self.notify(str(e), title="cannot open", severity="error", timeout=10)
        self._update_title()
        self._tick(force=True)
        if self.session is not None and self.session.live:
            self.notify("n steps, space runs, ? shows every key", timeout=4)

    def _close_session(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    # --- the refresh loop -----------------------------------------------------------------
    def _on_timer(self) -> None:
        try:
            self._tick()
        except NoMatches:
            # Quitting: the timer can fire once more after the panes are removed (it raised
            # NoMatches and printed a traceback on exit).
            return

    def _tick(self, force: bool = False) -> None:
        s = self.session
        if s is None:
            return
        n = s.count()
        if n != self._seen or force:
            self._seen = n
            self._append_log(n)  # before the cursor moves: drawing selects the log row
            if self._follow:
                self.cursor = n
        self._draw(force)
        if s.status == "deadlock" and not self._announced_deadlock:
            self._announced_deadlock = True
            self.notify("Deadlock detected: see the banner and the red threads.",
                        title="deadlock", severity="error", timeout=8)

    def watch_cursor(self, old: int, new: int) -> None:
        self._draw()

    def _draw(self, force: bool = False) -> None:
        s = self.session
        if s is None or not self._mounted:
            return
        # The status and the report are in the key: they change without a new event.
        key = (self.cursor, self._seen, s.status, s.report)
        if key == self._last_drawn and not force:
            self._draw_threads()
            return
        self._last_drawn = key
        state = s.state_at(self.cursor)
        last = state.last_event
        highlight = last.node if last is not None else None
        # graph
        pane = self.query_one("#graph-pane")
        big = len(state.nodes) > LIST_VIEW_ABOVE
        pane.set_class(self._list_view or big, "list")
        title = (f"graph: {len(state.nodes)} nodes"
                 + ("  (list view: v toggles)" if self._list_view or big else ""))
        if pane.border_title != title:  # setting it, even unchanged, repaints the pane
            pane.border_title = title
        if self._list_view or big:
            self._draw_list(state)
        else:
            self.query_one("#graph", TextView).set_lines(render.graph_lines(state, highlight))
        # side panes
        self._show("#queues", render.queues_text(state), grow_only=True)
        self._show("#not-ready", render.not_ready_text(state), grow_only=True)
        self._show("#graph-tasks", render.graph_tasks_text(state), grow_only=True)
        node = self._details_node if self._details_node is not None else highlight
        details = self.query_one("#details", Static)
        if details.has_class("shown") and node is not None:
            details.update(render.node_details(state, node))
        self._draw_threads(state)
        self._draw_banner()
        self.query_one(Timeline).show(self.cursor, self._seen, s.status)
        self._select_log_row()
        self._update_title()

    def _show(self, selector: str, text: Text, *, grow_only: bool = False) -> None:
        """Update a Static only if its text changed, and re-lay out the screen only if the
        Static's size must change: a layout costs more than all the rest of a step.

        ``grow_only``: the pane keeps its height when its text gets shorter (min-height,
        until the next run), so stepping does not make the panes below it jump up and
        down, nor re-lay out the screen every few steps."""
        widget = self.query_one(selector, Static)
        if widget.content == text:
            return
        size, container = widget.size, widget.container_size
        if not size.width:
            widget.update(text)  # not laid out yet
            return
        before = widget.get_content_height(container, container, size.width)
        widget.update(text, layout=False)  # the width is the pane's: only the height varies
        after = widget.get_content_height(container, container, size.width)
        if grow_only:
            if after > size.height:
                outer = after + widget.styles.gutter.height
                cap = widget.styles.max_height
                if cap is not None and cap.is_cells:
                    outer = min(outer, int(cap.value))
                if outer > widget.outer_size.height:
                    widget.styles.min_height = outer  # a layout, once
        # An auto height capped by max-height: taller content than shown stays capped.
        elif after != before and not (before > size.height and after >= size.height):
            widget.refresh(layout=True)

    def _draw_list(self, state: Any) -> None:
        table = self.query_one("#node-list", LineTable)
        if len(state.nodes) > LAZY_LIST_ABOVE:  # only the rows on screen are made
            self._list_raw = None
            last = next(reversed(state.nodes.values()))
            if self._lazy_order is None or self._lazy_order[0] != (len(state.nodes), last):
                self._lazy_order = ((len(state.nodes), last), state.topological_order(),
                                    render.list_widths(state))
            order, widths = self._lazy_order[1], self._lazy_order[2]

            def fetch(i: int) -> Row:
                return self._list_row(render.list_row(state, order[i]))

            table.set_lazy_rows(len(order), fetch, widths, key=lambda i: str(order[i]))
            return
        raw = render.list_rows(state)
        if raw == self._list_raw:
            return
        self._list_raw = raw
        rows: list[Row] = []
        made = self._list_cells  # a row's cells, by its text: most rows stay the same
        if len(made) > 8192:
            made.clear()
        for r in raw:
            row = made.get(r)
            if row is None:
                row = made[r] = self._list_row(r)
            rows.append(row)
        table.set_rows(rows, [r[0] for r in raw])

    @staticmethod
    def _list_row(r: tuple[str, ...]) -> Row:
        style = render.STATE_STYLE.get(r[3].replace(" ", "_"), ("", ""))[0]
        return cells(r[0], (r[1], style), r[2], (r[3], style), *r[4:])

    def _draw_threads(self, state: Any = None) -> None:
        s = self.session
        if s is None:
            return
        if state is None:
            if not s.live:
                return
            state = s.state_at(self.cursor)
        live = s.thread_states() if s.live and self.cursor == self._seen else {}
        rows = render.threads_rows(state, live)
        cycle = set()
        if s.status == "deadlock" and s.report is not None:
            cyc = s.report.cycle if hasattr(s.report, "cycle") else s.report.get("cycle", [])
            cycle = {c.split(" ", 1)[1] for c in cyc if c.startswith("thread ")}
        key = (tuple(rows), frozenset(cycle))
        if key == self._threads_key:
            return
        self._threads_key = key
        table_rows: list[Row] = []
        for i, (name, what, node, depth) in enumerate(rows, 1):
            style = "bold red" if name in cycle else (
                "yellow" if "paused" in what else "dim" if what.startswith("finished") else "")
            table_rows.append(cells(str(i), (name, style), depth, node, (what, style)))
        self.query_one("#threads", ThreadsTable).set_rows(table_rows, [r[0] for r in rows])

    def _draw_banner(self) -> None:
        s = self.session
        banner = self.query_one("#banner", Static)
        if s is None:
            return
        if s.status == "deadlock" and s.report is not None:
            text = s.report.explanation if hasattr(s.report, "explanation") else \
                s.report.get("explanation", "")
            banner.update(Text("DEADLOCK  ", style="bold") + Text(text))
            banner.add_class("shown")
        elif s.report is not None and getattr(s.report, "kind", "") == "paused" and \
                self.cursor == self._seen:
            banner.update(Text(s.report.explanation))
            banner.add_class("shown")
        else:
            banner.remove_class("shown")

    def _append_log(self, n: int) -> None:
        """The event log holds every event up to the newest.  A recording's rows are made
        as they scroll into view: it may hold a million events."""
        s = self.session
        if s is None:
            return
        log = self.query_one("#events", LineTable)
        if not s.live:
            if n and log.row_count != n:
                names = self._names()

                def fetch(i: int) -> Row:
                    return self._log_row(s.event(i), names)

                width = max(len("seq"), len(str(s.event(n - 1).seq)))
                sample = [fetch(i)[1][0] for i in (*range(min(n, 500)),
                                                   *range(max(n - 500, 0), n))]
                log.set_lazy_rows(n, fetch, [width, max(map(len, sample))])
            return
        new = s.events(log.row_count, n)
        if not new:
            return
        names = self._names()
        log.append_rows([self._log_row(e, names) for e in new])

    @staticmethod
    def _log_row(e: Any, names: dict[int, str]) -> Row:
        return cells(str(e.seq), (format_event(e, names)[6:], render.KIND_STYLE.get(e.kind, "")))

    def _names(self) -> dict[int, str]:
        s = self.session
        if s is None:
            return {}
        state = s.state_at(self._seen)
        return {n: info.name for n, info in state.nodes.items()}

    def _select_log_row(self) -> None:
        log = self.query_one("#events", LineTable)
        if 1 <= self.cursor <= log.row_count:
            log.move_cursor(self.cursor - 1)

    def _update_title(self) -> None:
        s = self.session
        if s is None:
            self.sub_title = "no scenario"
        else:
            mode = "live" if s.live else "replay"
            self.sub_title = (f"{s.scenario_name} | {mode} | event {self.cursor}/{self._seen}"
                              f" | {s.policy} | {s.devices}")
        self.query_one("#header", TextLine).update(
            Text.assemble((self.title, "bold"), " — ", self.sub_title))

    # --- size -----------------------------------------------------------------------------
    def on_resize(self, event: events.Resize) -> None:
        # event.size: this handler runs before the app's own one updates self.size (the
        # "too small" message stayed up after the terminal was enlarged).
        self._check_size(event.size)

    def _check_size(self, size: Size | None = None) -> None:
        w, h = size or self.size
        small = w < MIN_WIDTH or h < MIN_HEIGHT
        self.default_screen.set_class(small, "too-small")  # not a dialog shown on top
        if small:
            self.query_one("#too-small", Static).update(
                f"The terminal is {w}x{h}; autograd-tui needs at least {MIN_WIDTH}x{MIN_HEIGHT}."
                "\nEnlarge the window (q quits).")

    # --- events from widgets --------------------------------------------------------------
    def on_line_table_selected(self, event: LineTable.Selected) -> None:
        table = event.table
        if table.id == "events":
            self._follow = False
            self.cursor = event.index + 1
        elif table.id == "node-list":
            self._details_node = int(event.key)
            self.query_one("#details").add_class("shown")
            self._draw(force=True)

    # --- actions: history -----------------------------------------------------------------
    def action_back(self) -> None:
        if self.cursor > 0:
            self._follow = False
            self.cursor -= 1

    def action_forward(self) -> None:
        if self.cursor < self._seen:
            self.cursor += 1
            self._follow = self.cursor == self._seen

    def _skip_in_dialogs(self) -> None:
        if isinstance(self.screen, ModalScreen):
            raise SkipAction()  # home/end then reach the dialog's input

    def action_first(self) -> None:
        self._skip_in_dialogs()
        self._follow = False
        self.cursor = 0

    def action_last(self) -> None:
        self._skip_in_dialogs()
        self._follow = True
        self.cursor = self._seen

    def action_goto(self) -> None:
        def done(i: int | None) -> None:
            if i is not None:
                self._follow = i == self._seen
                self.cursor = i

        self.push_screen(GotoScreen(self._seen), done)

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
                self.notify("replay: use left/right/home/end/g", timeout=3)
            return None
        return s

    def action_step(self) -> None:
        s = self._live(forward_in_replay=True)
        if s is None:
            return
        if s.finished:
            self._say_finished()
            return
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
        self._follow = True
        self._drive("thread", names[k - 1])

    def action_toggle_run(self) -> None:
        s = self._live()
        if s is None:
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
                else:
                    r = s.run_until_breakpoint(arm=False)
            finally:
                if what == "run":
                    self._auto_running = False
        if self.session is s:
            self.call_from_thread(self._after_drive, r)

    def _after_drive(self, r: Any) -> None:
        if r.status == "breakpoint":
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
        table = self.query_one("#threads", ThreadsTable)
        if table.row_count == 0:
            return
        name = table.key(table.cursor_row)
        paused = s.toggle_pause(name)
        self.notify(f"{name} {'paused' if paused else 'resumed'}", timeout=2)
        self._draw(force=True)

    def action_breakpoints(self) -> None:
        s = self.session
        if s is None:
            return

        def done(bps: list[Any] | None) -> None:
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

    # --- actions: views -------------------------------------------------------------------
    def action_toggle_view(self) -> None:
        self._list_view = not self._list_view
        self._draw(force=True)

    def action_details(self) -> None:
        self.query_one("#details").toggle_class("shown")
        self._draw(force=True)

    def action_pan(self, dx: int, dy: int) -> None:
        self.query_one("#graph", TextView).scroll_relative(dx, dy, animate=False)

    def action_notes(self) -> None:
        s = self.session
        if s is not None:
            self.push_screen(TextScreen(s.notes, f"teaching notes: {s.scenario_name}"))

    def action_help(self) -> None:
        self.push_screen(TextScreen(HELP, "help"))

    def action_export(self) -> None:
        s = self.session
        if s is None:
            return
        default = f"autograd-{s.scenario_name}-{self.cursor:04d}.svg"

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
        self._close_session()
        self.exit(0)

    def on_unmount(self) -> None:
        self._close_session()
