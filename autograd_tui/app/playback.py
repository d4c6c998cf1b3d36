"""Playing a session's history and jumping in it: the speeds of play, and the search for
the next (or previous) event of a kind or of a node.

Not in PyTorch.  Pure functions of a ``Session``'s events (its public API: ``count``,
``events``, ``state_at``), so a recording and a live run's history are walked alike;
the keys that use them are in ``debugger/screen.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autograd_tui.engine.events import Event
from autograd_tui.session import Session
from autograd_tui.words import EVENT_KINDS, plain

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
_NODE_ID = re.compile(r"^(?:[A-Za-z_][\w.]*)?#(\d+)$|^(\d+)$")  # #5, 5, MulBackward0#5


class QueryError(ValueError):
    """A jump that names no event kind or node: the message says what is wrong."""


@dataclass(frozen=True)
class EventQuery:
    """Which events a jump stops at: of ``kind`` (any if None) and touching one of
    ``nodes`` (any if None)."""

    text: str
    kind: str | None = None
    nodes: frozenset[int] | None = None

    def matches(self, e: Event) -> bool:
        if self.kind is not None and e.kind != self.kind:
            return False
        return self.nodes is None or e.node in self.nodes


def parse_query(text: str, names: dict[int, str]) -> EventQuery:
    """``push``, ``#5``, ``5``, ``MulBackward0#5``, ``MulBackward0`` (every node of that
    name, in any case), or a kind and nodes together (``push #5``: both must match).
    ``names``: node id -> name, of the graph so far."""
    kind: str | None = None
    nodes: set[int] | None = None
    words = text.split()
    if not words:
        raise QueryError("type an event kind (e.g. push) or a node (e.g. #5, MulBackward0)")
    for w in words:
        if w.lower() in EVENT_KINDS:
            if kind is not None and kind != w.lower():
                raise QueryError(f"one event kind at a time ({kind} or {w.lower()})")
            kind = w.lower()
            continue
        m = _NODE_ID.match(w)
        if m:
            found = {int(m.group(1) or m.group(2))}
        else:
            found = {n for n, name in names.items() if name.lower() == w.lower()}
            if not found:
                raise QueryError(f"{plain(w)!r} is neither an event kind (push, pop, "
                                 "node_start, ...) nor a node of this graph (#5, "
                                 "MulBackward0)")
        nodes = found if nodes is None else nodes | found
    return EventQuery(" ".join(words), kind, None if nodes is None else frozenset(nodes))


def find_event(session: Session, query: EventQuery, at: int, forward: bool = True,
               end: int | None = None) -> int | None:
    """The k of the first event after ``at`` (``forward``) or the last one before it that
    matches ``query``, among events 1..``end`` (default: all); None if there is none.
    Event k is ``session.events()[k - 1]``; ``at`` is the shown event (0: none)."""
    n = session.count() if end is None else min(end, session.count())
    if forward:
        for i, e in enumerate(session.events(at, n), start=at):
            if query.matches(e):
                return i + 1
        return None
    evs = session.events(0, max(min(at - 1, n), 0))
    for i in range(len(evs) - 1, -1, -1):
        if query.matches(evs[i]):
            return i + 1
    return None
