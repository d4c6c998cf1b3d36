"""Instrumented waits: how the controller knows what each thread is blocked on.

Not in PyTorch.  Every blocking wait in the engine (a ReadyQueue's
``not_empty_`` condition, a GraphTask's future, the reentrant pool's ``work_``
condition, a GraphTask's mutex) goes through ``wait_for`` below, which tells
the engine's *wait tracker* (the controller, when one is attached) before the
thread blocks and after it wakes, and every wake-up tells it which waiter it
woke.  The controller therefore never guesses from timeouts.  With no tracker
attached these are plain condition-variable waits.

A tracker may also *be* the threads (the explorer's cooperative substrate,
``autograd_tui/control/fastrun.py``: the engine's threads as greenlets on one OS
thread): one that has ``block``, ``ident`` and ``spawn`` is asked to block the
calling thread (the condition released), to name it, and to start a thread,
in place of ``Condition.wait``, ``threading.get_ident`` and ``Thread.start``.

``TrackedLock`` and ``Signal`` are the same for user code: a lock or a one-shot event a
scenario's hook or Function holds across a backward, whose holder and waiters the tracker
sees (with a plain ``threading.Lock`` a deadlock through it would look like a hang).  They
find the tracker of the engine the calling thread uses through ``current_tracker``, which
``engine.py`` installs (this module sits below it and does not import it).
"""

from __future__ import annotations

import threading
from collections import deque
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

    def emit_wait(self, kind: str, on: str, obj: Any) -> None: ...


def _plain_condition(lock: Any) -> threading.Condition:
    """``threading.Condition(lock)`` for a plain ``threading.Lock``, without the three
    ``AttributeError``s its constructor raises and catches looking for an RLock's
    internals (3 us of the 5 a condition costs; a run of the explorer makes several)."""
    cond = _new_condition(threading.Condition)
    cond._lock = lock  # type: ignore[attr-defined]
    cond.acquire = lock.acquire  # type: ignore[method-assign]
    cond.release = lock.release  # type: ignore[method-assign]
    cond._waiters = deque()  # type: ignore[attr-defined]
    return cond


_new_condition = threading.Condition.__new__


def _same_as_constructed() -> bool:
    """Whether ``_plain_condition`` builds what this Python's Condition(Lock()) does (its
    attributes are CPython's private ones): else ``condition`` takes the constructor."""
    lock = threading.Lock()
    made, ours = threading.Condition(lock), _plain_condition(lock)
    return (made.__dict__.keys() == ours.__dict__.keys()
            and type(made._waiters) is type(ours._waiters))  # type: ignore[attr-defined]


def condition(lock: Any = None) -> threading.Condition:
    """A condition variable on ``lock`` (a new ``threading.Lock`` if None)."""
    return _make_condition(threading.Lock() if lock is None else lock)


_make_condition = _plain_condition if _same_as_constructed() else threading.Condition


class Waitable:
    """Mixin: a condition variable whose waiters are known (thread idents, FIFO)."""

    _cond: threading.Condition
    _waiters: list[int]
    wait_kind = "object"

    def wait_for(self, predicate: Callable[[], bool], waits: WaitTracker | None) -> bool:
        """Block (the condition held) until ``predicate()``; True if it had to wait."""
        if predicate():
            return False
        me = _ident(waits)
        self._waiters.append(me)
        block = getattr(waits, "block", None)
        if waits is not None:
            waits.before_wait(self.wait_kind, self)
        try:
            while not predicate():
                if waits is not None and waits.aborted:
                    raise ThreadAborted()
                if block is None:
                    self._cond.wait()
                    continue
                self._cond.release()  # a cooperative thread: the others run meanwhile
                try:
                    block(self)
                finally:
                    self._cond.acquire()
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


def _ident(waits: WaitTracker | None) -> int:
    """The calling thread's ident: the tracker's, when it runs the threads itself."""
    ident = getattr(waits, "ident", None)
    return ident() if ident is not None else threading.get_ident()


# --- the tracker of the calling thread's engine ----------------------------------------------
def _no_tracker() -> WaitTracker | None:
    return None


_tracker_lookup: Callable[[], WaitTracker | None] = _no_tracker


def set_tracker_lookup(lookup: Callable[[], WaitTracker | None]) -> None:
    """Install how ``current_tracker`` finds the calling thread's engine's tracker
    (``engine.py`` does, at import: this module cannot import it, it imports this one)."""
    global _tracker_lookup
    _tracker_lookup = lookup


