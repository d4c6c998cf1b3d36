"""``DebuggerScreen``: the one screen under the dialogs.  It owns a ``Session`` (opened
with ``Session.open``), shows it at a cursor (the shown event), and owns every key
(``keys.py``) and its action: step, run, pause a thread, walk the history, play it,
jump, copy, breakpoints, restart, scenarios, export.

Its members do the work by job: ``Panes`` draws (``panes.py``); ``Driver`` drives the
engine, its requests made from a worker thread so the UI never waits on it (``driver.py``);
``Playback`` plays the history and jumps in it (``play.py``).  They see the screen as
``Shown`` (``shown.py``).  The dialogs are in ``app/screens/``.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.geometry import Size
from textual.reactive import Reactive, var
from textual.screen import Screen
from textual.widgets import Static

from autograd_tui.app.debugger import copy, keys
from autograd_tui.app.debugger.dialogs import Dialogs
from autograd_tui.app.debugger.driver import Driver
from autograd_tui.app.debugger.moves import Moves
from autograd_tui.app.debugger.panes import Panes
from autograd_tui.app.debugger.play import REFRESH_HZ, Playback
from autograd_tui.app.palette import BindingCommands
from autograd_tui.app.widgets import (
    Banner,
    EventLog,
    GraphPane,
    Header,
    KeyFooter,
    PaneTabs,
    SidePane,
    ThreadsPane,
    Timeline,
)
from autograd_tui.app.widgets.pane_tabs import TALL_HEIGHT
from autograd_tui.control import StepResult
from autograd_tui.session import ScenarioError, Session


class DebuggerScreen(Screen[None]):
    """Graph, threads, queues, not_ready, GraphTasks, events, timeline; every key."""

    BINDINGS = keys.BINDINGS
    COMMANDS = {BindingCommands}  # ctrl+p: every key, too
    # A short terminal: the side panes become tabs (app.tcss, PaneTabs); a very tall one:
    # a longer event log.
    VERTICAL_BREAKPOINTS = [(0, "-short"), (TALL_HEIGHT, "-tall"), (60, "-very-tall")]

    # Neither repaints the whole screen when it changes (a reactive does, by default):
    # the panes that show them update themselves.
    cursor: var[int] = var(0)
    sub_title: Reactive[str | None] = Reactive(None, compute=False, repaint=False)

    def __init__(self, **source: Any) -> None:
        """``source``: ``Session.open``'s arguments (a scenario and its options, or a
        recording); ``r`` opens it again, ``s`` another scenario."""
        super().__init__()
        self.source = source
        self.session: Session | None = None
        self.playback = Playback(self)
        self.driver = Driver(self, self.playback)
        self.dialogs = Dialogs(self)
        self.moves = Moves(self, self.driver)  # n, m, u and back: a node, a module, a task
        self._panes: Panes | None = None
        self.follow = True  # the shown index follows the newest event
        self.seen = -1  # the newest event drawn
        self._announced_deadlock = False
        self._announced_fold_error = False

    # --- layout and lifetime ------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(id="header")
        yield Banner("", id="banner")
        with Horizontal(id="main"):
            yield GraphPane(id="graph-pane")
            with Vertical(id="side"):
                yield PaneTabs(id="pane-tabs")
                yield ThreadsPane(id="threads-pane", classes="pane -current")
                yield SidePane("ready queues (pop order)", id="queues")
                yield SidePane("not_ready", id="not-ready")
                yield SidePane("GraphTasks", id="graph-tasks")
        with Vertical(id="bottom"):
            yield EventLog(id="events")
            yield Timeline(id="timeline")
        yield Static("", id="too-small")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._panes = Panes(self)
        self._check_size()
        self._open()
        self.set_interval(1 / REFRESH_HZ, self._on_timer)

    def on_unmount(self) -> None:
        self.close_session()

    def _open(self) -> None:
        """Start the session: a live run of the scenario, or the recording."""
        self.close_session()
        self.driver.running = False
        self._reset()
        try:
            self.session = Session.open(**self.source)
        except ScenarioError as e:
            self.session = None
            self.notify(str(e), title="cannot open", severity="error", timeout=10)
        self.update_title()
        self.refresh_bindings()  # a replay has no engine keys (hidden_actions)
        self._tick(force=True)
        s = self.session
        if s is not None:  # a big recording is checked once its first frame is drawn
            self.call_after_refresh(s.start_check)
        if s is not None and s.live and (steps := s.schedule_steps()):
            # --policy schedule:... (explore prints such commands): open where it leads
            self.notify(f"running the schedule's {steps} steps; then . steps on, left walks "
                        "back", timeout=4)
            self.follow = True
            self.drive("schedule")
        elif s is not None and s.live:
            self.notify("n steps a node, . an event, ? shows every key", timeout=4)

    def _reset(self) -> None:
        """Before another session: nothing of the last one stays on screen."""
        self.playback.reset()
        self.seen, self._announced_deadlock = -1, False
        self.follow = True
        self.cursor = 0
        assert self._panes is not None
        self._panes.reset()

    def close_session(self) -> None:
        if self.session is not None:
            self.session.close()  # every engine thread
            self.session = None

    async def action_quit(self) -> None:
        if self.session is not None:
            self.session.stop()
        self.workers.cancel_group(self, "driver")
        code = self.session.exit_code if self.session is not None else 0
        self.close_session()
        self.app.exit(code, return_code=code)  # as run --headless: 1 a failed program, 3 a deadlock

    # --- the refresh loop ---------------------------------------------------------------------
    def _on_timer(self) -> None:
        try:
            self._tick()
        except NoMatches:
            # Quitting: the timer can fire once more after the panes are removed (it raised
            # NoMatches and printed a traceback on exit).
            return

    def _tick(self, force: bool = False) -> None:
        s = self.session
        if s is None or self._panes is None:
            return
        if s.check_error is not None:  # the recording's background check refused it
            self.close_session()
            return self.app.exit(1, return_code=1, message=Text(s.check_error))  # no markup
        n = s.count()
        if n != self.seen or force:
            self.seen = n
            self._panes.append_log(s, n, self.names())  # before the cursor moves: drawing
            if self.follow:  # selects the log row
                self.cursor = n
        self._draw(force)
        if s.fold_error is not None and not self._announced_fold_error:
            self._announced_fold_error = True
            self.notify(s.fold_error, title="the fold stopped", severity="error", timeout=15)
        if s.status == "error" and not self._announced_deadlock:
            self._announced_deadlock = True  # once a run, as a deadlock is
            self.notify("The scenario's program failed: the banner says where.",
                        title="error", severity="error", timeout=8)
        if s.status == "deadlock" and not self._announced_deadlock:
            self._announced_deadlock = True
            self.notify("Deadlock detected: see the banner and the red threads.",
                        title="deadlock", severity="error", timeout=8)

    def watch_cursor(self, old: int, new: int) -> None:
        self._draw()

    def _draw(self, force: bool = False) -> None:
        s = self.session
        if s is not None and self._panes is not None:
            if self._panes.draw(s, self.cursor, self.seen, force):
                self.update_title()

    def redraw(self) -> None:
        """Every pane again (a thread paused, another view, a node chosen)."""
        self._draw(force=True)

    def names(self) -> dict[int, str]:
        """Node id -> name, of the graph so far."""
        s = self.session
        nodes = s.state_at(self.seen).nodes if s is not None else {}
        return {n: info.name for n, info in nodes.items()}

    def update_title(self) -> None:
        s = self.session
        if s is None:
            self.sub_title = "no scenario"
        else:
            mode = ("live" if s.live else "replay") + self.playback.label
            extra = (s.devices, getattr(self.app, "output_note", ""))  # cuda; the program's
            self.sub_title = (f"{s.scenario_name} | {mode} | event {self.cursor}/{self.seen}"
                              f" | {s.policy}" + "".join(f" | {x}" for x in extra if x)
                              + (f" | {s.banner}" if s.banner else ""))
        if self._panes is not None:
            self._panes.header.show(self.app.title, self.sub_title)

    def show_event(self, k: int) -> None:
        """Show the state at k; at the newest event the view follows the run again."""
        self.follow = k == self.seen
        self.cursor = k

    # --- size and the side panes --------------------------------------------------------------
    def on_resize(self, event: events.Resize) -> None:
        self._check_size(event.size)  # the screen's own size is not updated yet

    def _check_size(self, size: Size | None = None) -> None:
        assert self._panes is not None
        if self._panes.fit(size or self.app.size):
            self.refresh_bindings()  # w shows in the footer only while the panes are tabs

    @property
    def hidden_actions(self) -> frozenset[str]:
        """The keys the footer and the palette leave out: a replay's engine keys."""
        s = self.session
        return keys.REPLAY_HIDDEN if s is not None and not s.live else frozenset()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.has_class("too-small") and action != "quit":  # nothing moves out of sight
            return False
        if action == "next_pane":  # with every pane shown there is no next one to show
            return self._panes is not None and bool(self._panes.tabbed)
        return super().check_action(action, parameters)

    def action_next_pane(self) -> None:
        """The next side pane (tabs, in a short terminal)."""
        assert self._panes is not None
        self._panes.show_pane(self._panes.next_pane())

    def action_show_pane(self, name: str) -> None:
        assert self._panes is not None
        self._panes.show_pane(name)
        if name == "threads":  # T: the keyboard's way into the threads pane (arrows, p)
            self.query_one(ThreadsPane).table.focus()

    def on_pane_tabs_chosen(self, event: PaneTabs.Chosen) -> None:
        self.action_show_pane(event.name)

    # --- messages from the panes --------------------------------------------------------------
    def on_event_log_event_chosen(self, event: EventLog.EventChosen) -> None:
        self.follow = False
        self.cursor = event.k

    def on_graph_pane_node_chosen(self, event: GraphPane.NodeChosen) -> None:
        self.redraw()  # its details

    # --- actions: history ---------------------------------------------------------------------
    def action_back(self) -> None:
        if self.cursor > 0:
            self.follow = False
            self.cursor -= 1

    def action_forward(self) -> None:
        if self.cursor < self.seen:
            self.cursor += 1
            self.follow = self.cursor == self.seen

    def action_first(self) -> None:
        self.follow = False
        self.cursor = 0

    def action_last(self) -> None:
        self.follow = True
        self.cursor = self.seen

    # --- actions: views -----------------------------------------------------------------------
    def action_toggle_view(self) -> None:
        self.query_one(GraphPane).view_presses += 1
        self.redraw()

    def action_find_node(self) -> None:
        """The grouped view: open the groups holding the node the shown event touched."""
        s = self.session
        last = s.state_at(self.cursor).last_event if s is not None else None
        if not self.query_one(GraphPane).reveal(last.node if last is not None else None):
            self.notify("f finds the shown event's node in the grouped view (a PyTorch "
                        "graph's nodes by module; v switches views)", timeout=3)

    def action_details(self) -> None:
        self.query_one(GraphPane).toggle_details()
        self.redraw()

    def action_pan(self, dx: int, dy: int) -> None:
        self.query_one(GraphPane).pan(dx, dy)

    def action_frames(self) -> None:
        self.query_one(GraphPane).toggle_frames()

    def action_scroll_details(self, dy: int) -> None:
        self.query_one(GraphPane).scroll_details(dy)

    # --- actions: the engine (driver.py) ------------------------------------------------------
    def action_step(self) -> None:
        self.driver.step()

    def action_move(self, what: str, forward: bool = True) -> None:
        self.moves.move(what, forward)

    def action_step_thread(self, k: int) -> None:
        self.driver.step_thread(k)

    def action_toggle_run(self) -> None:
        self.driver.toggle_run()

    def action_continue(self) -> None:
        self.driver.continue_()

    def action_pause_thread(self) -> None:
        self.driver.toggle_pause(self.query_one(ThreadsPane).selected_thread())

    def action_pause_prefix(self) -> None:
        self.driver.pause_prefix()

    @work(thread=True, group="driver")
    def drive(self, what: str, thread: str | None = None) -> None:
        """A blocking controller request (``Driver.request``), off the UI thread."""
        s = self.session
        if s is None:
            return
        r = self.driver.request(s, what, thread)
        if r is not None and self.session is s:
            self.app.call_from_thread(self._driven, r)

    def _driven(self, r: StepResult) -> None:
        self.driver.done(r)
        self._tick()

    # --- actions: play, jumps, copy (play.py) -------------------------------------------------
    def action_play(self) -> None:
        self.playback.toggle()

    def action_faster(self) -> None:
        self.playback.change_speed(1)

    def action_slower(self) -> None:
        self.playback.change_speed(-1)

    def action_jump(self, forward: bool = True) -> None:
        self.playback.ask_jump(forward)

    def action_jump_next(self) -> None:
        self.playback.repeat_jump(True)

    def action_jump_prev(self) -> None:
        self.playback.repeat_jump(False)

    def action_copy_event(self) -> None:
        copy.copy_event(self)

    def action_copy_node(self) -> None:
        copy.copy_node(self)

    # --- actions: dialogs (dialogs.py) ----------------------------------------------------
    def action_goto(self) -> None:
        self.dialogs.goto()

    def action_breakpoints(self) -> None:
        self.dialogs.breakpoints()

    def action_scenarios(self) -> None:
        def chosen(name: str) -> None:  # the policy and the seed stay
            self.source.update(scenario=name, params={}, engine_overrides={}, recording=None)
            self._open()

        self.dialogs.scenarios(chosen)

    def action_restart(self) -> None:
        if self.driver.live() is not None:  # a replay: nothing to restart; it says so
            self._open()

    def action_notes(self) -> None:
        self.dialogs.notes()

    def action_help(self) -> None:
        self.dialogs.help()

    def action_export(self) -> None:
        self.dialogs.export()
