"""``Moves``: the keys that move by what a person knows: over a node (``n`` / ``N``), to
the end of a module (``m`` / ``M``), out of a GraphTask (``u`` / ``U``).

Where each move ends is ``history/navigation.py``'s; this says what the screen does with
it.  Forward, a move that ends inside the history shows that event (a recording, or a
live run's history behind the newest event); one that ends beyond it in a live run runs
the engine there (``Driver.run_to``: a breakpoint on the way stops it first, space
stops it).  Backward, a move only walks the history.
"""

from __future__ import annotations

from collections.abc import Callable

from autograd_tui.app.debugger.driver import Driver
from autograd_tui.app.debugger.shown import Shown
from autograd_tui.history import navigation
from autograd_tui.session import Session

FORWARD: dict[str, Callable[[Session, int], navigation.Move]] = {
    "node": navigation.over_node,
    "module": navigation.finish_module,
    "task": navigation.out_of_task,
}
BACK: dict[str, Callable[[Session, int], int | None]] = {
    "node": navigation.back_node,
    "module": navigation.back_module,
    "task": navigation.back_task,
}
#: what a backward move looks for, for the message when there is none
BACK_WORDS = {"node": "no node starts", "module": "no module starts",
              "task": "no GraphTask is created"}


class Moves:
    """The moves over what ``shown`` shows: a member of the debugger screen."""

    def __init__(self, shown: Shown, driver: Driver) -> None:
        self.shown = shown
        self.driver = driver

    def move(self, what: str, forward: bool = True) -> None:
        v = self.shown
        s = v.session
        if s is None or what not in FORWARD or self.driver.running:
            return
        self.driver.playback.stop()
        if not forward:
            k = BACK[what](s, v.cursor)
            if k is None:
                v.notify(self._none_before(s, what, v.cursor), timeout=3)
            else:
                v.show_event(k)
            return
        m = FORWARD[what](s, v.cursor)
        if m.k is not None:
            v.show_event(m.k)
        elif m.until is None:
            v.notify(f"nothing to step to: {m.what}", timeout=3)
        elif not s.live or s.finished:
            where = "recording" if not s.live else "run"
            v.notify(f"this {where} never gets to {m.what}", timeout=3)
        else:
            self.driver.run_to(m.until, m.what)

    @staticmethod
    def _none_before(s: Session, what: str, k: int) -> str:
        """Why a backward move has nowhere to go: for a module, which module."""
        if what != "module":
            return f"{BACK_WORDS[what]} before event {k}"
        state = s.state_at(k)
        mod = navigation.module_of(state, navigation.place(state).node)
        if mod is None:
            return f"no module here: the shown event's node has none {navigation.no_module(state)}"
        return f"no node of {mod} starts before event {k} in this GraphTask"
