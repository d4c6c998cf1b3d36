"""The gates: what engine threads call, at each event and around each wait.

Not in PyTorch.  ``Gates`` is the controller's wait tracker and observer (``Engine.waits``,
``engine/sync.py``; ``Engine.add_observer``): every event passes ``on_event`` (stored in the
History, then the thread parks at its gate until it may go), every blocking wait reports
here.  In a ``run_until`` the thread at a gate asks the policy who moves next (``_step_on``;
``_pass`` without the lock when only it can move): no hand-off to the caller per event.  The
``Controller`` drives it; the threads are in its ``ThreadTable``, under the table's lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from autograd_tui.control.table import ThreadTable
from autograd_tui.control.threads import ThreadInfo, between_gates, standing_still, stuck_at
from autograd_tui.engine.events import EVENT_TYPES, Event
from autograd_tui.engine.sync import ThreadAborted, TrackedLock, Waitable

if TYPE_CHECKING:
    from autograd_tui.control.threads import AutoRun, Stuck
    from autograd_tui.engine.engine import Engine
    from autograd_tui.history import History


_NODE_META = EVENT_TYPES["node_meta"]

POLL = 0.25  # seconds between two looks at the threads between gates (at most)
BUSY_AFTER = 1.0  # a step under way this long is told to ``Gates.on_busy``, then each second


class Gates:
    """Who may pass a gate: serialized, one thread at a time (the one holding the turn);
    free-running, every thread not paused by the user."""

    def __init__(self, engine: Engine, history: History, table: ThreadTable, policy: Any, *,
                 serialized: bool, stuck_after: float) -> None:
        self.engine = engine
        self.history = history
        self.table = table
        self.policy = policy
        self.serialized = serialized
        self.stuck_after = stuck_after
        self.aborted = False
        self.choices: list[int] = []  # the thread each step was granted to: the schedule
        self.subscribers: list[Callable[[Event], None]] = []
        self.auto: AutoRun | None = None  # the run_until under way, if any
        # Bound here from the table: read at every gate.  All under the table's one lock.
        self._cv = table.cv
        self._mutex = table.lock  # the cv's own lock, entered without Condition's wrapper
        # The store's length, counted here (``grant`` recounts): asked, it takes a lock.
        self._store = history.events.appender()
        self._stored = len(history.events)
        self._threads = table.by_name
        self._by_ident = table.by_ident
        self._turn: str | None = None  # serialized: the thread that may move
        self._waitables: dict[int, Waitable] = {}
        self._pause_new = False
        self._pause_names: set[str] = set()  # threads to pause as soon as they start
        self._moved_at = 0.0  # time.monotonic() of the last step taken at a gate
        self._watchers = 0  # callers waiting for a free thread to pass gates (pass_free)
        self.stuck: Stuck | None = None  # why the last wait_quiescent gave up
        # Told (thread, seconds) while a thread computes long, on the driver's thread, unlocked.
        self.on_busy: Callable[[str, float], None] | None = None

    # --- the tracker interface (called by engine threads) -------------------------------------
    def make_lock(self, name: str) -> TrackedLock:
        return TrackedLock(name, self)

    def register_thread(self, name: str) -> None:
        with self._cv:
            self.table.add(name, paused=self._pause_new or name in self._pause_names)
            self._cv.notify_all()

    def thread_begin(self, name: str) -> None:
        with self._cv:
            info = self.table.bind(name)
        self._park(info, None)

    def thread_end(self, name: str) -> None:
        with self._cv:
            info = self._threads[name]
            info.state = "finished"
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
        if threading.get_ident() not in self._by_ident:
            return
        h = obj.holder if isinstance(obj, TrackedLock) else None
        holder = None if h is None else getattr(self._by_ident.get(h), "name", "another thread")
        extra = {"holder": holder} if kind == "thread_wait" else {}
        self.engine.emit(kind, on=on, target=obj.name, **extra)

    # --- the driver's side (called by the Controller) ------------------------------------------
    def quiescent(self) -> bool:
        """No thread moves: each waits, is finished, or is held at its gate (lock held)."""
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

    def eligible(self) -> list[ThreadInfo]:
        """The threads a step may be granted to (lock held)."""
        return [t for t in self._threads.values() if t.state == "paused" and not t.user_paused]

    def wait_quiescent(self) -> bool:
        """Wait until no thread moves; a thread that computes (a forward, a big op) however
        long, told to ``on_busy`` each second.  False when every thread between gates
        stood still (``threads.sample``) for ``stuck_after`` since the step began or a
        gate last stepped on its own (``run_until``); ``stuck`` says who and where."""
        t0 = time.monotonic()
        note_at = t0 + BUSY_AFTER
        while True:
            with self._cv:
                poll = min(POLL, max(self.stuck_after / 4, 0.01))
                look_at = time.monotonic() + poll
                while not self.quiescent():
                    now = time.monotonic()
                    if now >= look_at:
                        look_at = now + poll
                        since = max(t0, self._moved_at)
                        late = standing_still(self._threads.values(), since, now, self.stuck_after)
                        if late is not None:
                            self.auto = None  # the late thread's next gate hands back at once
                            self.stuck = stuck_at(late, since, now)
                            return False
                        if self.on_busy is not None and now >= note_at:
                            busy = next(between_gates(self._threads.values()), None)
                            break  # told outside the lock
                    self._cv.wait(look_at - now)
                else:
                    return True
            note_at = now + 1.0
            if busy is not None and self.on_busy is not None:
                self.on_busy(busy.name, now - since)

    def grant(self, info: ThreadInfo, auto: AutoRun | None) -> int:
        """Serialized: give ``info`` the turn (one step); returns where its events start."""
        with self._cv:
            start = self._stored = len(self.history.events)
            self._turn = info.name
            self.choices.append(info.index)
            if auto is not None:
                auto.thread, auto.start, auto.hit = info, start, False
            info.cv.notify()
            self._cv.notify_all()
        return start

    def pass_free(self, info: ThreadInfo, n: int) -> None:
        """Free-running: let ``info`` pass ``n`` gates (if paused); wait until it has, waits,
        finishes, or stands still (``wait_quiescent``) for ``stuck_after``."""
        with self._cv:
            target = info.gates + n
            info.allowance = n if info.user_paused else 0
            self._cv.notify_all()
            since = time.monotonic()
            self._watchers += 1
            try:
                while not (info.gates >= target or info.state in ("waiting", "finished")):
                    now = time.monotonic()
                    still = standing_still((info,), since, now, self.stuck_after)
                    if now - since >= self.stuck_after and (info.state == "paused" or still):
                        break
                    self._cv.wait(min(POLL, max(self.stuck_after / 4, 0.01)))
            finally:
                self._watchers -= 1

    def settle(self, done: Callable[[], bool], timeout: float) -> str:
        """Free-running: wait until ``done()`` or nothing moves; ``done``, ``quiescent``
        or ``timeout``: for ``timeout`` seconds no thread between gates computed."""
        start = time.monotonic()
        with self._cv:
            while not done():
                if self.quiescent() and not done():
                    return "quiescent"
                now = time.monotonic()
                late = standing_still(self._threads.values(), start, now, timeout)
                if now - start >= timeout and (
                        late is not None or not any(between_gates(self._threads.values()))):
                    return "timeout"
                self._cv.wait(0.05)
        return "done"

    def pause(self, thread: str | int) -> None:
        with self._cv:
            if isinstance(thread, str) and thread not in self._threads:
                self._pause_names.add(thread)
                return
            info = self.table.info(thread)
            info.user_paused, info.allowance = True, 0

    def resume(self, thread: str | int) -> None:
        with self._cv:
            if isinstance(thread, str):
                self._pause_names.discard(thread)
                if thread not in self._threads:
                    return
            info = self.table.info(thread)
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
            self._pause_names.clear()
            for info in self._threads.values():
                info.user_paused, info.allowance = False, 0
            self._cv.notify_all()

    def record(self, event: Event) -> None:
        """An event of the controller's own (a deadlock): stored and sent like the engine's."""
        with self._cv:
            self._store(event)
            self._stored += 1
        for fn in self.subscribers:
            fn(event)

    def abort(self) -> list[Waitable]:
        """Every parked thread raises ThreadAborted; returns the waits to wake."""
        with self._cv:
            self.aborted = True
            self._cv.notify_all()
            for info in self._threads.values():
                info.cv.notify_all()
            return list(self._waitables.values())

    # --- gates --------------------------------------------------------------------------------
    def on_event(self, event: Event) -> None:
        info = self._by_ident.get(threading.get_ident())
        auto = self.auto
        asks = auto is not None and auto.predicate is not None
        if type(event) is _NODE_META:
            # A note on a node, one per node of a PyTorch graph (thousands for a model), not
            # a step of the engine: no gate.  The thread runs on to its next event's gate.
            info = None
        if info is not None and not asks and not self.subscribers:
            if auto is None or auto.thread is not info or not self._pass(info, auto, event):
                self._park(info, event, store=True)  # one lock round trip a gate
            return
        with self._mutex:
            self._store(event)  # a list append: the fold runs when a view asks
            self._stored += 1
        for fn in self.subscribers:
            fn(event)
        if asks:
            # Tested here, unlocked, before the thread parks: all tested when the step ends.
            assert auto is not None and auto.predicate is not None
            try:
                if auto.predicate(event):
                    auto.hit = True
            except Exception as e:  # noqa: BLE001 - the driver's error, not the engine's
                auto.error, auto.hit = e, True
        if info is not None:
            self._park(info, event)

    def _park(self, info: ThreadInfo, event: Event | None, store: bool = False) -> None:
        with self._mutex:
            if store:
                self._store(event)  # type: ignore[arg-type]
                self._stored += 1
            if self.aborted:
                raise ThreadAborted()
            if event is not None:
                info.last_event, info.gates = event, info.gates + 1
            if self.serialized:
                info.state = "paused"
                auto = self.auto
                if self._turn == info.name:
                    self._turn = None
                    if auto is not None and auto.thread is info:
                        self._step_on(auto)
                elif self._turn is None and auto is not None and auto.thread is not None:
                    # A thread woken from a wait by the last step arrives after that step's
                    # thread parked: quiescent only now, this gate takes the next step.
                    self._step_on(auto)
                turn = self._turn
                if turn == info.name:  # the policy picked this thread (again)
                    info.state = "running"
                    return
                if turn is not None:
                    # Handed on here: wake the one thread picked (no other could move).
                    self._threads[turn].cv.notify()
                else:
                    self._cv.notify_all()  # the driver: quiescent now, perhaps
                while self._turn != info.name:
                    info.cv.wait()
                    if self.aborted:
                        raise ThreadAborted()
                info.state = "running"  # nobody waits for a thread to start moving
                return
            else:
                held = info.user_paused and info.allowance == 0
                while info.user_paused and info.allowance == 0:
                    info.state = "paused"
                    self._cv.notify_all()
                    self._cv.wait()
                    if self.aborted:
                        raise ThreadAborted()
                if info.user_paused and event is not None:
                    info.allowance -= 1
                if not (held or self._watchers or info.state != "running"):
                    return  # a thread passing a gate freely changes nothing anyone waits for
            info.state = "running"
            self._cv.notify_all()

    def _pass(self, info: ThreadInfo, auto: AutoRun, event: Event) -> bool:
        """Serialized, in a ``run_until`` with no step limit: the turn's holder passes its gate
        unlocked when no other thread can move (each waits or has finished). Else False."""
        if not self.serialized or self._turn != info.name or self.aborted or info.user_paused \
                or auto.hit or auto.error is not None or auto.max_steps is not None:
            return False
        for t in tuple(self._threads.values()):  # one C call: no dict resized under us
            if t is not info and t.state != "waiting" and t.state != "finished":
                return False
        self._store(event)
        self._stored, info.last_event, info.gates = self._stored + 1, event, info.gates + 1
        try:
            pick = self.policy.choose([info])  # as _step_on would: only this one can move
        except Exception as e:  # noqa: BLE001 - a ScheduleDivergence: the driver raises it
            auto.error = e
            self._park(info, None)  # hands the turn back to the driver
            return True
        auto.steps, auto.start, self._moved_at = auto.steps + 1, self._stored, time.monotonic()
        self.choices.append(pick.index)
        return True

    def _step_on(self, auto: AutoRun) -> None:
        """The step granted to ``auto.thread`` ended at its gate (lock held, no turn): take
        the next step here, as ``Controller.run_until`` would, when only the policy decides;
        anything else (a thread on its way, a breakpoint, the limit, an error) to the driver."""
        if auto.hit or auto.error is not None:
            return
        if auto.max_steps is not None and auto.steps + 1 >= auto.max_steps:
            return
        eligible = []  # _eligible() and _quiescent() (no turn is held) in one pass
        for t in self._threads.values():
            if t.state == "paused":
                if not t.user_paused:
                    eligible.append(t)
            elif t.state != "waiting" and t.state != "finished":
                return  # a thread is still on its way to a gate: the driver waits for it
        if not eligible:
            return
        try:
            pick = self.policy.choose(eligible)
        except Exception as e:  # noqa: BLE001 - a ScheduleDivergence: the driver raises it
            auto.error = e
            return
        auto.steps += 1  # the step that ended; the driver's _grant, from here on
        self._turn = pick.name
        self.choices.append(pick.index)
        auto.thread, auto.start = pick, self._stored
        self._moved_at = time.monotonic()
