"""The controller: gates, pause and step, deterministic schedules, deadlocks.

Not in PyTorch: this is what makes the engine a debugger.  Every engine thread
passes a *gate* at each event it emits (the controller is the engine's
observer, so the gate is the event call itself) and at a few silent points
(its first instruction, and each time it wakes from a wait).  The controller
decides per thread whether it may pass.

Two modes:

* **serialized** (default): exactly one engine thread moves between gates at a
  time; the others wait at their gates.  The caller drives: ``step(thread)``,
  ``step_any()`` (the policy picks), ``run_until(predicate)``, ``run()``.  The
  choices form a *schedule* (``schedule_string()``) that replays the run event
  for event (``policy="schedule:STRING"``).
* **free-running**: threads race as they would without us; the controller
  still sees every event and wait, and ``pause``/``step`` still work per thread.

Because every blocking wait in the engine is instrumented (``sync.Waitable``,
``TrackedLock``), the controller knows at every moment what each thread is
doing: running, paused at a gate, waiting on a ReadyQueue, a GraphTask's
future, a lock (and who holds it), the reentrant pool, or finished.  When no
thread can move and the program has not finished, it builds the wait-for graph
(networkx), finds the cycle and explains it; when the only obstacle is a
thread the user paused, it says that instead.  ``close()`` tears everything
down, deadlocked or not.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from autograd_tui.engine.engine import Engine, use_engine
from autograd_tui.engine.events import Event, make_event
from autograd_tui.engine.sync import ThreadAborted, Waitable

#: how long a step waits for the moving thread to reach its next gate before it
#: reports that thread as stuck in something the controller cannot see
STUCK_AFTER = 10.0


class ScheduleDivergence(RuntimeError):
    """A replayed schedule names a thread that cannot move at that point."""


# --- instrumented user-visible primitives -------------------------------------------
def _current_tracker() -> Any:
    from autograd_tui.engine.engine import get_default_engine

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


# --- thread bookkeeping --------------------------------------------------------------
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
    nodes: list[tuple[int | None, int | None, str]] = field(default_factory=list)

    def current_node(self) -> str | None:
        return self.nodes[-1][2] if self.nodes else None


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


@dataclass
class DeadlockReport:
    real: bool  # False: blocked only because of a thread the user paused
    explanation: str
    cycle: list[str]
    threads: dict[str, str]
    graph: nx.DiGraph
    kind: str = "cycle"  # cycle | lost-wakeup | paused | stuck

    def __str__(self) -> str:
        return self.explanation


@dataclass
class StepResult:
    status: str  # stepped | blocked | finished | deadlock | paused | breakpoint | stuck | limit
    events: list[Event]
    thread: str | None = None
    report: DeadlockReport | None = None


# --- scheduling policies ------------------------------------------------------------------
class RoundRobin:
    name = "round-robin"

    def __init__(self) -> None:
        self._last = -1

    def choose(self, eligible: list[ThreadInfo]) -> ThreadInfo:
        later = [t for t in eligible if t.index > self._last]
        pick = later[0] if later else eligible[0]
        self._last = pick.index
        return pick


class SeededRandom:
    name = "random"

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._rng = random.Random(seed)

    def choose(self, eligible: list[ThreadInfo]) -> ThreadInfo:
        return self._rng.choice(eligible)


class ExplicitSchedule:
    name = "schedule"

    def __init__(self, choices: list[int]) -> None:
        self.choices = list(choices)
        self.pos = 0

    def choose(self, eligible: list[ThreadInfo]) -> ThreadInfo:
        if self.pos >= len(self.choices):
            return eligible[0]  # past the recorded schedule: the one thread left, usually
        want = self.choices[self.pos]
        self.pos += 1
        for t in eligible:
            if t.index == want:
                return t
        raise ScheduleDivergence(
            f"schedule step {self.pos}: thread #{want} cannot move now "
            f"(movable: {', '.join(f'#{t.index} {t.name}' for t in eligible) or 'none'})"
        )


def encode_schedule(choices: Iterable[int]) -> str:
    """Run-length code: ``0:12,1:3,0:5`` = thread #0 twelve times, #1 three times, ..."""
    out: list[list[int]] = []
    for c in choices:
        if out and out[-1][0] == c:
            out[-1][1] += 1
        else:
            out.append([c, 1])
    return ",".join(f"{c}:{n}" for c, n in out)


