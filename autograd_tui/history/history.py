"""``History``: the one store of a run's events, with snapshots to seek in both directions.

Not in PyTorch.  The controller appends each event as the engine emits it (a list
append: nothing is folded then); the fold catches up when a view asks for a state.
A loaded recording is added a block of lines at a time (``extend_lines``: kept
encoded, in an ``EventStore``), and each block folded (and so checked) at once.  Every
view (the app, the CLI, export, replay) reads a History and nothing else keeps its
own copy of the events.  ``state_at(k)`` is "at k": the state after events 1..k.
"""

from __future__ import annotations

import bisect
import gc
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from autograd_tui.engine.events import EVENT_TYPES, Event
from autograd_tui.engine.ready_queue import (
    compare_ignoring_depth,
    compare_node_task_time,
    pop_heap,
    push_heap,
)
from autograd_tui.history.fold import _fold_into, fold
from autograd_tui.history.state import (
    _GONE,
    _NODE_MAPS,
    _PAIR_MAPS,
    EngineState,
    GraphTaskRef,
    QueuedTask,
    StateError,
    TaskFn,
    ThreadState,
    _get_gt,
    _get_node,
    _no_changes,
)
from autograd_tui.history.store import KINDS, EventStore


class _Delta(NamedTuple):
    maps: dict[str, dict[Any, Any]]  # field -> {key: value or _GONE}
    # the threads the interval's events named, as they are at its end (the others are as
    # the snapshot before left them).  No queues: a seek replays the pushes and pops since
    # the checkpoint (``_replay_queues``), so a queue of thousands of tasks is not copied
    # at every snapshot (which made a queue that only grows quadratic in memory)
    threads: dict[str, ThreadState]
    index: int
    last_event: Event | None
    deadlock: dict[str, Any] | None
    depth_priority: bool
    gone: tuple[tuple[str, list[Any]], ...] = ()  # (map, keys deleted): found once, here


def _delta(s: EngineState, events: Sequence[Event]) -> _Delta:
    """What changed since the last snapshot: the entries the fold wrote inline (and
    dependencies_computed), plus those of the other events (each changes only
    entries keyed by its node, its (GraphTask, node) or its GraphTask), looked up
    now.  Takes ``s.changes`` and ``s.rare`` and starts them afresh."""
    maps, rare = s.changes, s.rare
    s.changes, s.rare = _no_changes(), []
    if rare:
        nodes = set(map(_get_node, rare))
        nodes.discard(None)
        gts = set(map(_get_gt, rare))
        gts.discard(None)
        for name in _NODE_MAPS:  # never deleted from
            m = getattr(s, name)
            maps[name].update({k: m[k] for k in nodes if k in m})
        # each of these events changes only the entry of its own (GraphTask, node): not
        # every GraphTask x node pair (quadratic when each names a new one)
        pairs = {(e.graph_task, e.node) for e in rare if e.node is not None}
        for name in _PAIR_MAPS:
            m = getattr(s, name)
            maps[name].update({k: m.get(k, _GONE) for k in pairs})
        maps["graph_tasks"].update({k: s.graph_tasks[k] for k in gts if k in s.graph_tasks})
    gone = tuple((name, keys) for name in _PAIR_MAPS
                 if (keys := [k for k, v in maps[name].items() if v is _GONE]))
    threads = {name: s.threads[name] for name in {e.thread for e in events}
               if name in s.threads}
    return _Delta(maps, threads, s.index, s.last_event, s.deadlock, s.depth_priority, gone)


_PUSH, _POP, _CREATED = (EVENT_TYPES[k] for k in ("push", "pop", "graph_task_created"))
_QUEUE_KINDS = np.array([KINDS.index(k) for k in ("push", "pop", "graph_task_created")],
                        np.uint8)
_PUSH_POP = _QUEUE_KINDS[:2]
_NO_REF = GraphTaskRef(None, 0, alive=False)


