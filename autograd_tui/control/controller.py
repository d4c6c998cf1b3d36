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
  the gates, with no hand-off to the caller per event.
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

One object, one job per module: the ``Controller`` (here) is the caller's side, driving
steps; it holds its ``Gates`` (``gates.py``: the engine threads' side, a gate at every event
and every wait reported) and its ``ThreadTable`` (``table.py``: the threads, under one lock).
Deadlock analysis (``deadlock.py``) reads a ``ThreadsSnapshot`` the table hands out.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from autograd_tui.control.deadlock import DeadlockReport, analyse, stuck_report, wait_for_graph
from autograd_tui.control.gates import Gates
from autograd_tui.control.policies import encode_schedule, make_policy
from autograd_tui.control.table import ThreadsSnapshot, ThreadTable
from autograd_tui.control.threads import (
    AutoRun,
    ThreadInfo,
    ThreadStatus,
    between_gates,
    interrupt,
    leave,
)
from autograd_tui.engine.engine import Engine, use_engine
from autograd_tui.engine.events import Event, make_event
from autograd_tui.engine.sync import ThreadAborted, start_thread
from autograd_tui.history import History

if TYPE_CHECKING:
    import networkx as nx

#: how long a thread between two gates may use no CPU before a step reports it stuck
#: in something the controller cannot see (one that computes is waited for, however long)
STUCK_AFTER = 10.0


@dataclass
class StepResult:
    status: str  # stepped | blocked | finished | deadlock | paused | breakpoint | stuck | limit
    events: list[Event]
    thread: str | None = None
    report: DeadlockReport | None = None


