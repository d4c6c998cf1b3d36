"""Playing a session's history and jumping in it: the speeds of play, and the search for
the next (or previous) event a query matches (the query itself: ``control/query.py``).

Not in PyTorch.  Pure functions of a ``Session``'s events (its public API: ``count``,
``events``, ``state_at``), so a recording and a live run's history are walked alike;
the keys that use them are in ``debugger/screen.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autograd_tui.control.query import EventQuery
from autograd_tui.session import Session

#: events per second that play (space) can show; ``+`` / ``-`` move along these
SPEEDS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000)
DEFAULT_SPEED = 5


class Player:
    """Play's state: on or off, the speed, and how many events are due at a time.

    The app's timer calls ``due(now)``: the events to advance since the last call, from
    the time played at the current speed (so a slow timer tick never slows play down)."""

    def __init__(self) -> None:
        self.playing = False
        self.speed = DEFAULT_SPEED
        self._start = 0.0  # when play (or this speed) began
        self._done = 0  # events advanced since then

    def start(self, now: float) -> None:
        self.playing = True
        self._start, self._done = now, 0

    def stop(self) -> None:
        self.playing = False

    def change_speed(self, steps: int, now: float) -> int:
        """Move ``steps`` along ``SPEEDS`` (clamped); the new speed."""
        i = SPEEDS.index(self.speed) if self.speed in SPEEDS else SPEEDS.index(DEFAULT_SPEED)
        self.speed = SPEEDS[min(max(i + steps, 0), len(SPEEDS) - 1)]
        self._start, self._done = now, 0  # the new speed counts from now
        return self.speed

    def due(self, now: float) -> int:
        """How many events to advance now (0 when not playing)."""
        if not self.playing:
            return 0
        total = int((now - self._start) * self.speed)
        n, self._done = total - self._done, total
        return max(n, 0)

    @property
    def label(self) -> str:
        """What the header says while playing."""
        return f"▶ {self.speed}/s" if self.playing else ""


# --- jumps ---------------------------------------------------------------------------------
def find_event(session: Session, query: EventQuery, at: int, forward: bool = True,
               end: int | None = None, names: dict[int, str] | None = None,
               meta: Mapping[int, Mapping[str, Any]] | None = None) -> int | None:
    """The k of the first event after ``at`` (``forward``) or the last one before it that
    matches ``query`` (``control/query.py``, the breakpoints' rule; ``names``: node id ->
    name, of the graph so far; ``meta``: their ``node_meta``, for module paths), among
    events 1..``end`` (default: all); None if there is none.  Event k is
    ``session.events()[k - 1]``; ``at`` is the shown event (0: none)."""
    matches = query.matcher(names, meta)
    n = session.count() if end is None else min(end, session.count())
    if forward:
        for i, e in enumerate(session.events(at, n), start=at):
            if matches(e):
                return i + 1
        return None
    evs = session.events(0, max(min(at - 1, n), 0))
    for i in range(len(evs) - 1, -1, -1):
        if matches(evs[i]):
            return i + 1
    return None
