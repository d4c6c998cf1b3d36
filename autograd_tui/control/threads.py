"""What the controller knows of each engine thread, and the words for it.

Not in PyTorch.  ``ThreadInfo`` is the controller's record of one thread (where it
is: at a gate, waiting, running; what it waits on); ``ThreadStatus`` is what a view
is given; ``thread_status`` says it in words (``words.py``'s, as the thread's events say
it), with the node the thread runs taken from the run's folded state.

Whether a thread between two gates is computing or stuck is told here too (``sample``):
by its CPU time (``time.pthread_getcpuclockid``, Linux and most Unixes), which advances
while it computes, however long a forward or an op takes, and stands still while it
blocks; where that clock is unavailable, by the CPU time of the other threads.
``where_waits`` names the line a stuck thread waits at.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

from autograd_tui.engine.events import Event
from autograd_tui.engine.sync import ThreadAborted, TrackedLock
from autograd_tui.history import EngineState
from autograd_tui.words import wait_words


@dataclass
class ThreadInfo:
    name: str
    index: int
    state: str = "transit"  # transit | running | paused | waiting | finished
    last_event: Event | None = None
    waiting_kind: str | None = None
    waiting_on: Any = None
    user_paused: bool = False
    allowance: int = 0  # free mode: gates it may still pass while paused
    gates: int = 0
    ident: int | None = None
    cv: Any = None  # serialized: the condition it waits on at a gate for its turn
    clock: int | None = None  # its CPU-time clock (None: unavailable, its frame is sampled)
    seen: Any = None  # the CPU time or frame position at the last sample
    progress_at: float = 0.0  # time.monotonic() of the last sample that saw it move


@dataclass(frozen=True)
class ThreadStatus:
    name: str
    state: str  # running | paused | waiting | finished | ready
    detail: str  # human words: "waiting on queue cpu", "paused after push", ...
    node: str | None
    depth: int
    waiting_on: str | None = None
    holder: str | None = None
    user_paused: bool = False


def _wait_target(obj: Any) -> tuple[str, str] | None:
    """(on, target) of the ``thread_wait`` event a wait on ``obj`` emits."""
    kind = getattr(obj, "wait_kind", None)
    if kind in ("queue", "lock", "signal"):
        return kind, obj.name
    if kind == "future":
        return kind, f"GraphTask {obj.graph_task_id}"
    if kind == "pool":
        return kind, "reentrant pool"
    return None


def describe_wait(obj: Any, holder: str | None = None) -> str:
    """What a thread waits on, in ``words.wait_words``'s words (as its ``thread_wait``
    event names it): ``queue cpu``, ``lock user lock (held by cuda:0)``, ``future
    GraphTask 2``, ..."""
    if obj is None:
        return "?"
    target = _wait_target(obj)
    return wait_words(*target, holder) if target is not None else repr(obj)


def thread_status(info: ThreadInfo, state: EngineState, *, serialized: bool,
                  by_ident: dict[int, ThreadInfo]) -> ThreadStatus:
    """``info`` in words; ``state`` (the run's head) says which node it runs."""
    th = state.threads.get(info.name)
    node = state.node_name(th.node) if th is not None and th.nodes else None
    depth = th.depth if th is not None else 0
    if info.state == "waiting":
        holder = None
        if isinstance(info.waiting_on, TrackedLock) and info.waiting_on.holder is not None:
            h = by_ident.get(info.waiting_on.holder)
            holder = h.name if h else "?"
        return ThreadStatus(info.name, "waiting",
                            f"waiting on {describe_wait(info.waiting_on, holder)}", node,
                            depth, describe_wait(info.waiting_on), holder, info.user_paused)
    if info.state == "paused":
        after = f" after {info.last_event.kind}" if info.last_event else ""
        shown = "paused" if info.user_paused or serialized else "ready"
        word = "paused" if info.user_paused else "at a gate"
        return ThreadStatus(info.name, shown, f"{word}{after}", node, depth,
                            user_paused=info.user_paused)
    if info.state == "finished":
        return ThreadStatus(info.name, "finished", "finished", None, 0)
    return ThreadStatus(info.name, "running", "running", node, depth,
                        user_paused=info.user_paused)


# --- computing or stuck ---------------------------------------------------------------------------
#: CPU seconds a thread must use between two samples to count as computing (a blocked
#: thread uses none; a thread woken now and then by a timed wait, a few microseconds)
CPU_STEP = 0.002


def own_cpu_clock() -> int | None:
    """The calling thread's CPU-time clock, or None where the platform has none.  Taken
    by the thread itself (``bind``): read by another thread only while it is alive."""
    try:
        return time.pthread_getcpuclockid(threading.get_ident())
    except (AttributeError, OSError):
        return None


def sample(info: ThreadInfo, now: float) -> bool:
    """Whether ``info`` moved since its last sample (its CPU time grew by ``CPU_STEP``);
    records the sample.  Without a per-thread clock, the CPU time of the process less
    the sampling thread's: some other thread computes (perhaps not this one, so a stuck
    thread may be seen late, never a computing one early).  Its Python frame would not
    do: another thread only sees it at the points where it gives up the GIL, the same
    instruction each time in a loop.  Call it only while the thread is known alive (not
    finished, table lock held)."""
    try:
        cpu = (time.clock_gettime(info.clock) if info.clock is not None
               else time.process_time() - time.thread_time())
    except OSError:  # the thread is gone
        return False
    moved = info.seen is None or cpu - info.seen >= CPU_STEP
    if moved:
        info.seen = cpu
        info.progress_at = now
    return moved


def between_gates(threads: Iterable[ThreadInfo]) -> Iterator[ThreadInfo]:
    """The threads that left a gate and have not reached the next nor a tracked wait."""
    return (t for t in threads if t.state in ("running", "transit"))


def standing_still(threads: Iterable[ThreadInfo], since: float, now: float,
                   after: float) -> ThreadInfo | None:
    """Sample the threads between gates (the table's lock held): one of them if none
    has moved for ``after`` seconds since ``since``, else None (one that computes is
    enough: it may be what the others wait for, through something we cannot see)."""
    late = None
    for t in between_gates(threads):
        sample(t, now)
        if now - max(since, t.progress_at) < after:
            return None
        late = late or t
    return late


@dataclass(frozen=True)
class Stuck:
    """A thread that stood still between two gates for ``seconds``, and where."""

    thread: ThreadInfo
    seconds: float
    where: str


def stuck_at(t: ThreadInfo, since: float, now: float) -> Stuck:
    """``t`` found standing still at ``now`` (the table's lock held)."""
    return Stuck(t, now - max(since, t.progress_at), where_waits(t.ident))


_STDLIB = tuple(os.path.normcase(p) + os.sep for p in {
    sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]})


