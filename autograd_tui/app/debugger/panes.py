"""``Panes``: the debugger screen's widgets, drawn from a ``Session`` at the shown event,
and laid out for the terminal's size (the side panes as tabs in a short one).

Data flows one way: engine threads append events to the ``Session`` (under a lock,
never touching a widget); the screen's timer (about 30 times a second) notices new
events and asks ``Panes`` to draw ``EngineState`` at the cursor; each pane redraws only
what changed.  A plain object over the widgets ``DebuggerScreen.compose`` made: it
reads the session and the numbers it is given, and keeps no event of its own.
"""

from __future__ import annotations

from typing import Any

from textual.geometry import Size
from textual.screen import Screen
from textual.widgets import Static

from autograd_tui.app import render
from autograd_tui.app.widgets import (
    Banner,
    EventLog,
    GraphPane,
    Header,
    PaneTabs,
    SidePane,
    ThreadsPane,
    Timeline,
)
from autograd_tui.app.widgets.pane_tabs import PANE_NAMES, PANES, TALL_HEIGHT
from autograd_tui.history.state import EngineState
from autograd_tui.session import Session

MIN_WIDTH, MIN_HEIGHT = 80, 24


class Panes:
    """What the screen shows of a session: the graph, the side panes, the threads, the
    banner, the timeline, the event log and the title."""

    def __init__(self, screen: Screen[Any]) -> None:
        self.graph = screen.query_one(GraphPane)
        self.queues = screen.query_one("#queues", SidePane)
        self.not_ready = screen.query_one("#not-ready", SidePane)
        self.graph_tasks = screen.query_one("#graph-tasks", SidePane)
        self.threads = screen.query_one(ThreadsPane)
        self.banner = screen.query_one(Banner)
        self.timeline = screen.query_one(Timeline)
        self.log = screen.query_one(EventLog)
        self.header = screen.query_one(Header)
        self._side = list(screen.query(SidePane))
        self._screen = screen
        self._last_drawn: tuple[int, int, str, Any] | None = None
        self.tabbed: bool | None = None  # the side panes are tabs (a short terminal)
        self.pane = PANES[0].name  # the side pane shown while they are tabs

    def reset(self) -> None:
        """Before another session: nothing of the last one stays on screen."""
        self._last_drawn = None
        self.log.clear()  # the new run's events replace these
        self.threads.clear()
        self.graph.reset()
        for pane in self._side:  # a new run: the panes fit its content again
            pane.reset()

    def draw(self, s: Session, cursor: int, seen: int, force: bool = False) -> bool:
        """Each pane draws the state at ``cursor`` (``seen``: the newest event drawn);
        True if anything was drawn again (the title too, then)."""
        # The status and the report are in the key: they change without a new event.
        key = (cursor, seen, s.status, s.report)
        if key == self._last_drawn and not force:
            self.draw_threads(s, cursor, seen)
            return False
        self._last_drawn = key
        state = s.state_at(cursor)
        last = state.last_event
        self.graph.show(state, last.node if last is not None else None, s.forward)
        self.queues.show(render.queues_text(state))
        self.not_ready.show(render.not_ready_text(state))
        self.graph_tasks.show(render.graph_tasks_text(state))
        self.draw_threads(s, cursor, seen, state)
        self.banner.show(s.status, s.report, cursor == seen, s.error_text)
        self.timeline.show(cursor, seen, s.status)
        self.log.select_event(cursor)
        return True

    def draw_threads(self, s: Session, cursor: int, seen: int,
                     state: EngineState | None = None) -> None:
        """The threads pane; between events too, in a live run: the controller's words
        (paused, blocked on a lock) change without an event."""
        if state is None:
            if not s.live:
                return
            state = s.state_at(cursor)
        live = s.thread_states() if s.live and cursor == seen else {}
        cycle: set[str] = set()
        if s.status == "deadlock" and s.report is not None:
            cycle = {c.split(" ", 1)[1] for c in render.report_field(s.report, "cycle", [])
                     if c.startswith("thread ")}
        self.threads.show(render.threads_rows(state, live), cycle)

    def append_log(self, s: Session, n: int, names: dict[int, str]) -> None:
        """The event log holds every event up to the newest (``n``)."""
        if not s.live:
            if n and self.log.row_count != n:
                self.log.show_recording(n, s.event, names)
            return
        new = s.events(self.log.row_count, n)
        if new:
            self.log.append_events(new, names)

    # --- the terminal's size and the side panes -----------------------------------------------
    def fit(self, size: Size) -> bool:
        """Lay out for a terminal of ``size``: below ``TALL_HEIGHT`` rows the side panes
        are tabs, below 80x24 a message asks for more.  True if the tabs came or went."""
        w, h = size
        tabbed = h < TALL_HEIGHT  # as VERTICAL_BREAKPOINTS: the screen's class "-short"
        changed, self.tabbed = tabbed != self.tabbed, tabbed
        small = w < MIN_WIDTH or h < MIN_HEIGHT
        self._screen.set_class(small, "too-small")  # not a dialog shown on top
        if small:
            self._screen.app.clear_notifications()  # they would cover the message
            self._screen.query_one("#too-small", Static).update(
                f"The terminal is {w}x{h}; autograd-tui needs at least {MIN_WIDTH}x{MIN_HEIGHT}."
                "\nEnlarge the window (q quits).")
        return changed

    def next_pane(self) -> str:
        return PANE_NAMES[(PANE_NAMES.index(self.pane) + 1) % len(PANES)]

    def show_pane(self, name: str) -> None:
        """Show this side pane: in a short terminal the others are hidden (class
        ``-current``; app.tcss); in a tall one every pane is shown anyway."""
        if name not in PANE_NAMES:
            return
        self.pane = name
        for p in PANES:
            self._screen.query_one(f"#{p.id}").set_class(p.name == name, "-current")
        self._screen.query_one(PaneTabs).show(name)
