"""Locks and events that user code holds across a backward, visible to the controller.

Not in PyTorch.  A scenario's hook or Function may take a lock or wait on an event
while the engine runs; with a plain ``threading.Lock`` the controller could not
see who holds it, and a deadlock through it would look like a hang.  These are
``Waitable``s (``engine/sync.py``), so their waiters and holder are known, and
they emit ``thread_wait``/``thread_wake`` through the engine's wait tracker.
"""

from __future__ import annotations

import threading
from typing import Any

from autograd_tui.engine.engine import get_default_engine
from autograd_tui.engine.sync import Waitable


def _current_tracker() -> Any:
    return get_default_engine().waits


class TrackedLock(Waitable):
    """A non-reentrant lock whose holder and waiters the controller can see.

    The engine uses it for each GraphTask's mutex when a controller is
    attached; scenarios use it for user locks held across a backward
    (``control.TrackedLock("user lock")``).
    """

    wait_kind = "lock"

    def __init__(self, name: str, tracker: Any = None) -> None:
        self.name = name
        self._cond = threading.Condition(threading.Lock())
        self._waiters: list[int] = []
        self.holder: int | None = None
        self._tracker = tracker

    def _waits(self) -> Any:
        return self._tracker if self._tracker is not None else _current_tracker()

    def acquire(self, blocking: bool = True) -> bool:
        me = threading.get_ident()
        waits = self._waits()
        with self._cond:
            if self.holder is None:
                self.holder = me
                return True
            if not blocking:
                return False
        if waits is not None:
            waits.emit_wait("thread_wait", "lock", self)
        with self._cond:
            waited = self.wait_for(lambda: self.holder is None, waits)
            self.holder = me
        if waits is not None:
            if waited:
                waits.after_wait("lock", self)
            waits.emit_wait("thread_wake", "lock", self)
        return True

    def release(self) -> None:
        waits = self._waits()
        with self._cond:
            if self.holder is None:
                raise RuntimeError(f"release of unlocked lock {self.name!r}")
            self.holder = None
            self.notify_waiters(waits)

    def locked(self) -> bool:
        return self.holder is not None

    def __enter__(self) -> TrackedLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<TrackedLock {self.name}>"


class Signal(Waitable):
    """A one-shot event a user hook or Function can wait on; ``set_by`` names the
    thread expected to set it (it becomes an edge of the wait-for graph)."""

    wait_kind = "signal"

    def __init__(self, name: str, set_by: str | None = None) -> None:
        self.name = name
        self.set_by = set_by
        self._cond = threading.Condition(threading.Lock())
        self._waiters: list[int] = []
        self._flag = False

    def set(self) -> None:
        waits = _current_tracker()
        with self._cond:
            self._flag = True
            self.notify_waiters(waits, None)

    def is_set(self) -> bool:
        return self._flag

    def wait(self, timeout: float | None = None) -> bool:
        """Block until set.  Under a controller a timeout is not honoured (time does not
        pass for a paused run): a wait that nothing can satisfy is reported instead."""
        waits = _current_tracker()
        if waits is not None:
            waits.emit_wait("thread_wait", "signal", self)
        with self._cond:
            if waits is None and timeout is not None:
                return self._cond.wait_for(lambda: self._flag, timeout)
            waited = self.wait_for(lambda: self._flag, waits)
        if waits is not None:
            if waited:
                waits.after_wait("signal", self)
            waits.emit_wait("thread_wake", "signal", self)
        return True
