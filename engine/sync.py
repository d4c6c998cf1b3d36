"""Instrumented waits: how the controller knows what each thread is blocked on.

Not in PyTorch.  Every blocking wait in the engine (a ReadyQueue's
``not_empty_`` condition, a GraphTask's future, the reentrant pool's ``work_``
condition, a GraphTask's mutex) goes through ``wait_for`` below, which tells
the engine's *wait tracker* (the controller, when one is attached) before the
thread blocks and after it wakes, and every wake-up tells it which waiter it
woke.  The controller therefore never guesses from timeouts.  With no tracker
attached these are plain condition-variable waits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol


class ThreadAborted(BaseException):  # noqa: N818 - not an error: a teardown signal
    """Raised in an engine thread when the controller tears the run down.

    A BaseException so that the engine's ``except Exception`` (which turns node
    errors into GraphTask errors) lets it through and the thread exits.
    """


class WaitTracker(Protocol):
    aborted: bool

    def before_wait(self, kind: str, obj: Any) -> None: ...

    def after_wait(self, kind: str, obj: Any) -> None: ...

    def notify(self, obj: Any, waiters: list[int]) -> None: ...


class Waitable:
    """Mixin: a condition variable whose waiters are known (thread idents, FIFO)."""

    _cond: threading.Condition
    _waiters: list[int]
    wait_kind = "object"

    def wait_for(self, predicate: Callable[[], bool], waits: WaitTracker | None) -> bool:
        """Block (the condition held) until ``predicate()``; True if it had to wait."""
        if predicate():
            return False
        me = threading.get_ident()
        self._waiters.append(me)
        if waits is not None:
            waits.before_wait(self.wait_kind, self)
        try:
            while not predicate():
                if waits is not None and waits.aborted:
                    raise ThreadAborted()
                self._cond.wait()
        finally:
            self._waiters.remove(me)
        return True

    def notify_waiters(self, waits: WaitTracker | None, n: int | None = 1) -> None:
        """Wake ``n`` waiters (all if None), telling the tracker which ones (condition held)."""
        if not self._waiters:
            return
        woken = list(self._waiters) if n is None else self._waiters[:n]
        if waits is not None:
            waits.notify(self, woken)
        if n is None:
            self._cond.notify_all()
        else:
            self._cond.notify(n)

    def wake_all(self) -> None:
        """Used at teardown: every waiter re-checks and sees the abort."""
        with self._cond:
            self._cond.notify_all()