def decode_schedule(text: str) -> list[int]:
    choices: list[int] = []
    text = text.strip()
    if not text:
        return choices
    for i, part in enumerate(text.split(",")):
        try:
            c, _, n = part.partition(":")
            idx, count = int(c), int(n) if n else 1
        except ValueError:
            raise ValueError(
                f"bad schedule at item {i + 1} ({part!r}): expected THREAD:COUNT, "
                "e.g. 0:12,1:3"
            ) from None
        if idx < 0 or count < 1:
            raise ValueError(f"bad schedule at item {i + 1} ({part!r}): negative or zero")
        choices.extend([idx] * count)
    return choices


def make_policy(policy: str = "round-robin", seed: int = 0) -> Any:
    if policy == "round-robin":
        return RoundRobin()
    if policy == "random":
        return SeededRandom(seed)
    if policy.startswith("schedule:"):
        return ExplicitSchedule(decode_schedule(policy[len("schedule:"):]))
    raise ValueError(
        f"unknown policy {policy!r}: use round-robin, random or schedule:STRING"
    )


def breakpoint_on(kind: str | None = None, node: str | int | None = None,
                  queue: str | None = None, graph_task: int | None = None,
                  thread: str | None = None, names: dict[int, str] | None = None
                  ) -> Callable[[Event], bool]:
    """A predicate for ``run_until``: every given field must match.  ``node`` is a
    node id or a node name (matched against ``data['name']`` or ``names``)."""

    def match(e: Event) -> bool:
        if kind is not None and e.kind != kind:
            return False
        if queue is not None and e.queue != queue:
            return False
        if graph_task is not None and e.graph_task != graph_task:
            return False
        if thread is not None and e.thread != thread:
            return False
        if node is not None:
            if isinstance(node, int):
                return e.node == node
            name = e.data.get("name") or (names or {}).get(e.node)  # type: ignore[arg-type]
            return name == node
        return True

    return match


