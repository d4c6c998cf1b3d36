"""The thread table: the controller's record of each engine thread, and the snapshot it hands out.

Not in PyTorch.  One lock guards the whole table (the gates' and the driver's conditions
are on it, see ``gates.py``); a thread is found by name, by number (1, 2, ... in the order
threads registered: the numbers of schedule strings and the app's keys) or by its ident
(the engine reports waits by ident).  Whoever needs to read the threads without holding
the lock, deadlock analysis first, gets ``snapshot()``: frozen copies taken under the lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from autograd_tui.control.threads import (
    ThreadInfo,
    ThreadStatus,
    describe_wait,
    own_cpu_clock,
    thread_status,
)
from autograd_tui.engine.sync import condition
from autograd_tui.history import EngineState


@dataclass(frozen=True)
class ThreadSnapshot:
    """One thread as it was when the snapshot was taken; what it waits on in plain fields."""

    name: str
    index: int
    state: str  # transit | running | paused | waiting | finished
    user_paused: bool
    waiting_kind: str | None  # queue | future | lock | signal | pool
    waiting_for: str | None  # in words: "queue cpu", "lock 'user lock'", ...
    target: str | None  # the queue's, lock's or signal's name
    graph_task: int | None  # a future's GraphTask
    holder: str | None  # a lock's holder, when the controller knows that thread
    set_by: str | None  # a signal's expected setter


@dataclass(frozen=True)
class ThreadsSnapshot:
    """Every thread, by number, and what ``thread_states()`` says of each, at one moment."""

    threads: tuple[ThreadSnapshot, ...]
    statuses: Mapping[str, ThreadStatus]

    def get(self, name: str) -> ThreadSnapshot | None:
        return next((t for t in self.threads if t.name == name), None)

    def words(self) -> dict[str, str]:
        """Thread -> its state in words (a deadlock report's ``threads``)."""
        return {n: s.detail for n, s in self.statuses.items()}


class ThreadTable:
    """The threads the controller knows, under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cv = condition(self.lock)  # the driver's; each thread has its own
        self.by_name: dict[str, ThreadInfo] = {}
        self.by_ident: dict[int, ThreadInfo] = {}

    def add(self, name: str, *, paused: bool) -> ThreadInfo:
        """Number a new thread (lock held)."""
        if name in self.by_name:
            raise RuntimeError(f"thread name {name!r} registered twice")
        info = ThreadInfo(name, len(self.by_name) + 1)  # threads are numbered from 1
        info.cv = condition(self.lock)  # its own wake-up, on the one lock
        info.user_paused = paused
        self.by_name[name] = info
        return info

    def bind(self, name: str) -> ThreadInfo:
        """The calling thread is ``name`` (lock held): its waits are reported by ident."""
        info = self.by_name[name]
        info.ident = threading.get_ident()
        info.clock = own_cpu_clock()  # taken here, on the thread: see threads.sample
        self.by_ident[info.ident] = info
        return info

    def info(self, thread: str | int) -> ThreadInfo:
        """A thread by name or by number."""
        if isinstance(thread, int):
            for t in self.by_name.values():
                if t.index == thread:
                    return t
            raise KeyError(f"no thread #{thread}; threads: {self.names()}")
        if thread not in self.by_name:
            raise KeyError(f"no thread named {thread!r}; threads: {self.names()}")
        return self.by_name[thread]

    def names(self) -> list[str]:
        return list(self.by_name)

    def __contains__(self, name: object) -> bool:
        return name in self.by_name

    def __iter__(self) -> Iterator[ThreadInfo]:
        return iter(self.by_name.values())

    def __len__(self) -> int:
        return len(self.by_name)

    def status(self, info: ThreadInfo, state: EngineState, *, serialized: bool) -> ThreadStatus:
        return thread_status(info, state, serialized=serialized, by_ident=self.by_ident)

    def snapshot(self, state: EngineState, *, serialized: bool) -> ThreadsSnapshot:
        """Every thread, copied under the lock; ``state`` (the run's head) names the nodes."""
        with self.lock:
            infos = sorted(self.by_name.values(), key=lambda t: t.index)
            statuses = {t.name: self.status(t, state, serialized=serialized)
                        for t in self.by_name.values()}
            return ThreadsSnapshot(tuple(self._copy(t) for t in infos),
                                   MappingProxyType(statuses))

    def _copy(self, t: ThreadInfo) -> ThreadSnapshot:
        waiting = t.state == "waiting"
        obj = t.waiting_on if waiting else None
        kind = t.waiting_kind if waiting else None
        holder = None
        if kind == "lock" and obj.holder is not None:
            h = self.by_ident.get(obj.holder)
            holder = h.name if h is not None else None
        return ThreadSnapshot(
            t.name, t.index, t.state, t.user_paused, kind,
            describe_wait(obj) if waiting else None,
            getattr(obj, "name", None) if kind in ("queue", "lock", "signal") else None,
            obj.graph_task_id if kind == "future" else None, holder,
            obj.set_by if kind == "signal" else None)
