"""``SessionView``: an App that shows a ``Session`` at a cursor (the shown event), live or
replayed: the panes, the refresh loop, the keys that walk the history, the size check.

Data flows one way: engine threads append events to the ``Session`` (under a
lock, never touching a widget); a timer (about 30 times a second) notices new
events and has each pane draw ``EngineState`` at the cursor; each pane redraws
only what changed.  ``AutogradApp`` (``app.py``) adds the keys and the driving.
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.actions import SkipAction
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.geometry import Size
from textual.reactive import Reactive, var
from textual.screen import ModalScreen
from textual.widgets import Static

from autograd_tui.app import render
from autograd_tui.app.screens import GotoScreen
from autograd_tui.app.theme import theme_defaults
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
from autograd_tui.app.widgets.pane_tabs import PANE_NAMES, PANES, TALL_HEIGHT
from autograd_tui.history.state import EngineState
from autograd_tui.session import Session
from autograd_tui.words import plain

MIN_WIDTH, MIN_HEIGHT = 80, 24
REFRESH_HZ = 30


class SessionView(App[int]):
    """One screen: graph, threads, queues, not_ready, GraphTasks, events, timeline.

    A subclass opens the session in ``_open``: it sets ``session`` (after ``_reset``)
    and draws it with ``_tick(force=True)``."""

    BINDINGS = [
        Binding("f", "find_node", "Find node", show=False),
        # w shows (check_action) only while the side panes are tabs: a short terminal
        Binding("w", "next_pane", "Pane",
                tooltip="Show the next side pane (they are tabs in a terminal under "
                        f"{TALL_HEIGHT} rows)"),
        *[Binding(p.key, f"show_pane('{p.name}')", f"Show the {p.label} pane", show=False,
                  tooltip=f"Show the {p.label} pane (the side panes are tabs in a terminal "
                          f"under {TALL_HEIGHT} rows)")
          for p in PANES],
    ]
    # A short terminal: the side panes become tabs (app.tcss, PaneTabs); a very tall one:
    # a longer event log.
    VERTICAL_BREAKPOINTS = [(0, "-short"), (TALL_HEIGHT, "-tall"), (60, "-very-tall")]

    # Neither repaints the whole screen when it changes (a reactive of the App does, by
    # default): the panes that show them update themselves.
    cursor: var[int] = var(0)
    sub_title: Reactive[str] = Reactive("", compute=False, repaint=False)

    def __init__(self) -> None:
        super().__init__()
        self.session: Session | None = None
        self._follow = True  # the shown index follows the newest event
        self._seen = -1  # the newest event drawn
        self._last_drawn: tuple[int, int, str, Any] | None = None
        self._announced_deadlock = False
        self._announced_fold_error = False
        self._mounted = False
        self.pane = PANES[0].name  # the side pane shown while they are tabs
        self._tabbed: bool | None = None  # the side panes are tabs (a short terminal)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """The graph's colours (``graph-ready``, ...: ``palette``) for the current theme."""
        return {**super().get_theme_variable_defaults(), **theme_defaults(self.current_theme)}

    # --- layout ---------------------------------------------------------------------------
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
        self._check_size()
        self._mounted = True
        self._open()
        self.set_interval(1 / REFRESH_HZ, self._on_timer)

    def _open(self) -> None:
        raise NotImplementedError

    def _reset(self) -> None:
        """Before another session: nothing of the last one stays on screen."""
        self._seen, self._last_drawn, self._announced_deadlock = -1, None, False
        self._follow = True
        self.cursor = 0
        self.query_one(EventLog).clear()  # the new run's events replace these
        self.query_one(ThreadsPane).clear()
        self.query_one(GraphPane).reset()
        for pane in self.query(SidePane):  # a new run: the panes fit its content again
            pane.reset()

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Textual's ``notify``, always as text: a message may carry names or errors from
        a recording (markup is never read, control characters are made visible)."""
        super().notify(plain(message), title=plain(title), severity=severity,
                       timeout=timeout, markup=False)

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
        """Each pane draws the state at the cursor (it redraws only what changed)."""
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
        self.query_one(GraphPane).show(state, last.node if last is not None else None,
                                       s.forward)
        self.query_one("#queues", SidePane).show(render.queues_text(state))
        self.query_one("#not-ready", SidePane).show(render.not_ready_text(state))
        self.query_one("#graph-tasks", SidePane).show(render.graph_tasks_text(state))
        self._draw_threads(state)
        self.query_one(Banner).show(s.status, s.report, self.cursor == self._seen,
                                    s.error_text)
        self.query_one(Timeline).show(self.cursor, self._seen, s.status)
        self.query_one(EventLog).select_event(self.cursor)
        self._update_title()

    def _draw_threads(self, state: EngineState | None = None) -> None:
        """The threads pane; between events too, in a live run: the controller's words
        (paused, blocked on a lock) change without an event."""
        s = self.session
        if s is None:
            return
        if state is None:
            if not s.live:
                return
            state = s.state_at(self.cursor)
        live = s.thread_states() if s.live and self.cursor == self._seen else {}
        cycle: set[str] = set()
        if s.status == "deadlock" and s.report is not None:
            cycle = {c.split(" ", 1)[1] for c in render.report_field(s.report, "cycle", [])
                     if c.startswith("thread ")}
        self.query_one(ThreadsPane).show(render.threads_rows(state, live), cycle)

    def _append_log(self, n: int) -> None:
        """The event log holds every event up to the newest."""
        s = self.session
        if s is None:
            return
        log = self.query_one(EventLog)
        if not s.live:
            if n and log.row_count != n:
                log.show_recording(n, s.event, self._names())
            return
        new = s.events(log.row_count, n)
        if new:
            log.append_events(new, self._names())

    def _names(self) -> dict[int, str]:
        s = self.session
        if s is None:
            return {}
        state = s.state_at(self._seen)
        return {n: info.name for n, info in state.nodes.items()}

    def _update_title(self) -> None:
        s = self.session
        if s is None:
            self.sub_title = "no scenario"
        else:
            mode = ("live" if s.live else "replay") + self._play_label()
            self.sub_title = (f"{s.scenario_name} | {mode} | event {self.cursor}/{self._seen}"
                              f" | {s.policy} | {s.devices}")
        self.query_one(Header).show(self.title, self.sub_title)

    def _play_label(self) -> str:
        """Said after live or replay in the title (``ReplayView``: the play speed)."""
        return ""

    # --- size -----------------------------------------------------------------------------
    def on_resize(self, event: events.Resize) -> None:
        # event.size: this handler runs before the app's own one updates self.size (the
        # "too small" message stayed up after the terminal was enlarged).
        self._check_size(event.size)

    def _check_size(self, size: Size | None = None) -> None:
        w, h = size or self.size
        tabbed = h < TALL_HEIGHT  # as VERTICAL_BREAKPOINTS: the screen's class "-short"
        if tabbed != self._tabbed:
            self._tabbed = tabbed
            self.refresh_bindings()  # w shows in the footer only while the panes are tabs
        small = w < MIN_WIDTH or h < MIN_HEIGHT
        self.default_screen.set_class(small, "too-small")  # not a dialog shown on top
        if small:
            self.query_one("#too-small", Static).update(
                f"The terminal is {w}x{h}; autograd-tui needs at least {MIN_WIDTH}x{MIN_HEIGHT}."
                "\nEnlarge the window (q quits).")

    # --- the side panes --------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "next_pane":
            return bool(self._tabbed)  # with every pane shown there is no next one to show
        return super().check_action(action, parameters)

    def action_next_pane(self) -> None:
        """The next side pane (tabs, in a short terminal)."""
        self.action_show_pane(PANE_NAMES[(PANE_NAMES.index(self.pane) + 1) % len(PANES)])

    def action_show_pane(self, name: str) -> None:
        """Show this side pane: in a short terminal the others are hidden (class
        ``-current``; app.tcss); in a tall one every pane is shown anyway."""
        if name not in PANE_NAMES:
            return
        self.pane = name
        for p in PANES:
            self.query_one(f"#{p.id}").set_class(p.name == name, "-current")
        self.query_one(PaneTabs).show(name)

    def on_pane_tabs_chosen(self, event: PaneTabs.Chosen) -> None:
        self.action_show_pane(event.name)

    # --- messages from the panes ----------------------------------------------------------
    def on_event_log_event_chosen(self, event: EventLog.EventChosen) -> None:
        self._follow = False
        self.cursor = event.k

    def on_graph_pane_node_chosen(self, event: GraphPane.NodeChosen) -> None:
        self._draw(force=True)  # its details

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

    # --- actions: views -------------------------------------------------------------------
    def action_toggle_view(self) -> None:
        self.query_one(GraphPane).view_presses += 1
        self._draw(force=True)

    def action_find_node(self) -> None:
        """The grouped view: open the groups holding the node the shown event touched."""
        s = self.session
        last = s.state_at(self.cursor).last_event if s is not None else None
        node = last.node if last is not None else None
        if not self.query_one(GraphPane).reveal(node):
            self.notify("f finds the shown event's node in the grouped view (a PyTorch "
                        "graph's nodes by module; v switches views)", timeout=3)

    def action_details(self) -> None:
        self.query_one(GraphPane).toggle_details()
        self._draw(force=True)

    def action_pan(self, dx: int, dy: int) -> None:
        self.query_one(GraphPane).pan(dx, dy)