def _replay_queues(s: EngineState, events: Sequence[Event]) -> None:
    """The ready queues of ``s`` taken through ``events`` (already folded once, so valid):
    the fold's pushes, pops and expiries, with the engine's comparator, and nothing else."""
    refs, gts, heaps = s.refs, s.graph_tasks, s.heaps
    priority = s.depth_priority
    for e in events:
        t = type(e)
        if t is _CREATED:
            priority = e.depth_priority
            continue
        if (t is not _PUSH and t is not _POP) or e.shutdown:
            continue
        for gid in e.gone:
            ref = refs.get(gid)
            if ref is not None:
                ref.alive = False
        comp = compare_node_task_time if priority else compare_ignoring_depth
        if t is _POP:
            pop_heap(heaps[e.queue], comp)
            continue
        gid = e.graph_task
        ref = _NO_REF if gid is None else refs.get(gid)
        if ref is None or (gid is not None and not ref.alive):
            ref = refs[gid] = GraphTaskRef(gid, gts[gid].reentrant_depth)  # type: ignore[index]
        fn = TaskFn(e.node, e.seq_nr) if e.node is not None else None
        push_heap(heaps.setdefault(e.queue, []), QueuedTask(ref, fn), comp)


def _apply_delta(s: EngineState, d: _Delta) -> None:
    for name, changes in d.maps.items():
        getattr(s, name).update(changes)
    for name, keys in d.gone:
        pop = getattr(s, name).pop
        for k in keys:
            pop(k, None)
    s.threads.update(d.threads)
    s.index, s.last_event, s.deadlock = d.index, d.last_event, d.deadlock
    s.depth_priority = d.depth_priority


#: appended events kept as objects before they are encoded into lines (``EventStore.
#: compact``): a live run of millions of events takes a fifth of the memory, and a run
#: of the usual size is never touched
COMPACT_AT = 1 << 17