def current_tracker() -> WaitTracker | None:
    """The wait tracker (``Engine.waits``) of the engine the calling thread uses, if any."""
    return _tracker_lookup()


# --- locks and events for user code -----------------------------------------------------------
class TrackedLock(Waitable):
    """A non-reentrant lock whose holder and waiters the controller can see.

    The engine uses it for each GraphTask's mutex when a controller is
    attached; scenarios use it for user locks held across a backward
    (``TrackedLock("user lock")``).
    """

    wait_kind = "lock"

    def __init__(self, name: str, tracker: WaitTracker | None = None) -> None:
        self.name = name
        self._mutex = threading.Lock()  # the condition's: taken directly where it need not wait
        self._cond = condition(self._mutex)
        self._waiters: list[int] = []
        self.holder: int | None = None
        self._tracker = tracker

    def _waits(self) -> WaitTracker | None:
        return self._tracker if self._tracker is not None else current_tracker()

    def acquire(self, blocking: bool = True) -> bool:
        waits = self._tracker
        if waits is None:
            waits = current_tracker()
        me = _ident(waits)
        with self._mutex:  # uncontended (the commonest case): taken here
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
        with self._mutex:
            if self.holder is None:
                raise RuntimeError(f"release of unlocked lock {self.name!r}")
            self.holder = None
            if self._waiters:
                self.notify_waiters(self._waits())

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
        self._cond = condition()
        self._waiters: list[int] = []
        self._flag = False

    def set(self) -> None:
        waits = current_tracker()
        with self._cond:
            self._flag = True
            self.notify_waiters(waits, None)

    def is_set(self) -> bool:
        return self._flag

    def wait(self, timeout: float | None = None) -> bool:
        """Block until set.  Under a controller a timeout is not honoured (time does not
        pass for a paused run): a wait that nothing can satisfy is reported instead."""
        waits = current_tracker()
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


# --- thread stacks ----------------------------------------------------------------------------
#: The stack of every thread the engine or the debugger starts (not PyTorch's: its worker
#: threads have the platform's default).  Freeing a PyTorch graph whose nodes Python has
#: wrapped (as ``torch_bridge.from_torch`` must, to walk it) recurses once per node along
#: a chain: PyTorch 2.13 destroys such a node through its wrapper (``THPCppFunction_dealloc``
#: -> ``~Node`` -> the next node's wrapper), not through ``deleteNode``'s iterative loop.
#: At about 200 bytes a level the 8 MiB default overflows (SIGSEGV) near 40,000 nodes deep;
#: 512 MiB holds millions.  Address space only: a page is used when it is touched.
THREAD_STACK_BYTES = 512 << 20
_stack_lock = threading.Lock()


class CarriedThread:
    """A thread that a tracker runs itself (``spawn``, greenlets): its body, its name and
    whether it runs, without ``threading.Thread``'s set-up (a lock, an event, a weak set:
    about 3 us each), since no OS thread is started."""

    __slots__ = ("_alive", "_args", "_target", "daemon", "name")

    def __init__(self, target: Callable[..., None], args: tuple[Any, ...] = (),
                 name: str = "") -> None:
        self._target, self._args, self.name = target, args, name
        self._alive = False
        self.daemon = True

    def run(self) -> None:
        self._alive = True
        try:
            self._target(*self._args)
        finally:
            self._alive = False

    def is_alive(self) -> bool:
        return self._alive

    def join(self, timeout: float | None = None) -> None:
        """Nothing to wait for: it ends when its tracker runs it to its end or aborts it."""


def start_thread(thread: threading.Thread | CarriedThread, waits: Any = None) -> None:
    """``thread.start()`` on a stack of ``THREAD_STACK_BYTES`` (``threading.stack_size``
    is process-wide and read when a thread starts: set it around this start only); a
    tracker that runs the threads itself (``spawn``) starts it its own way."""
    spawn = getattr(waits, "spawn", None)
    if spawn is not None:
        spawn(thread)
        return
    with _stack_lock:
        old = threading.stack_size()
        try:
            threading.stack_size(THREAD_STACK_BYTES)
        except (ValueError, RuntimeError):  # a platform that cannot: its default
            thread.start()  # type: ignore[union-attr]
            return
        try:
            thread.start()  # type: ignore[union-attr]
        finally:
            threading.stack_size(old)