# --- the controller ---------------------------------------------------------------------------
class Controller:
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
        # The one store of the run's events: the gates append, every view reads.
        self.history = history if history is not None else History()
        self.report: DeadlockReport | None = None
        self.table = ThreadTable()  # the threads; read them through snapshot()
        self.gates = Gates(engine, self.history, self.table, make_policy(policy, seed),
                           serialized=serialized, stuck_after=stuck_after)
        self._program: threading.Thread | None = None
        self._program_done = False
        self.program_error: BaseException | None = None
        self.program_result: Any = None
        engine.waits = self.gates
        engine.add_observer(self.gates.on_event)

    @property
    def policy(self) -> Any:
        """Who moves next (serialized mode); the explorer installs its own."""
        return self.gates.policy

    @policy.setter
    def policy(self, policy: Any) -> None:
        self.gates.policy = policy

    @property
    def choices(self) -> list[int]:
        """The thread number each step was granted to (``schedule_string`` encodes it)."""
        return self.gates.choices

    @property
    def aborted(self) -> bool:
        return self.gates.aborted

    @property
    def stuck_after(self) -> float:
        """Seconds a step waits for the moving thread to reach its next gate."""
        return self.gates.stuck_after

    @stuck_after.setter
    def stuck_after(self, seconds: float) -> None:
        self.gates.stuck_after = seconds

    @property
    def on_busy(self) -> Callable[[str, float], None] | None:
        """Told ``(thread, seconds)`` each second while a step waits on a thread that
        computes (a forward under capture, a big op): for a caller's progress line."""
        return self.gates.on_busy

    @on_busy.setter
    def on_busy(self, fn: Callable[[str, float], None] | None) -> None:
        self.gates.on_busy = fn

    # --- subscribers --------------------------------------------------------------------------
    def subscribe(self, fn: Callable[[Event], None]) -> None:
        """Receive every event (before the emitting thread parks at its gate)."""
        self.gates.subscribers.append(fn)

    # --- the program --------------------------------------------------------------------------
    def start(self, program: Callable[..., Any], *args: Any, name: str = "cpu (owner)") -> None:
        """Run ``program(*args)`` (it builds a graph and calls backward) on a new
        thread named ``name``; in serialized mode it waits at its first gate."""
        if self._program is not None:
            raise RuntimeError("the controller already runs a program")
        self.gates.register_thread(name)

        def body() -> None:
            self.engine.set_thread_name(name)
            try:
                with use_engine(self.engine):
                    self.gates.thread_begin(name)
                    self.program_result = program(*args)
            except ThreadAborted:
                pass
            except BaseException as e:  # noqa: BLE001 - reported to the caller
                self.program_error = e
            finally:
                self._program_done = True
                self.gates.thread_end(name)

        self._program = threading.Thread(target=body, name=f"autograd {name}", daemon=True)
        start_thread(self._program)  # a deep stack: it frees the program's graph (sync.py)
        if self.serialized:
            self.gates.wait_quiescent()  # it is parked at its first gate

    @property
    def events(self) -> list[Event]:
        """The run's events so far (the History's list: do not modify)."""
        return self.history.events

    @property
    def finished(self) -> bool:
        return self._program_done

    # --- pause / resume -----------------------------------------------------------------------
    def thread_names(self) -> list[str]:
        return self.table.names()

    def pause(self, thread: str | int) -> None:
        """Pause a thread at its next gate (a name not started yet: as soon as it starts)."""
        self.gates.pause(thread)

    def resume(self, thread: str | int) -> None:
        self.gates.resume(thread)

    def pause_all(self) -> None:
        self.gates.pause_all()

    def resume_all(self) -> None:
        """Clear every pause: running threads', and those asked for by name before start."""
        self.gates.resume_all()

    # --- driving ------------------------------------------------------------------------------
    def _grant(self, info: ThreadInfo) -> StepResult:
        auto = self.gates.auto
        start = self.gates.grant(info, auto)
        ok = self.gates.wait_quiescent()
        if auto is not None:  # the gates may have taken more steps: report the last one
            assert auto.thread is not None
            info, start = auto.thread, auto.start
            if auto.error is not None:
                raise auto.error
        new = self.events[start:]
        if not ok:
            return self._stuck(new, info)
        status = "stepped" if info.state == "paused" else (
            "finished" if info.state == "finished" else "blocked")
        return StepResult(status, new, info.name)

    def step(self, thread: str | int, n: int = 1) -> StepResult:
        """Let ``thread`` pass ``n`` gates (it may be paused); returns the new events."""
        info = self.table.info(thread)
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
        self.gates.pass_free(info, n)
        return StepResult("stepped", self.events[start:], info.name)

    def step_any(self) -> StepResult:
        """One step of the thread the policy picks (serialized mode)."""
        if not self.serialized:
            raise RuntimeError("step_any needs serialized mode")
        if self.aborted:
            return StepResult("finished", [], None)
        if not self.gates.wait_quiescent():
            return self._stuck([], None)
        eligible = self._eligible()
        if not eligible:
            return self._no_progress()
        return self._grant(self.policy.choose(eligible))

    def movable(self) -> bool:
        """Whether a thread can take a step now (serialized mode): when none can, the next
        ``step_any`` reports why (a deadlock) without taking one."""
        if not self.gates.wait_quiescent():
            return True  # one is still moving
        return bool(self._eligible())

    def _eligible(self) -> list[ThreadInfo]:
        with self.table.lock:
            return self.gates.eligible()

    def run_until(self, predicate: Callable[[Event], bool] | None = None,
                  max_steps: int | None = None) -> StepResult:
        """Step until an event satisfies ``predicate`` (a breakpoint), the program
        ends, a deadlock, or ``max_steps``: the steps ``step_any`` would take, most of
        them taken at the gates (``gates.py``), on whose threads ``predicate``
        is called, once per event."""
        start = len(self.events)
        auto = AutoRun(predicate, max_steps)
        with self.table.lock:
            self.gates.auto = auto if self.serialized else None
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
            with self.table.lock:
                self.gates.auto = None

    def run(self, max_steps: int | None = None) -> StepResult:
        return self.run_until(None, max_steps)

    def wait(self, timeout: float = 30.0) -> StepResult:
        """Free-running mode: wait for the program to end, or for nothing to move."""
        if self.serialized:
            raise RuntimeError("wait() is for free-running mode; in serialized mode nothing "
                               "moves unless you step: use run() or run_until()")
        if self.gates.settle(lambda: self._program_done, timeout) == "timeout":
            return StepResult("stuck", list(self.events))
        if self._program_done:
            return StepResult("finished", list(self.events))
        return self._no_progress()

    def schedule_string(self) -> str:
        """``encode_schedule(choices)``; a long run's runs found by NumPy, not a Python loop
        (a recorded run says its schedule twice)."""
        choices = list(self.choices)  # the threads may append meanwhile
        if len(choices) < 256:
            return encode_schedule(choices)
        a = np.array(choices, dtype=np.int64)
        first = np.flatnonzero(np.concatenate(([True], a[1:] != a[:-1])))  # each run's start
        lens = np.diff(first, append=len(a))
        return ",".join([f"{c}:{n}" for c, n in zip(a[first].tolist(), lens.tolist())])

    # --- states -------------------------------------------------------------------------------
    def thread_states(self) -> dict[str, ThreadStatus]:
        state = self.history.latest()
        with self.table.lock:
            return {t.name: self.table.status(t, state, serialized=self.serialized)
                    for t in self.table}

    def snapshot(self) -> ThreadsSnapshot:
        """Every thread as it is now, copied under the lock (what deadlock analysis reads)."""
        return self.table.snapshot(self.history.latest(), serialized=self.serialized)

    # --- deadlocks ----------------------------------------------------------------------------
    def _stuck(self, events: list[Event], info: ThreadInfo | None) -> StepResult:
        """The thread the gates found standing still (else ``info``), and where it waits."""
        stuck = self.gates.stuck
        name = stuck.thread.name if stuck is not None else info.name if info else None
        report = stuck_report(name or "a thread",
                              stuck.seconds if stuck is not None else self.stuck_after,
                              self.snapshot().words(), stuck.where if stuck is not None else "")
        return StepResult("stuck", events, name, report)

    def _no_progress(self) -> StepResult:
        if self._program_done:
            return StepResult("finished", [])
        report = self.analyse()
        if report.real:
            self.report = report
            ev = make_event(self.engine.next_seq(), "deadlock", "controller", None, None, None,
                            {"explanation": report.explanation, "cycle": report.cycle,
                             "threads": report.threads})
            self.gates.record(ev)
            return StepResult("deadlock", [ev], None, report)
        return StepResult("paused", [], None, report)

    def wait_for_graph(self) -> nx.DiGraph:
        """Threads, queues, futures, locks and the pool, with an edge from each waiter
        to what it waits on, and from each object to the threads that could free it."""
        return wait_for_graph(self.snapshot(), self.history, self.engine)

    def analyse(self) -> DeadlockReport:
        """Explain why nothing can move (call when no thread is eligible)."""
        return analyse(self.snapshot(), self.history, self.engine)

    # --- teardown -----------------------------------------------------------------------------
    def close(self, timeout: float = 5.0) -> bool:
        """Tear down every engine thread (deadlocked or not) and detach; True if all exited.
        A thread at a gate or in a tracked wait stops there; one between gates (computing,
        or blocked where we cannot see) gets ``ThreadAborted`` at its next Python line, and
        one still alive after ``timeout`` is waited for at exit while it computes."""
        with self.table.lock:
            between = {t.ident: t.clock for t in between_gates(self.table) if t.ident}
        for w in self.gates.abort():
            w.wake_all()
        for ident in between:
            interrupt(ident)
        ok = self.engine.close(timeout)
        threads = [*self.engine.threads(), *([self._program] if self._program else [])]
        for t in threads:
            t.join(timeout if t is self._program else 0)
            if t.is_alive():
                ok = False
                leave(t, between.get(t.ident))
        self.engine.remove_observer(self.gates.on_event)
        self.engine.waits = None
        return ok

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