class History:
    """Events with snapshots every ``every`` events: ``state_at(k)`` in either direction.

    ``state_at(k)`` is the state after events 1..k (``state_at(0)``: before any).
    ``append`` only stores (engine threads call it at every event, through the
    controller); the fold catches up when a state is asked for.  ``extend`` stores
    and folds at once (a recording is checked as it loads).  A snapshot is a delta
    (the entries the last ``every`` events touched) or, once the deltas since the
    last checkpoint hold a quarter as many entries as the state, a checkpoint (a
    full copy): a seek costs one copy, at most that many delta entries and fewer
    than ``every`` folds.  Reading is thread-safe; appends come from one thread at
    a time (the controller's gate).
    """

    def __init__(self, events: Sequence[Event] = (), every: int = 1024,
                 min_checkpoint: int = 20_000, on_snapshot: Any = None,
                 fold_now: bool = True) -> None:
        if every < 1:
            raise ValueError("every must be >= 1")
        self.every = every
        self.min_checkpoint = min_checkpoint
        self.events = EventStore()
        self._folded = 0  # events[:_folded] are in _head
        self._lock = threading.RLock()
        self._snap_index: list[int] = [0]
        self._snaps: list[EngineState | _Delta] = [EngineState()]
        self._ckpt_of: list[int] = [0]  # per snapshot: the position of its checkpoint
        self._since_ckpt = 0  # delta entries since the last checkpoint
        self._head = EngineState()
        # a person steps back and forth in one place: the state at the start of the
        # interval stepped in (built by the second seek into it) spares the deltas
        self._last_k = -1
        self._near: tuple[int, EngineState] | None = None
        # (a checkpoint's index, positions, events, end): see _queue_events
        self._queued: tuple[int, np.ndarray, list[Event], int] = (-1, np.zeros(0, np.int64),
                                                                  [], 0)
        self.on_snapshot = on_snapshot  # called at each snapshot (a load's memory budget)
        # check_in_background's thread, the message of what it refused, its stop flag
        self._checker: threading.Thread | None = None
        self.check_error: str | None = None
        self._stop_check = threading.Event()
        self._deferred = not fold_now  # a recording left to the background check
        if isinstance(events, EventStore):  # a recording's store: folded, not copied
            self.events = events
            if fold_now:
                self._catch_up()
        else:
            self.extend(events)

    def __len__(self) -> int:
        return len(self.events)

    def append(self, event: Event) -> None:
        """Store one more event; it is folded when a state at or after it is asked for."""
        self.events.append(event)

    def extend(self, events: Iterable[Event]) -> None:
        """Store and fold ``events`` now.  If one contradicts the state, the ones before
        it are kept, the error is raised with ``index`` (its position in ``events``) and
        the head is the state before it."""
        evs = events if isinstance(events, (list, tuple)) else list(events)
        with self._lock:
            self._catch_up()
            start = len(self.events)
            self.events.extend(evs)
            try:
                self._catch_up()
            except Exception as err:
                self.events.truncate(self._folded)
                err.index = self._folded - start  # type: ignore[attr-defined]
                raise

    def extend_lines(self, buf: Any, offs: np.ndarray, events: Sequence[Event]) -> None:
        """``extend`` for a recording's lines: ``events`` are the lines ``buf[offs[i]:
        offs[i + 1]]``, decoded; the lines are kept (not the objects) and ``events``
        folded now.  An error is as in ``extend``."""
        with self._lock:
            self._catch_up()
            start = len(self.events)
            self.events.add_lines(buf, offs, events)
            try:
                self._catch_up(events, start)
            except Exception as err:
                self.events.truncate(self._folded)
                err.index = self._folded - start  # type: ignore[attr-defined]
                raise

    def _between(self, a: int, b: int, src: Sequence[Event] | None, base: int) -> list[Event]:
        """Events a..b: from ``src`` (the decoded events from ``base`` on) if it has them."""
        if src is not None and a >= base:
            return list(src[a - base:b - base])
        return self.events[a:b]

    def _catch_up(self, src: Sequence[Event] | None = None, base: int = 0,
                  upto: int | None = None) -> None:
        """Fold the stored events not yet folded (a snapshot at every ``every``-th).
        ``src``: the events from ``base`` on, already decoded (a recording's block);
        ``upto``: fold only so far."""
        n = len(self.events) if upto is None else min(upto, len(self.events))
        while self._folded < n:
            done = self._folded
            chunk = self._between(done, min(n, done + self.every - done % self.every),
                                  src, base)
            try:
                _fold_into(self._head, chunk)
            except Exception as err:
                good = done + err.index  # type: ignore[attr-defined]
                self._head = fold(self.events[self._snap_index[-1]:good],
                                  self._state_of(len(self._snaps) - 1))
                self._folded = good
                err.index = good  # type: ignore[attr-defined]
                raise
            self._folded = done + len(chunk)
            if self._folded % self.every == 0:
                mine = src is None  # the chunk just folded: not decoded a second time
                self._snapshot(chunk if mine else src, done if mine else base)
        if self.events.appended() >= COMPACT_AT:  # a long live run: keep it as lines
            self.events.compact()

    def _snapshot(self, src: Sequence[Event] | None, base: int) -> None:
        if self.on_snapshot is not None:
            self.on_snapshot()
        n = self._folded
        evs = self._between(self._snap_index[-1], n, src, base)
        d = _delta(self._head, evs)
        self._since_ckpt += sum(map(len, d.maps.values())) + len(d.threads) + int(
            np.isin(self.events.kinds(self._snap_index[-1], n), _PUSH_POP).sum())
        self._snap_index.append(n)
        if self._since_ckpt >= max(self._head.size() // 4, self.min_checkpoint):
            self._snaps.append(self._head.copy())
            self._ckpt_of.append(len(self._snaps) - 1)
            self._since_ckpt = 0
        else:
            self._snaps.append(d)
            self._ckpt_of.append(self._ckpt_of[-1])

    def _state_of(self, k: int) -> EngineState:
        """A fresh copy of the state at snapshot ``k``."""
        c = self._ckpt_of[k]
        base = self._snaps[c]
        assert isinstance(base, EngineState)
        s = base.copy()
        for j in range(c + 1, k + 1):
            d = self._snaps[j]
            assert isinstance(d, _Delta)
            _apply_delta(s, d)
        if k > c:
            a, b = self._snap_index[c], self._snap_index[k]
            # only the pushes, pops and GraphTask creations: found by the kind column,
            # decoded alone (not the whole stretch since the checkpoint)
            _replay_queues(s, self._queue_events(a, b))
            s.depth_priority = self._snaps[k].depth_priority  # type: ignore[union-attr]
        return s

    def _queue_events(self, a: int, b: int) -> list[Event]:
        """The pushes, pops and GraphTask creations among events a..b: found by the kind
        column and decoded alone.  Kept for the last ``a`` (a checkpoint): seeks near one
        place replay the same stretch, so only what it grew by is decoded again."""
        qa, at, have, end = self._queued
        if qa != a:
            at, have, end = np.zeros(0, np.int64), [], a
        if b > end:
            more = np.flatnonzero(np.isin(self.events.kinds(end, b), _QUEUE_KINDS)) + end
            have = have + self.events.pick(more)
            at, end = np.concatenate((at, more)), b
        self._queued = (a, at, have, end)
        return have[:int(np.searchsorted(at, b))]

    # --- a recording checked in the background ----------------------------------------------
    def check_in_background(self, describe: Callable[[Exception], str]) -> None:
        """Fold (and so check) the stored events in a thread, ``every`` at a time, the lock
        let go between: the app shows a big recording before it is checked.  ``available``
        says how far it got; an error stops it, ``check_error`` = ``describe(err)``."""
        if not self.checking and self._folded < len(self.events) and not self.check_error:
            self._stop_check.clear()  # (stopped by a closed session: the next one goes on)
            self._checker = threading.Thread(target=self._check, args=(describe,),
                                             name="recording-check", daemon=True)
            self._checker.start()

    def _check(self, describe: Callable[[Exception], str]) -> None:
        # The state built is long-lived and acyclic: the cyclic collector would only rescan
        # it (as in recordings.load): off until the check ends, what was built frozen after
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            while not self._stop_check.is_set() and self._folded < len(self.events):
                with self._lock:  # readers wait one chunk at most
                    self._catch_up(upto=self._folded + self.every)
        except Exception as err:  # noqa: BLE001 - the one message, said by the app
            self.check_error = describe(err)
        finally:
            if was_enabled:
                gc.freeze()
                gc.enable()

    @property
    def checking(self) -> bool:
        return self._checker is not None and self._checker.is_alive()

    @property
    def available(self) -> int:
        """Events that can be shown: all, but of a recording left to the background check
        only those checked (a later state would wait for it, or fold unchecked events)."""
        return self._folded if self._deferred else len(self.events)

    def wait_checked(self, timeout: float | None = None) -> bool:
        """Until the background check has ended (True), or ``timeout`` s."""
        if self._checker is not None:
            self._checker.join(timeout)
        return not self.checking

    def stop_checking(self) -> None:
        """End the background check (the recording is closed); wait for its thread."""
        self._stop_check.set()
        self.wait_checked()

    @property
    def head(self) -> EngineState:
        """The state after every event so far (do not mutate)."""
        with self._lock:
            self._catch_up()
            return self._head

    @property
    def folded(self) -> int:
        """How many events the head holds (all of them, unless one failed to fold)."""
        return self._folded

    def latest(self) -> EngineState:
        """The head folded as far as it goes: an event that contradicts the state (a
        case the fold does not model) stops it there instead of raising (do not mutate)."""
        with self._lock:
            try:  # (a recording left to the background check: only what it checked)
                self._catch_up(upto=self._folded if self._deferred else None)
            except StateError:
                pass
            return self._head

    def state_at(self, k: int) -> EngineState:
        """A copy of the state at k: after events 1..k."""
        with self._lock:
            n = len(self.events)
            if not 0 <= k <= n:
                raise IndexError(f"event index {k} is outside 0..{n}")
            if k > self._folded:
                self._catch_up()
            if k == self._folded:
                return self._head.copy()
            i = bisect.bisect_right(self._snap_index, k) - 1
            if self._near is not None and self._near[0] == i:
                s = self._near[1].copy()
            else:
                s = self._state_of(i)
                if self._last_k == i:  # stepping within one interval: keep its start state
                    self._near = (i, s.copy())
                self._last_k = i
            _fold_into(s, self.events[self._snap_index[i]:k])
            return s