def _line(frame: FrameType) -> str:
    import linecache

    code = frame.f_code
    text = linecache.getline(code.co_filename, frame.f_lineno).strip()
    return (f"{os.path.basename(code.co_filename)}:{frame.f_lineno} in {code.co_name}"
            + (f" ({text})" if text else ""))


def where_waits(ident: int | None) -> str:
    """The line a thread is at, in words: its innermost frame and, when that is in the
    standard library (``threading.Event.wait``, ``queue.Queue.get``), the caller's line
    outside it, which is the one the user wrote."""
    frame = sys._current_frames().get(ident) if ident is not None else None
    if frame is None:
        return "no Python frame"
    inner = _line(frame)
    f: FrameType | None = frame
    while f is not None and os.path.normcase(f.f_code.co_filename).startswith(_STDLIB):
        f = f.f_back
    if f is None or f is frame:
        return inner
    return f"{inner}, called from {_line(f)}"


# --- teardown of a thread no gate can stop ------------------------------------------------
def interrupt(ident: int) -> None:
    """``ThreadAborted`` raised in thread ``ident`` at its next Python line: a thread that
    computes between gates (a forward, a user's loop) has no gate to stop at, and one
    left running makes the interpreter's exit abort the process (``exit_wait``)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident),
                                               ctypes.py_object(ThreadAborted))


#: seconds the interpreter's exit waits, in all, for threads a teardown left computing
EXIT_WAIT = 30.0
_left: dict[threading.Thread, int | None] = {}  # thread -> its CPU clock


def leave(thread: threading.Thread, clock: int | None) -> None:
    """A thread a teardown could not end: waited for at exit while it computes."""
    if not _left:
        atexit.register(exit_wait)
    _left[thread] = clock


def exit_wait() -> None:
    """At exit, wait for the left threads while they compute (they stop at their next
    Python line, ``interrupt``).  A daemon thread that runs C++ code (torch) while the
    interpreter finalizes is ended by ``pthread_exit`` as it asks for the GIL, which
    aborts the process ("terminate called without an active exception", SIGABRT).  One
    that uses no CPU is blocked for good and never asks: not waited for."""
    deadline = time.monotonic() + EXIT_WAIT
    for thread, clock in list(_left.items()):
        seen = None
        while thread.is_alive() and time.monotonic() < deadline:
            thread.join(0.25)
            try:
                cpu = time.clock_gettime(clock) if clock is not None else None
            except OSError:
                break
            if cpu is not None and seen is not None and cpu - seen < CPU_STEP:
                break
            seen = cpu
    _left.clear()


@dataclass
class AutoRun:
    """A ``run_until`` under way, shared by its steps: the thread whose step ends at a gate
    takes the next one itself (``Gates._step_on``) when it needs only the policy."""

    predicate: Callable[[Event], bool] | None
    max_steps: int | None
    steps: int = 0  # steps taken so far (by the driver and at the gates)
    thread: ThreadInfo | None = None  # the thread the current step was granted to
    start: int = 0  # len(events) when it was granted: the step's events follow
    hit: bool = False  # an event of the current step matched the predicate
    error: BaseException | None = None  # raised at a gate, re-raised by the driver
