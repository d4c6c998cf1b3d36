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
  for event (``policy="schedule:STRING"``).  ``run_until``'s steps are taken at
  the gates, with no hand-off to the caller per event (``gates.py``).
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

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autograd_tui.control.deadlock import DeadlockReport, analyse, wait_for_graph
from autograd_tui.control.gates import AutoRun, Gates
from autograd_tui.control.policies import encode_schedule, make_policy
from autograd_tui.control.threads import ThreadInfo, ThreadStatus, thread_status
from autograd_tui.engine.engine import Engine, use_engine
from autograd_tui.engine.events import Event, make_event
from autograd_tui.engine.sync import ThreadAborted, Waitable
from autograd_tui.history import EngineState, History

if TYPE_CHECKING:
    import networkx as nx

#: how long a step waits for the moving thread to reach its next gate before it
#: reports that thread as stuck in something the controller cannot see
STUCK_AFTER = 10.0


# --- thread bookkeeping --------------------------------------------------------------
@dataclass
class StepResult:
    status: str  # stepped | blocked | finished | deadlock | paused | breakpoint | stuck | limit
    events: list[Event]
    thread: str | None = None
    report: DeadlockReport | None = None


# --- the controller ---------------------------------------------------------------------------
class Controller(Gates):
    def __init__(self, engine: Engine, *, serialized: bool = True,
                 policy: str = "round-robin", seed: int = 0,
                 stuck_after: float = STUCK_AFTER, history: History | None = None) -> None:
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
        # The one store of the run's events: the controller appends, every view reads.
        self.history = history if history is not None else History()
        self.choices: list[int] = []
        self.report: DeadlockReport | None = None
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
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
        self._auto: AutoRun | None = None  # the run_until under way, if any
        self._moved_at = 0.0
        self._watchers = 0
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
    def events(self) -> list[Event]:
        """The run's events so far (the History's list: do not modify)."""
        return self.history.events

    @property
    def finished(self) -> bool:
        return self._program_done

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
        """Clear every pause: running threads', and those asked for by name before start."""
        with self._cv:
            self._pause_new = False
            self._pause_names.clear()
            for info in self._threads.values():
                info.user_paused, info.allowance = False, 0
            self._cv.notify_all()

    # --- driving ------------------------------------------------------------------------------
    def _wait_quiescent(self) -> bool:
        """Wait until no thread moves; False if one stays busy past ``stuck_after``
        (counted from the last step a gate took on its own, in a ``run_until``)."""
        t0 = time.monotonic()
        with self._cv:
            while not self._quiescent():
                left = max(t0, self._moved_at) + self.stuck_after - time.monotonic()
                if left <= 0:
                    self._auto = None  # the late thread's next gate hands back at once
                    return False
                self._cv.wait(left)
        return True

    def _grant(self, info: ThreadInfo) -> StepResult:
        auto = self._auto
        with self._cv:
            start = len(self.events)
            self._turn = info.name
            self.choices.append(info.index)
            if auto is not None:
                auto.thread, auto.start, auto.hit = info, start, False
            info.cv.notify()
            self._cv.notify_all()
        ok = self._wait_quiescent()
        if auto is not None:  # the gates may have taken more steps: report the last one
            assert auto.thread is not None
            info, start = auto.thread, auto.start
            if auto.error is not None:
                raise auto.error
        new = self.events[start:]
        if not ok:
            return StepResult("stuck", new, info.name, self._stuck_report(info))
        status = "stepped" if info.state == "paused" else (
            "finished" if info.state == "finished" else "blocked")
        return StepResult(status, new, info.name)

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
            self._watchers += 1
            try:
                while not (info.gates >= target or info.state in ("waiting", "finished")):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cv.wait(left)
            finally:
                self._watchers -= 1
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

    def movable(self) -> bool:
        """Whether a thread can take a step now (serialized mode): when none can, the next
        ``step_any`` reports why (a deadlock) without taking one."""
        if not self._wait_quiescent():
            return True  # one is still moving
        with self._cv:
            return bool(self._eligible())

    def run_until(self, predicate: Callable[[Event], bool] | None = None,
                  max_steps: int | None = None) -> StepResult:
        """Step until an event satisfies ``predicate`` (a breakpoint), the program
        ends, a deadlock, or ``max_steps``: the steps ``step_any`` would take, most of
        them taken at the gates (``Gates._step_on``), on whose threads ``predicate``
        is called, once per event."""
        start = len(self.events)
        auto = AutoRun(predicate, max_steps)
        with self._cv:
            self._auto = auto if self.serialized else None
        try:
            while max_steps is None or auto.steps < max_steps:
                r = self.step_any()
                auto.steps += 1
                if r.status in ("stepped", "blocked", "finished") and r.thread is not None:
                    if auto.hit:
                        return StepResult("breakpoint", self.events[start:], r.thread)
                    if r.status == "finished" and self.finished and not self._eligible():
                        return StepResult("finished", self.events[start:], r.thread)
                    continue
                return StepResult(r.status, self.events[start:], r.thread, r.report)
            return StepResult("limit", self.events[start:])
        finally:
            with self._cv:
                self._auto = None

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
        state = self.history.latest()
        with self._cv:
            return {name: self._status(info, state) for name, info in self._threads.items()}

    def _status(self, info: ThreadInfo, state: EngineState | None = None) -> ThreadStatus:
        return thread_status(info, state if state is not None else self.history.latest(),
                             serialized=self.serialized, by_ident=self._by_ident)

    # --- deadlocks ----------------------------------------------------------------------------
    def _stuck_report(self, info: ThreadInfo) -> DeadlockReport:
        msg = (f"{info.name} has not reached a gate for {self.stuck_after:.0f} s: it is "
               "blocked in something the controller cannot see (an uninstrumented lock, "
               "sleep or I/O in user code).")
        import networkx as nx  # deadlock.py says why it is imported here

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
                self.history.append(ev)
            for fn in self._subscribers:
                fn(ev)
            return StepResult("deadlock", [ev], None, report)
        return StepResult("paused", [], None, report)

    def wait_for_graph(self) -> nx.DiGraph:
        """Threads, queues, futures, locks and the pool, with an edge from each waiter
        to what it waits on, and from each object to the threads that could free it."""
        return wait_for_graph(self)

    def analyse(self) -> DeadlockReport:
        """Explain why nothing can move (call when no thread is eligible)."""
        return analyse(self)

    # --- teardown -----------------------------------------------------------------------------
    def close(self, timeout: float = 5.0) -> bool:
        """Tear down every engine thread (deadlocked or not) and detach; True if all exited."""
        with self._cv:
            self.aborted = True
            waitables = list(self._waitables.values())
            self._cv.notify_all()
            for info in self._threads.values():
                info.cv.notify_all()
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