# --- the controller ---------------------------------------------------------------------------
class Controller:
    def __init__(self, engine: Engine, *, serialized: bool = True,
                 policy: str = "round-robin", seed: int = 0,
                 stuck_after: float = STUCK_AFTER) -> None:
        if engine.waits is not None:
            raise RuntimeError("this engine already has a controller")
        if engine.threads():
            raise RuntimeError("attach the controller to a fresh Engine (it has threads)")
        self.engine = engine
        self.serialized = serialized
        self.policy_name = policy
        self.seed = seed
        self.policy = make_policy(policy, seed)
        self.stuck_after = stuck_after
        self.aborted = False
        self.events: list[Event] = []
        self.choices: list[int] = []
        self.report: DeadlockReport | None = None
        self._cv = threading.Condition(threading.Lock())
        self._threads: dict[str, ThreadInfo] = {}
        self._by_ident: dict[int, ThreadInfo] = {}
        self._turn: str | None = None
        self._subscribers: list[Callable[[Event], None]] = []
        self._waitables: dict[int, Waitable] = {}
        self._program: threading.Thread | None = None
        self._program_done = False
        self.program_error: BaseException | None = None
        self.program_result: Any = None
        self._pause_new = False
        self._pause_names: set[str] = set()  # threads to pause as soon as they start
        # a small fold of the events, for explanations
        self._queue_tasks: dict[str, list[tuple[int | None, int | None]]] = {}
        self._queue_consumers: dict[str, list[str]] = {}
        self._node_names: dict[int, str] = {}
        self._completed: dict[int, str] = {}
        self._gt_owner: dict[int, str] = {}
        engine.waits = self
        engine.add_observer(self._on_event)

    # --- subscribers --------------------------------------------------------------------------
    def subscribe(self, fn: Callable[[Event], None]) -> None:
        """Receive every event (before the emitting thread parks at its gate)."""
        self._subscribers.append(fn)

    # --- the program --------------------------------------------------------------------------
    def start(self, program: Callable[..., Any], *args: Any, name: str = "cpu (owner)") -> None:
        """Run ``program(*args)`` (it builds a graph and calls backward) on a new
        thread named ``name``; in serialized mode it waits at its first gate."""
        if self._program is not None:
            raise RuntimeError("the controller already runs a program")
        self.register_thread(name)

        def body() -> None:
            self.engine._tls.name = name
            try:
                with use_engine(self.engine):
                    self.thread_begin(name)
                    self.program_result = program(*args)
            except ThreadAborted:
                pass
            except BaseException as e:  # noqa: BLE001 - reported to the caller
                self.program_error = e
            finally:
                self._program_done = True
                self.thread_end(name)

        self._program = threading.Thread(target=body, name=f"autograd {name}", daemon=True)
        self._program.start()
        if self.serialized:
            self._wait_quiescent()  # it is parked at its first gate

    @property
    def finished(self) -> bool:
        return self._program_done

    # --- the tracker interface (called by engine threads) -------------------------------------
    def make_lock(self, name: str) -> TrackedLock:
        return TrackedLock(name, self)

    def register_thread(self, name: str) -> None:
        with self._cv:
            if name in self._threads:
                raise RuntimeError(f"thread name {name!r} registered twice")
            info = ThreadInfo(name, len(self._threads))
            info.user_paused = self._pause_new or name in self._pause_names
            self._threads[name] = info
            self._cv.notify_all()

    def thread_begin(self, name: str) -> None:
        with self._cv:
            info = self._threads[name]
            info.ident = threading.get_ident()
            self._by_ident[info.ident] = info
        self._park(info, None)

    def thread_end(self, name: str) -> None:
        with self._cv:
            info = self._threads[name]
            info.state = "finished"
            info.nodes.clear()
            if self._turn == name:
                self._turn = None
            self._cv.notify_all()

    def before_wait(self, kind: str, obj: Any) -> None:
        with self._cv:
            info = self._by_ident.get(threading.get_ident())
            if info is None:
                return
            info.state = "waiting"
            info.waiting_kind, info.waiting_on = kind, obj
            self._waitables[id(obj)] = obj
            if self._turn == info.name:
                self._turn = None
            self._cv.notify_all()

    def notify(self, obj: Any, waiters: list[int]) -> None:
        with self._cv:
            for ident in waiters:
                info = self._by_ident.get(ident)
                if info is not None and info.state == "waiting":
                    info.state = "transit"
            self._cv.notify_all()

    def after_wait(self, kind: str, obj: Any) -> None:
        info = self._by_ident.get(threading.get_ident())
        if info is None:
            return
        with self._cv:
            info.waiting_kind = info.waiting_on = None
        self._park(info, None)

    def emit_wait(self, kind: str, on: str, obj: Any) -> None:
        """thread_wait / thread_wake events for locks and signals (a gate each)."""
        eng = self.engine
        if threading.get_ident() not in self._by_ident:
            return
        holder = None
        if isinstance(obj, TrackedLock) and kind == "thread_wait" and obj.holder is not None:
            h = self._by_ident.get(obj.holder)
            holder = h.name if h else "another thread"
        data: dict[str, Any] = {"on": on, "target": obj.name}
        if kind == "thread_wait":
            data["holder"] = holder
        eng._emit(kind, None, None, None, **data)

    # --- gates --------------------------------------------------------------------------------
    def _on_event(self, event: Event) -> None:
        info = self._by_ident.get(threading.get_ident())
        with self._cv:
            self.events.append(event)
            self._fold(event, info)
        for fn in self._subscribers:
            fn(event)
        if info is not None:
            self._park(info, event)

    def _park(self, info: ThreadInfo, event: Event | None) -> None:
        with self._cv:
            if self.aborted:
                raise ThreadAborted()
            if event is not None:
                info.last_event = event
                info.gates += 1
            if self.serialized:
                info.state = "paused"
                if self._turn == info.name:
                    self._turn = None
                self._cv.notify_all()
                while self._turn != info.name:
                    self._cv.wait()
                    if self.aborted:
                        raise ThreadAborted()
            else:
                while info.user_paused and info.allowance == 0:
                    info.state = "paused"
                    self._cv.notify_all()
                    self._cv.wait()
                    if self.aborted:
                        raise ThreadAborted()
                if info.user_paused and event is not None:
                    info.allowance -= 1
            info.state = "running"
            self._cv.notify_all()

    # --- a small fold of events, for the explanations -----------------------------------------
    def _fold(self, e: Event, info: ThreadInfo | None) -> None:
        k = e.kind
        if k == "dependencies_computed":
            for n in e.data["nodes"]:
                self._node_names[n["id"]] = n["name"]
        elif k == "graph_task_created":
            self._gt_owner[e.graph_task] = e.thread  # type: ignore[index]
        elif k == "push":
            self._queue_tasks.setdefault(e.queue, []).append((e.graph_task, e.node))  # type: ignore[arg-type]
        elif k == "pop":
            tasks = self._queue_tasks.get(e.queue, [])  # type: ignore[arg-type]
            if (e.graph_task, e.node) in tasks:
                tasks.remove((e.graph_task, e.node))
            elif e.data.get("shutdown") is False and tasks:
                tasks.pop(0)
            cons = self._queue_consumers.setdefault(e.queue, [])  # type: ignore[arg-type]
            if e.thread not in cons:
                cons.append(e.thread)
        elif k == "thread_wait" and e.data["on"] == "queue":
            cons = self._queue_consumers.setdefault(e.queue, [])  # type: ignore[arg-type]
            if e.thread not in cons:
                cons.append(e.thread)
        elif k == "node_start" and info is not None:
            info.nodes.append((e.graph_task, e.node, e.data["name"]))
        elif k == "node_end" and info is not None and info.nodes:
            info.nodes.pop()
        elif k == "error" and info is not None and info.nodes:
            info.nodes.pop()
        elif k == "completion":
            self._completed[e.graph_task] = e.thread  # type: ignore[index]

    # --- pause / resume -----------------------------------------------------------------------
    def _info(self, thread: str | int) -> ThreadInfo:
        if isinstance(thread, int):
            for t in self._threads.values():
                if t.index == thread:
                    return t
            raise KeyError(f"no thread #{thread}; threads: {self.thread_names()}")
        if thread not in self._threads:
            raise KeyError(f"no thread named {thread!r}; threads: {self.thread_names()}")
        return self._threads[thread]

    def thread_names(self) -> list[str]:
        return list(self._threads)

    def pause(self, thread: str | int) -> None:
        """Pause a thread at its next gate (a name not started yet: as soon as it starts)."""
        with self._cv:
            if isinstance(thread, str) and thread not in self._threads:
                self._pause_names.add(thread)
                return
            info = self._info(thread)
            info.user_paused, info.allowance = True, 0

    def resume(self, thread: str | int) -> None:
        with self._cv:
            if isinstance(thread, str):
                self._pause_names.discard(thread)
                if thread not in self._threads:
                    return
            info = self._info(thread)
            info.user_paused, info.allowance = False, 0
            self._cv.notify_all()

    def pause_all(self) -> None:
        with self._cv:
            self._pause_new = True
            for info in self._threads.values():
                info.user_paused, info.allowance = True, 0

    def resume_all(self) -> None:
        with self._cv:
            self._pause_new = False
            for info in self._threads.values():
                info.user_paused, info.allowance = False, 0
            self._cv.notify_all()

    # --- driving ------------------------------------------------------------------------------
    def _quiescent(self) -> bool:
        if self._turn is not None:
            return False
        for t in self._threads.values():
            if t.state in ("waiting", "finished"):
                continue
            # Free-running, a thread at a gate that is no longer paused is about to move.
            if t.state == "paused" and (self.serialized or (t.user_paused and t.allowance == 0)):
                continue
            return False
        return True

    def _wait_quiescent(self) -> bool:
        """Wait until no thread moves; False if one stays busy past ``stuck_after``."""
        deadline = time.monotonic() + self.stuck_after
        with self._cv:
            while not self._quiescent():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def _grant(self, info: ThreadInfo) -> StepResult:
        start = len(self.events)
        with self._cv:
            self._turn = info.name
            self.choices.append(info.index)
            self._cv.notify_all()
        ok = self._wait_quiescent()
        new = self.events[start:]
        if not ok:
            return StepResult("stuck", new, info.name, self._stuck_report(info))
        status = "stepped" if info.state == "paused" else (
            "finished" if info.state == "finished" else "blocked")
        return StepResult(status, new, info.name)

    def _eligible(self) -> list[ThreadInfo]:
        return [t for t in self._threads.values() if t.state == "paused" and not t.user_paused]

    def step(self, thread: str | int, n: int = 1) -> StepResult:
        """Let ``thread`` pass ``n`` gates (it may be paused); returns the new events."""
        info = self._info(thread)
        if not self.serialized:
            return self._step_free(info, n)
        events: list[Event] = []
        result = StepResult("stepped", events, info.name)
        for _ in range(n):
            if info.state != "paused":
                return StepResult("blocked" if info.state == "waiting" else info.state,
                                  events, info.name)
            result = self._grant(info)
            events.extend(result.events)
            if result.status != "stepped":
                break
        result.events = events
        return result

    def _step_free(self, info: ThreadInfo, n: int) -> StepResult:
        start = len(self.events)
        with self._cv:
            target = info.gates + n
            info.allowance = n if info.user_paused else 0
            self._cv.notify_all()
            deadline = time.monotonic() + self.stuck_after
            while not (info.gates >= target or info.state in ("waiting", "finished")):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cv.wait(left)
        return StepResult("stepped", self.events[start:], info.name)

    def step_any(self) -> StepResult:
        """One step of the thread the policy picks (serialized mode)."""
        if not self.serialized:
            raise RuntimeError("step_any needs serialized mode")
        if self.aborted:
            return StepResult("finished", [], None)
        if not self._wait_quiescent():
            busy = next(t for t in self._threads.values()
                        if t.state in ("running", "transit"))
            return StepResult("stuck", [], busy.name, self._stuck_report(busy))
        with self._cv:
            eligible = self._eligible()
        if not eligible:
            return self._no_progress()
        return self._grant(self.policy.choose(eligible))

    def run_until(self, predicate: Callable[[Event], bool] | None = None,
                  max_steps: int | None = None) -> StepResult:
        """Step until an event satisfies ``predicate`` (a breakpoint), the program
        ends, a deadlock, or ``max_steps``."""
        events: list[Event] = []
        steps = 0
        while max_steps is None or steps < max_steps:
            r = self.step_any()
            events.extend(r.events)
            steps += 1
            if r.status in ("stepped", "blocked", "finished") and r.thread is not None:
                if predicate is not None and any(predicate(e) for e in r.events):
                    return StepResult("breakpoint", events, r.thread)
                if r.status == "finished" and self.finished and not self._eligible():
                    return StepResult("finished", events, r.thread)
                continue
            return StepResult(r.status, events, r.thread, r.report)
        return StepResult("limit", events)

    def run(self, max_steps: int | None = None) -> StepResult:
        return self.run_until(None, max_steps)

    def wait(self, timeout: float = 30.0) -> StepResult:
        """Free-running mode: wait for the program to end, or for nothing to move."""
        if self.serialized:
            raise RuntimeError("wait() is for free-running mode; in serialized mode nothing "
                               "moves unless you step: use run() or run_until()")
        deadline = time.monotonic() + timeout
        with self._cv:
            while not self._program_done:
                if self._quiescent() and not self._program_done:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    return StepResult("stuck", list(self.events))
                self._cv.wait(min(left, 0.05))
        if self._program_done:
            return StepResult("finished", list(self.events))
        return self._no_progress()

    def schedule_string(self) -> str:
        return encode_schedule(self.choices)

    # --- states -------------------------------------------------------------------------------
    def thread_states(self) -> dict[str, ThreadStatus]:
        with self._cv:
            return {name: self._status(info) for name, info in self._threads.items()}

    def _status(self, info: ThreadInfo) -> ThreadStatus:
        node = info.current_node()
        depth = len(info.nodes)
        if info.state == "waiting":
            what = self._describe_obj(info.waiting_on)
            holder = None
            if isinstance(info.waiting_on, TrackedLock) and info.waiting_on.holder is not None:
                h = self._by_ident.get(info.waiting_on.holder)
                holder = h.name if h else "?"
                what += f" held by {holder}"
            return ThreadStatus(info.name, "waiting", f"waiting on {what}", node, depth,
                                self._describe_obj(info.waiting_on), holder, info.user_paused)
        if info.state == "paused":
            after = f" after {info.last_event.kind}" if info.last_event else ""
            state = "paused" if info.user_paused or self.serialized else "ready"
            word = "paused" if info.user_paused else "at a gate"
            return ThreadStatus(info.name, state, f"{word}{after}", node, depth,
                                user_paused=info.user_paused)
        if info.state == "finished":
            return ThreadStatus(info.name, "finished", "finished", None, 0)
        return ThreadStatus(info.name, "running", "running", node, depth,
                            user_paused=info.user_paused)

    def _describe_obj(self, obj: Any) -> str:
        if obj is None:
            return "?"
        kind = getattr(obj, "wait_kind", "object")
        if kind == "queue":
            return f"queue {obj.name}"
        if kind == "future":
            return f"the future of GraphTask {obj.graph_task_id}"
        if kind == "lock":
            return f"lock '{obj.name}'"
        if kind == "pool":
            return "the reentrant pool's work queue"
        if kind == "signal":
            return f"signal '{obj.name}'"
        return repr(obj)

    # --- deadlocks ----------------------------------------------------------------------------
    def _stuck_report(self, info: ThreadInfo) -> DeadlockReport:
        msg = (f"{info.name} has not reached a gate for {self.stuck_after:.0f} s: it is "
               "blocked in something the controller cannot see (an uninstrumented lock, "
               "sleep or I/O in user code).")
        return DeadlockReport(False, msg, [], self._thread_words(), nx.DiGraph(), "stuck")

    def _thread_words(self) -> dict[str, str]:
        return {n: s.detail for n, s in self.thread_states().items()}

    def _no_progress(self) -> StepResult:
        if self._program_done:
            return StepResult("finished", [])
        report = self.analyse()
        if report.real:
            self.report = report
            eng = self.engine
            ev = make_event(next(eng._seq), "deadlock", "controller", None, None, None,
                       {"explanation": report.explanation, "cycle": report.cycle,
                        "threads": report.threads})
            with self._cv:
                self.events.append(ev)
            for fn in self._subscribers:
                fn(ev)
            return StepResult("deadlock", [ev], None, report)
        return StepResult("paused", [], None, report)

    def wait_for_graph(self) -> nx.DiGraph:
        """Threads, queues, futures, locks and the pool, with an edge from each waiter
        to what it waits on, and from each object to the threads that could free it."""
        g = nx.DiGraph()
        with self._cv:
            infos = list(self._threads.values())
            by_ident = dict(self._by_ident)
        mid_node = [t for t in infos if t.nodes and t.state != "finished"]
        pool_threads = [t for t in infos if t.name.startswith("reentrant-pool-")
                        and t.state != "finished" and t.waiting_kind != "pool"]
        backlog = {gt.id for ref in list(self.engine.thread_pool_shared.graphtasks_queue)
                   if (gt := ref()) is not None}

        def tnode(name: str) -> str:
            return f"thread {name}"

        def add_queue(qname: str) -> str:
            node = f"queue {qname}"
            g.add_node(node, kind="queue")
            if self._queue_tasks.get(qname):
                for c in self._queue_consumers.get(qname, []):
                    if self._threads.get(c) and self._threads[c].state != "finished":
                        g.add_edge(node, tnode(c), why="pops")
            return node

        for t in infos:
            if t.state == "finished":
                continue
            g.add_node(tnode(t.name), kind="thread")
        for t in infos:
            if t.state != "waiting":
                continue
            obj, kind = t.waiting_on, t.waiting_kind
            me = tnode(t.name)
            if kind == "queue":
                q = add_queue(obj.name)
                g.add_edge(me, q, why="waits")
                for m in mid_node:
                    if m is not t:
                        g.add_edge(q, tnode(m.name), why="could push")
            elif kind == "future":
                gid = obj.graph_task_id
                f = f"future GraphTask {gid}"
                g.add_node(f, kind="future")
                g.add_edge(me, f, why="waits")
                for qname, tasks in self._queue_tasks.items():
                    if any(gt == gid for gt, _ in tasks):
                        g.add_edge(f, add_queue(qname), why="task in")
                for m in mid_node:
                    if any(gt == gid for gt, _, _ in m.nodes) and m is not t:
                        g.add_edge(f, tnode(m.name), why="runs a node of it")
                if gid in backlog:
                    g.add_node("reentrant pool", kind="pool")
                    g.add_edge(f, "reentrant pool", why="waits for a pool thread")
                    for p in pool_threads:
                        g.add_edge("reentrant pool", tnode(p.name), why="busy")
            elif kind == "lock":
                lk = f"lock {obj.name}"
                g.add_node(lk, kind="lock")
                g.add_edge(me, lk, why="waits")
                h = by_ident.get(obj.holder) if obj.holder is not None else None
                if h is not None:
                    g.add_edge(lk, tnode(h.name), why="held by")
            elif kind == "signal":
                s = f"signal {obj.name}"
                g.add_node(s, kind="signal")
                g.add_edge(me, s, why="waits")
                if obj.set_by and obj.set_by in self._threads:
                    g.add_edge(s, tnode(obj.set_by), why="set by")
                elif obj.set_by and obj.set_by.startswith("cuda:"):
                    # A device thread starts with the first task pushed to its queue.
                    q = add_queue(obj.set_by)
                    g.add_edge(s, q, why="set by a thread not started")
                    for m in mid_node:
                        g.add_edge(q, tnode(m.name), why="could push")
            elif kind == "pool":
                g.add_node("reentrant pool", kind="pool")
        return g

    def analyse(self) -> DeadlockReport:
        """Explain why nothing can move (call when no thread is eligible)."""
        g = self.wait_for_graph()
        threads = self._thread_words()
        with self._cv:
            infos = sorted(self._threads.values(), key=lambda t: t.index)
        paused = [t for t in infos if t.state == "paused" and t.user_paused]
        if paused:
            names = ", ".join(t.name for t in paused)
            blocked = []
            for t in infos:
                if t.state == "waiting":
                    st = self._status(t)
                    via = ""
                    if st.holder and self._threads.get(st.holder) in paused:
                        via = f" (held by {st.holder}, which you paused)"
                    blocked.append(f"{t.name} is {st.detail}{via}")
            text = (f"Not a deadlock: nothing can move only because you paused {names}. "
                    + ("; ".join(blocked) + ". " if blocked else "")
                    + "Resume or step a paused thread to go on.")
            return DeadlockReport(False, text, [], threads, g, "paused")
        cycle: list[str] = []
        for t in infos:
            if t.state != "waiting":
                continue
            try:
                edges = nx.find_cycle(g, source=f"thread {t.name}")
            except nx.NetworkXNoCycle:
                continue
            cycle = [u for u, _ in edges]
            break
        text = self._explain(g, cycle, infos)
        if cycle:
            return DeadlockReport(True, text, cycle, threads, g, "cycle")
        # No cycle: report the chain of waits from the program's thread to its dead end.
        chain: list[str] = []
        node = next((f"thread {t.name}" for t in infos if t.state == "waiting"), None)
        while node is not None and node not in chain:
            chain.append(node)
            succ = sorted(g.successors(node)) if node in g else []
            node = succ[0] if succ else None
        return DeadlockReport(True, text, chain, threads, g, "lost-wakeup")

    def _explain(self, g: nx.DiGraph, cycle: list[str], infos: list[ThreadInfo]) -> str:
        if not cycle:
            # No cycle: a wait that nothing will ever satisfy (a lost wake-up).
            program = next((t for t in infos if t.index == 0), None)
            start = program if program is not None and program.state == "waiting" else next(
                (t for t in infos if t.state == "waiting"), None)
            if start is None:
                return "Nothing can move, but no thread is waiting on anything." + self._hint()
            what = self._describe_obj(start.waiting_on)
            inside = start.current_node()
            where = f" (inside {inside})" if inside else ""
            text = (f"Deadlock: {start.name}{where} waits on {what}, and no other thread can "
                    "ever wake it: none is running a node and no task is queued for it.")
            done = [(gid, thr) for gid, thr in sorted(self._completed.items())
                    if thr != self._gt_owner.get(gid)]
            for gid, thr in done:
                text += (f" GraphTask {gid} completed on {thr}, not on its owner "
                         f"{self._gt_owner.get(gid)}, and no wake-up task was pushed to the "
                         "owner's queue.")
            return text + self._hint()
        hops = []
        n = len(cycle)
        for i in range(n):
            u, v = cycle[i], cycle[(i + 1) % n]
            hops.append(self._hop(g, u, v))
        return "Deadlock: " + "; ".join(hops) + ". No thread in this cycle can move." + \
            self._hint()

    def _hop(self, g: nx.DiGraph, u: str, v: str) -> str:
        su, sv = u.split(" ", 1), v.split(" ", 1)
        ku, nu = su[0], su[1]
        kv, nv = sv[0], sv[1]
        if ku == "thread":
            node = self._threads[nu].current_node()
            inside = f" (inside {node})" if node else ""
            if kv == "future":
                return f"{nu}{inside} waits on the future of {nv}"
            if kv == "queue":
                return f"{nu}{inside} waits on queue {nv}"
            return f"{nu}{inside} waits on {kv} '{nv}'"
        if ku == "future":
            if kv == "queue":
                tasks = [self._node_names.get(nd, "dummy") for gt, nd in
                         self._queue_tasks.get(nv, []) if f"GraphTask {gt}" == nu]
                what = f"{nu}'s next task ({tasks[0]})" if tasks else f"{nu}'s next task"
                return f"{what} sits in queue {nv}"
            if kv == "thread":
                return f"{nu} still has a node running on {nv}"
            return f"{nu} waits in the reentrant pool's queue for a free pool thread"
        if ku == "queue":
            why = g.edges[u, v].get("why")
            if why == "pops":
                return f"queue {nu} is popped by {nv}"
            return f"only {nv}, blocked inside a node, could push to queue {nu}"
        if ku == "lock":
            return f"lock '{nu}' is held by {nv}"
        if ku == "signal":
            if kv == "queue":
                return (f"signal '{nu}' can only be set by {nv}, whose thread has not started: "
                        f"it starts with the first task pushed to queue {nv}")
            return f"signal '{nu}' can only be set by {nv}"
        if ku == "reentrant":
            return f"every pool thread is busy ({nv} among them) and the pool may not grow"
        return f"{u} -> {v}"

    def _hint(self) -> str:
        o = self.engine.options()
        if o["reentrant"] == "block":
            return (" (engine option reentrant='block': PyTorch's fix is to run the nested "
                    "backward on the waiting thread, a nested thread_main.)")
        if not o["wake_owner"]:
            return (" (engine option wake_owner=False: PyTorch pushes a dummy task to the "
                    "owner's queue when another thread completes the GraphTask.)")
        if not o["depth_priority"]:
            return (" (engine option depth_priority=False: PyTorch's ReadyQueue runs deeper "
                    "reentrant tasks first, so a nested backward never picks up its parent's "
                    "work.)")
        if o["reentrant_pool_size"] is not None:
            return (f" (engine option reentrant_pool_size={o['reentrant_pool_size']}: "
                    "PyTorch's pool grows a thread whenever no worker is idle.)")
        return ""

    # --- teardown -----------------------------------------------------------------------------
    def close(self, timeout: float = 5.0) -> bool:
        """Tear down every engine thread (deadlocked or not) and detach; True if all exited."""
        with self._cv:
            self.aborted = True
            waitables = list(self._waitables.values())
            self._cv.notify_all()
        for w in waitables:
            w.wake_all()
        ok = self.engine.close(timeout)
        if self._program is not None:
            self._program.join(timeout)
            ok = ok and not self._program.is_alive()
        self.engine.remove_observer(self._on_event)
        self.engine.waits = None
        return ok

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
