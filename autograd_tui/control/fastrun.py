"""The explorer's cooperative substrate: a serialized run whose threads are greenlets.

Not in PyTorch, whose engine runs real threads; loom and shuttle do this to search
interleavings fast.  The explorer runs each schedule from scratch.  On real threads
(``controller.py``) each run starts and joins an OS thread per engine thread and hands
the turn over through a lock at every switch (28 us of futex and GIL a hand-off, 72 us a
thread start and join, on the 2-core machine measured).  Here the same engine code runs
unchanged, its threads greenlets on the explorer's one OS thread, one at a time:

* a step is the controller's: from one gate (an event, a thread's first instruction, a
  wake-up) to the next, into a wait, or to the thread's end; the threads a step may be
  granted to, their numbers, what each waits on and the policy (``_Policy``) are the
  controller's, so the schedules and outcomes are the same (``test_fastrun.py`` runs
  both ways, and replays explored schedules on real threads);
* a gate the policy answers with the same thread is a function call; a switch is a
  greenlet switch that also swaps the engine's ``threading.local`` objects (shared by
  the greenlets of one OS thread otherwise);
* a wait (``sync.Waitable.wait_for``) calls ``block``, a thread start ``spawn``
  (``engine/sync.py``).  A thread woken from a wait runs on to its after_wait gate
  within the waker's step, as a real one does (it takes the lock it waited for, pops
  the pool's task): here when the waker reaches its next gate;
* events go to a list, no History is folded; a run that deadlocks builds one (in full:
  ``lean.py``) for the controller's own analysis (``deadlock.py``) and its cycle.

Weighed against (``docs/explore.md``): one engine and its OS threads kept across
runs; forking at a branch point.  The limit: a wait the controller cannot see (a plain
``threading.Lock`` contended across a switch) blocks the one OS thread for good, where
real threads report *stuck*.  So greenlets for built-in scenarios (they wait through
``TrackedLock``, ``Signal`` and the engine), real threads for a scenario file unless
asked (``substrate="cooperative"``) and for torch programs.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from greenlet import getcurrent, greenlet

from autograd_tui import engine as engine_pkg
from autograd_tui.control import lean as lean_events
from autograd_tui.control.carriers import INTERRUPTED, POOL, carrier, module_locals, restore_locals
from autograd_tui.control.deadlock import DeadlockReport, analyse
from autograd_tui.control.policies import encode_schedule
from autograd_tui.control.table import ThreadTable
from autograd_tui.control.threads import ThreadInfo
from autograd_tui.engine.engine import Engine, use_engine
from autograd_tui.engine.events import EVENT_TYPES, Event, make_event
from autograd_tui.engine.sync import CarriedThread, ThreadAborted, TrackedLock

_NODE_META = EVENT_TYPES["node_meta"]


class Cooperative:
    """One serialized run of ``program`` on a fresh ``Engine(**options)``, its threads
    greenlets; the engine's wait tracker and observer.  ``run()`` drives it to the end
    (``policy.choose`` picks each step, as under the controller); ``close()`` ends the
    threads still parked.  ``lean``: its events leave out what the explorer never reads
    (``lean.py``): the same events and steps."""

    serialized = True

    def __init__(self, program: Any, options: dict[str, Any], lean: bool = False) -> None:
        self.program, self.options, self.lean = program, options, lean
        self.engine = Engine(**options)
        if lean:  # what no footprint or outcome reads is not built (``lean.py``)
            lean_events.install(self.engine)
        self.table = ThreadTable()
        self.events: list[Event] = []
        self.history = SimpleNamespace(events=self.events)  # what ``_Policy`` reads
        self.choices: list[int] = []
        self.policy: Any = None
        self.report: DeadlockReport | None = None
        self.aborted, self.program_done, self.result = False, False, None
        self.program_error: BaseException | None = None
        self._driver = getcurrent()
        self._current: ThreadInfo | None = None  # None: the driver
        self._greenlets: dict[int, greenlet] = {}  # by thread number: its carrier
        self._bodies: dict[int, Any] = {}  # threads not entered yet: what their carrier runs
        self._exited: set[int] = set()  # threads whose body returned (carrier idle again)
        self._infos: list[ThreadInfo] = []  # by number: ``table.by_name``'s values, a list
        # the paused threads (who may move next), kept while no state changes but a gate's
        # own (paused, granted running, paused at its next gate): each other sets None
        self._eligible: list[ThreadInfo] | None = None
        # the thread-locals' dicts on this OS thread (the greenlets share them): refilled
        self._dicts = [loc.__dict__ for loc in (self.engine._tls, *module_locals())]
        self._saved: dict[int, list[dict[str, Any] | None]] = {}  # by thread (0: driver)
        self._pending: ThreadInfo | None = None
        self._failure: BaseException | None = None  # raised by the policy at a gate
        self._woken: list[ThreadInfo] = []  # woken in this step, not yet at their gate
        self._waker: ThreadInfo | None = None  # whose step a woken thread runs in
        self.engine.waits = self
        self._observer = self.on_event  # one bound method: the one ``close`` removes
        self.engine.add_observer(self._observer)

    # --- the tracker interface (engine/sync.py): the threads themselves ----------------------
    def ident(self) -> int:
        cur = self._current
        return -cur.index if cur is not None else threading.get_ident()

    def make_lock(self, name: str) -> TrackedLock:
        return TrackedLock(name, self)

    def register_thread(self, name: str) -> None:
        table = self.table
        if name in table.by_name:
            raise RuntimeError(f"thread name {name!r} registered twice")
        # ``table.add`` without the condition a thread waits on there for its turn: a switch here
        info = ThreadInfo(name, len(table.by_name) + 1)
        info.ident = -info.index
        table.by_name[name] = table.by_ident[info.ident] = info
        self._infos.append(info)
        self._eligible = None
        self._pending = info

    def spawn(self, thread: CarriedThread) -> None:
        """A thread started: paused at its first gate, as a real one gets there within
        the step that started it (its first gate precedes any of its engine code)."""
        info = self._pending
        assert info is not None
        self._pending = None
        self._greenlets[info.index] = carrier(self._driver)
        self._bodies[info.index] = lambda: self._carried(info.index, thread.run)
        self._saved[info.index] = [None] * len(self._dicts)  # a new thread's are empty
        info.state = "paused"
        self._eligible = None

    def thread_begin(self, name: str) -> None:  # at this gate since spawned, granted now
        pass

    def thread_end(self, name: str) -> None:
        info = self.table.by_name[name]
        info.state = "finished"
        self._eligible = None
        if not self.aborted:
            self._next(info)

    def before_wait(self, kind: str, obj: Any) -> None:
        info = self._current
        if info is not None:
            info.state = "waiting"
            self._eligible = None
            info.waiting_kind, info.waiting_on = kind, obj

    def block(self, obj: Any) -> None:
        """The calling thread waits on ``obj`` (its condition released): the next step
        is another thread's; back here when one woke this one and it is granted."""
        info = self._current
        if info is None:
            raise RuntimeError("a wait outside the explored threads cannot be served")
        if info.state != "waiting":  # woken, and the predicate failed: waits again
            info.state = "waiting"
            self._eligible = None
            info.waiting_kind, info.waiting_on = obj.wait_kind, obj
            if self._waker is not None:
                self._switch(info, self._waker)
                return
        self._next(info)

    def notify(self, obj: Any, waiters: list[int]) -> None:
        """A woken real thread runs on to its after_wait gate within the waker's step (it
        re-checks, takes a lock it waited for, pops the pool's task): here, as soon as
        the waker reaches its next gate (``_wake``), the waker holding ``obj`` now."""
        for ident in waiters:
            info = self.table.by_ident.get(ident)
            if info is not None and info.state == "waiting":
                info.state = "transit"
                self._eligible = None
                self._woken.append(info)

    def after_wait(self, kind: str, obj: Any) -> None:
        """The gate after a wait: back to the waker (``_wake``), parked here."""
        info = self._current
        if info is None or self._waker is None:
            return
        info.waiting_kind = info.waiting_on = None
        info.state = "paused"
        self._eligible = None
        self._switch(info, self._waker)

    def emit_wait(self, kind: str, on: str, obj: Any) -> None:
        """thread_wait / thread_wake events for locks and signals, as ``Gates`` emits them."""
        if self._current is None:
            return
        holder = None
        if isinstance(obj, TrackedLock) and kind == "thread_wait" and obj.holder is not None:
            h = self.table.by_ident.get(obj.holder)
            holder = h.name if h else "another thread"
        data: dict[str, Any] = {"on": on, "target": obj.name}
        if kind == "thread_wait":
            data["holder"] = holder
        self.engine.emit(kind, **data)

    # --- gates ---------------------------------------------------------------------------------
    def on_event(self, event: Event) -> None:
        self.events.append(event)
        if self.aborted:
            raise ThreadAborted()
        info = self._current
        if info is None or type(event) is _NODE_META:
            return  # no gate: the driver's, or a note on a node (as in ``Gates.on_event``)
        info.last_event = event
        info.gates += 1
        info.state = "paused"
        if self._woken or INTERRUPTED[0]:
            self._next(info)
            return
        # ``_next``'s commonest case, inlined (a gate per event): nobody to wake, and a
        # thread to pick (this one is paused)
        try:
            pick = self.policy.choose(self._paused())
        except Exception as e:  # noqa: BLE001 - a Cut, a divergence: the driver's
            self._failure = e
            self._switch(info, None)
            return
        self.choices.append(pick.index)
        pick.state = "running"
        if pick is not info:
            self._switch(info, pick)

    def _paused(self) -> list[ThreadInfo]:
        """The threads the policy may pick: those paused at a gate (kept until one moves)."""
        eligible = self._eligible
        if eligible is None:
            eligible = self._eligible = [t for t in self._infos if t.state == "paused"]
        return eligible

    def _next(self, me: ThreadInfo) -> None:
        """``me``'s step ended (paused at a gate, waiting or finished): take the next one,
        on this greenlet when the policy picks ``me`` again, else switch to the pick (or to
        the driver when no thread can move, or the policy raised)."""
        if self.aborted:
            raise ThreadAborted()
        if self._woken:
            self._wake(me)
        eligible = self._paused()
        pick = None
        if INTERRUPTED[0]:
            self._failure = KeyboardInterrupt()
        elif eligible:
            try:
                pick = self.policy.choose(eligible)
            except Exception as e:  # noqa: BLE001 - a Cut, a divergence: the driver's
                self._failure = e
        if pick is None:
            if me.state != "finished":
                self._switch(me, None)
            # else its greenlet returns, to the driver (its parent): nothing to tear down
            return
        self.choices.append(pick.index)
        pick.state = "running"
        if pick is not me:
            self._switch(me, pick)

    def _wake(self, me: ThreadInfo) -> None:
        """Run each thread woken during ``me``'s step to its after_wait gate."""
        while self._woken:
            woken = self._woken.pop(0)
            self._waker = me
            try:
                self._switch(me, woken)
            finally:
                self._waker = None

    def _switch(self, me: ThreadInfo | None, to: ThreadInfo | None) -> None:
        """Run ``to`` (None: the driver) until it switches back here, with its locals."""
        dicts = self._dicts
        self._saved[me.index if me is not None else 0] = [d.copy() if d else None
                                                            for d in dicts]
        saved = self._saved.get(to.index if to is not None else 0)
        if saved is not None:  # ``restore_locals``, inlined
            for ld, d in zip(dicts, saved):
                if ld:
                    ld.clear()
                if d:
                    ld.update(d)
        self._current = to
        if to is None:
            self._driver.switch()
        else:
            body = self._bodies.pop(to.index, None)
            if body is not None:
                self._greenlets[to.index].switch(body)
            else:
                self._greenlets[to.index].switch()
        if self.aborted and me is not None:
            raise ThreadAborted()

    # --- the driver's side ---------------------------------------------------------------------
    def _body(self) -> None:
        """The program's thread, as ``Controller.start`` runs it."""
        name = "cpu (owner)"
        self.engine.set_thread_name(name)
        try:
            with use_engine(self.engine):
                self.thread_begin(name)
                self.result = self.program()
        except ThreadAborted:
            pass
        except BaseException as e:  # noqa: BLE001 - the outcome: reported to the caller
            self.program_error = e
        finally:
            self.program_done = True
            self.thread_end(name)

    def run(self) -> str:
        """To the end: ``finished``, ``deadlock`` (``report``) or ``paused`` (nothing can
        move and analysis finds no deadlock); the policy's exception is raised here."""
        self.register_thread("cpu (owner)")
        self.spawn(CarriedThread(self._body))
        self._next_from_driver()
        if self._current is not None:  # back as the last thread's greenlet ended
            restore_locals(self._dicts, self._saved.get(0))
            self._current = None
        if self._failure is not None:
            if isinstance(self._failure, KeyboardInterrupt):
                INTERRUPTED[0] = False
            raise self._failure
        if self.program_done:
            return "finished"
        return self._no_progress()

    def _next_from_driver(self) -> None:
        try:
            pick = self.policy.choose(self._paused())
        except Exception as e:  # noqa: BLE001
            self._failure = e
            return
        self.choices.append(pick.index)
        pick.state = "running"
        self._switch(None, pick)

    def _no_progress(self) -> str:
        """``Controller._no_progress``: the controller's analysis on a History of the run
        (a lean run's events leave out what it reads: a full run's report)."""
        if self.lean:
            report = lean_events.report_in_full(type(self)(self.program, self.options),
                                                self.choices)
        else:
            from autograd_tui.history import History

            history = History(every=128)
            for e in self.events:
                history.append(e)
            snap = self.table.snapshot(history.latest(), serialized=True)
            report = analyse(snap, history, self.engine)  # type: ignore[arg-type]
        self.report = report
        if not report.real:
            return "paused"
        self.events.append(make_event(
            self.engine.next_seq(), "deadlock", "controller", None, None, None,
            {"explanation": report.explanation, "cycle": report.cycle,
             "threads": report.threads}))
        return "deadlock"

    def schedule_string(self) -> str:
        return encode_schedule(self.choices)

    def gradients(self) -> dict[str, Any]:
        """As ``Run.gradients``: each tensor of the program's result, on the CPU."""
        out = self.result if isinstance(self.result, dict) else {"result": self.result}
        return {k: v.detach().to("cpu").numpy() for k, v in out.items()
                if isinstance(v, engine_pkg.Tensor)}

    def _carried(self, index: int, run: Any) -> None:
        try:
            run()
        finally:
            self._exited.add(index)

    def close(self) -> bool:
        """End every thread still parked (``ThreadAborted`` at its gate or wait); True
        when every one has ended (their carriers go back to the pool)."""
        self.aborted = True
        ok = True
        for index, g in self._greenlets.items():
            if index not in self._bodies and index not in self._exited and not g.dead:
                try:  # parked in ``_switch``, which raises ThreadAborted (half a ``throw``)
                    g.switch()
                except ThreadAborted:  # it escaped the carrier, which is gone
                    pass
            if not g.dead and (index in self._bodies or index in self._exited):
                POOL.append(g)
            else:
                ok = False
        restore_locals(self._dicts, self._saved.get(0))
        self._current = None
        engine = self.engine
        engine.remove_observer(self._observer)
        self._observer = None
        engine.waits = None
        lean_events.uninstall(engine)
        # cycles, else each run waits for the cyclic collector: the policy names this run
        # (``_Policy.ctl``), each queue its engine
        self.policy = None
        if ok:
            engine.cpu_ready_queues, engine.device_ready_queues = {}, {}
        return ok
