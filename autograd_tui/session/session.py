"""What the app shows: a live run or a loaded recording, behind one interface.

The app never reaches into the engine: it reads events and ``EngineState``
from here, and asks here to step.  A live run and a recording both come with one
``History`` (the run's, or the one the recording was loaded into): engine threads
append to it through the controller, the app's timer reads it.  Blocking
controller calls (a step waits until the engine is still again) are made from a
worker thread by the app.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from autograd_tui import engine
from autograd_tui.control import EventQuery, StepResult, ThreadStatus
from autograd_tui.engine.events import Event
from autograd_tui.history import EngineState, History, StateError
from autograd_tui.history.recordings import Recording
from autograd_tui.scenarios import Scenario
from autograd_tui.session.run import Run
from autograd_tui.words import plain

CHECK_SHOWN_EVERY = 1.0  # s: how often the count of a recording being checked moves on

#: a breakpoint is an event query (kind, node, queue, thread, non-finite): ``control/query.py``
Breakpoint = EventQuery


def builtin_scenarios() -> list[tuple[str, str]]:
    """The built-in scenarios that can run here, as (name, summary): the app's picker."""
    from autograd_tui import scenarios

    return [(sc.name, sc.summary) for sc in scenarios.builtins()]


class Session:
    """A live run (``from_run``) or a recording (``from_recording``)."""

    def __init__(self, *, run: Run | None = None, recording: Recording | None = None) -> None:
        self.run = run
        self.recording = recording
        self.history = History()
        self.status = "ready"
        self.report: Any = None
        self.breakpoints: list[Breakpoint] = []
        self.fold_error: str | None = None  # an event the fold could not apply
        self._stop = threading.Event()
        self._shown_count = (0, 0.0)  # count() during a recording's check: (value, when)
        if run is not None:
            self.history = run.history
        elif recording is not None:
            self.history = recording.history if recording.history is not None else History(
                recording.events)
            footer = recording.footer
            self.status = footer.get("status", "completed")
            if self.status == "deadlock":
                dl = next((e for e in reversed(recording.events) if e.kind == "deadlock"), None)
                self.report = dl.data if dl else None

    @classmethod
    def from_run(cls, run: Run) -> Session:
        s = cls(run=run)
        run.start()
        return s

    @classmethod
    def from_recording(cls, rec: Recording) -> Session:
        return cls(recording=rec)

    @classmethod
    def open(cls, scenario: str | Scenario | None = None, *,
             params: dict[str, Any] | None = None, policy: str = "round-robin",
             seed: int = 0, engine_overrides: dict[str, Any] | None = None,
             recording: Recording | None = None) -> Session:
        """What the app is given, opened: a recording (shown, never run), else a live run,
        started, of ``scenario`` (a built-in name, a scenario file, or a ``Scenario``: a
        torch script; default linear-relu) with its options.  A bad name or file raises
        ``ScenarioError``, with one message naming it (the app shows it)."""
        if recording is not None:
            return cls.from_recording(recording)
        from autograd_tui import scenarios
        from autograd_tui.session.program_errors import load_scenario

        sc = scenario or scenarios.DEFAULT
        run = Run(sc if isinstance(sc, scenarios.Scenario) else load_scenario(sc),
                  params or {}, policy=policy, seed=seed,
                  engine_overrides=engine_overrides or {})
        return cls.from_run(run)

    # --- what to show ------------------------------------------------------------------
    @property
    def live(self) -> bool:
        return self.run is not None

    @property
    def error_text(self) -> str | None:
        """Why the program failed, once it has: at the person's own file and line, with
        that line's text (``program_errors``); a recording's footer says only the message.
        None while it has not failed."""
        if self.run is not None:
            err = self.run.error
            if err is None:
                return None
            if isinstance(err, SystemExit):
                return f"the program called sys.exit({err.code!r})"
            from autograd_tui.session.program_errors import locate_in_scenario

            return locate_in_scenario(err, self.run.scenario).text()
        if self.status != "error" or self.recording is None:
            return None
        error = self.recording.footer.get("error")  # unchecked JSON
        return plain(error) if isinstance(error, str) and error else "the program failed"

    @property
    def exit_code(self) -> int:
        """What quitting the app returns: as a headless run would (docs/cli.md), 1 when
        the program failed, 3 after a deadlock, else 0."""
        return {"error": 1, "deadlock": 3}.get(self.status, 0)

    @property
    def banner(self) -> str:
        """A live script's note for the header (what a torch.compile'd model steps); a
        recording's check under way, and how far it has got."""
        if self.run is not None:
            return self.run.scenario.banner
        n = len(self.history.events)
        if self.history.checking and self.history.available < n:
            return (f"checking the recording: {self.history.available:,} of {n:,} events "
                    f"({100 * self.history.available // max(n, 1)}%)")
        return ""

    @property
    def check_error(self) -> str | None:
        """What the background check of a recording refused (the message ``load`` would
        have raised, its control characters made visible): the app closes it."""
        err = self.history.check_error
        return plain(err) if err is not None else None

    @property
    def scenario_name(self) -> str:
        """The scenario's name, to show (a recording's, with control characters made
        visible)."""
        if self.run is not None:
            return plain(self.run.scenario.name)
        return plain(self.recording.scenario or "?") if self.recording else "?"

    @property
    def notes(self) -> str:
        if self.run is not None:
            return self.run.scenario.notes
        from autograd_tui import scenarios

        # A built-in scenario's notes only: a recording is untrusted data, and the name it
        # gives may be a path (scenarios.load would import and run that file).
        name = self.recording.scenario if self.recording else None
        if isinstance(name, str) and name in scenarios.names():
            return scenarios.get(name).notes
        return "_No teaching notes: this recording's scenario is not installed._"

    @functools.cached_property
    def forward(self) -> dict[int, tuple[str, ...]]:
        """The scenario's ``FORWARD`` (which forward op made each node, by sequence_nr):
        a recording's from the built-in scenario it names, as for ``notes``, else the one
        its header keeps (a scenario file's, as text; looked up once: the graph pane reads
        it at every step)."""
        if self.run is not None:
            return self.run.scenario.forward
        from autograd_tui import scenarios

        name = self.recording.scenario if self.recording else None
        if isinstance(name, str) and name in scenarios.names():
            return scenarios.get(name).forward
        return recorded_forward(self.recording.header if self.recording else {})

    @property
    def policy(self) -> str:
        if self.run is not None:
            p = self.run.policy
            return f"{p} (seed {self.run.seed})" if p == "random" else p.split(":")[0]
        sched = self.recording.header.get("schedule") if self.recording else None
        policy = sched.get("policy") if isinstance(sched, dict) else None  # unchecked JSON
        return plain(policy or "?")

    @property
    def devices(self) -> str:
        """The header's word on devices: real or simulated ``cuda:N``, only where the run
        uses them (nothing for a CPU-only one)."""
        return engine.describe_devices() if self._uses_cuda else ""

    @functools.cached_property
    def _uses_cuda(self) -> bool:
        if self.run is not None:
            return any("cuda" in t for t in self.run.scenario.threads)
        events = self.history.events  # its columns: a recording's events are not decoded
        return any(str(q or "").startswith("cuda") for q in events.queues()) or any(
            str(t).startswith("cuda") for t in events.thread_names())

    def start_check(self) -> None:
        """A recording loaded with ``background=True``: start checking it (the app, once
        its first frame is drawn); until then only event 0 is shown."""
        if self.recording is not None and not self._stop.is_set():
            self.recording.start_check()

    def count(self) -> int:
        """Events to show: a recording being checked grows as a live run does, but a few
        times a second (each new count redraws the app at it, slowing the check)."""
        if not self.history.checking:
            return self.history.available
        now = time.monotonic()
        if now - self._shown_count[1] >= CHECK_SHOWN_EVERY:
            self._shown_count = (self.history.available, now)
        return self._shown_count[0]

    def event(self, i: int) -> Event:
        return self.history.events[i]

    def events(self, start: int = 0, stop: int | None = None) -> list[Event]:
        return self.history.events[start:stop]

    def state_at(self, k: int) -> EngineState:
        """The state at k (after events 1..k).  Should an event contradict the fold (a
        state it does not model), the last state before it, and ``fold_error`` says so."""
        k = min(k, self.history.available)  # (a state at k waits for no check)
        try:
            return self.history.state_at(k)
        except StateError as e:
            if self.fold_error is None:
                self.fold_error = (f"cannot show the state after event "
                                   f"{self.history.folded + 1}: {e}")
            return self.history.state_at(min(k, self.history.folded))

    def thread_states(self) -> dict[str, ThreadStatus]:
        """The controller's live view (richer than the fold: paused, lock holders)."""
        if self.run is None:
            return {}
        return self.run.controller.thread_states()

    def thread_names(self) -> list[str]:
        if self.run is not None:
            return self.run.controller.thread_names()
        return [t for t in self.history.events.thread_names() if t != "controller"]

    def _node_names(self) -> dict[int, str]:
        """Node id -> name, of the nodes the run has made so far (a breakpoint's query
        learns the later ones from the events)."""
        return {n: info.name for n, info in self.history.latest().nodes.items()}

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "deadlock", "error")

    # --- driving (blocking: call from a worker thread) ------------------------------------
    def _after(self, r: StepResult) -> StepResult:
        if r.status == "deadlock":
            self.status, self.report = "deadlock", r.report
        elif r.status == "paused":
            self.report = r.report
        else:
            self._clear_paused_report()  # something moved: the old "paused" report is stale
            if self.run is not None and self.run.finished:
                self.status = "error" if self.run.error is not None else "completed"
        return r

    def _clear_paused_report(self) -> None:
        if getattr(self.report, "kind", None) == "paused":
            self.report = None

    def step_any(self) -> StepResult:
        assert self.run is not None
        if self.finished:
            return StepResult("finished", [])
        return self._after(self.run.controller.step_any())

    def step_thread(self, name: str) -> StepResult:
        assert self.run is not None
        if self.finished:
            return StepResult("finished", [])
        return self._after(self.run.controller.step(name))

    def arm(self) -> None:
        """Forget an earlier stop(): the app calls this when a run is asked for, so that a
        stop() pressed before the run's worker starts is not lost."""
        self._stop.clear()

    def run_until_breakpoint(self, *, arm: bool = True,
                             until: Callable[[Event], bool] | None = None) -> StepResult:
        """Run until a breakpoint (or the end); with none set, to the end.  stop() ends it
        after the step under way (``arm=False``: a stop() since the last arm() ends it at
        once).  The controller's ``run_until`` takes the steps, so a run costs no hand-off
        to this thread per event: the breakpoints and the stop are tested at each event.
        ``until``: stop too at the first event it holds for (the app's moves: over a node,
        to a module's end), status ``reached``; a breakpoint before it stops first."""
        assert self.run is not None
        if arm:
            self._stop.clear()
        if self._stop.is_set():
            return StepResult("stopped", [])
        if self.finished:
            return StepResult("finished", [])
        by_name = any(b.by_name for b in self.breakpoints)
        names = self._node_names() if by_name else None
        meta = self.history.latest().node_meta if by_name else None  # modules, params
        preds = [b.matcher(names, meta) for b in self.breakpoints]
        hits: list[Event] = []
        reached: list[Event] = []

        def stop_here(e: Event) -> bool:
            if not hits and any(p(e) for p in preds):
                hits.append(e)
            elif not reached and until is not None and until(e):
                reached.append(e)
            return bool(hits) or bool(reached) or self._stop.is_set()

        r = self._after(self.run.controller.run_until(stop_here))
        if r.status == "breakpoint":  # the event that matched (not the whole run's)
            if reached and not hits:
                return StepResult("reached", reached, r.thread)
            return StepResult("breakpoint" if hits else "stopped", hits, r.thread)
        return r

    def schedule_steps(self) -> int:
        """How many steps the run's ``schedule:`` policy names (0 for another policy)."""
        from autograd_tui.control.policies import decode_schedule

        if self.run is None or not self.run.policy.startswith("schedule:"):
            return 0
        return len(decode_schedule(self.run.policy.split(":", 1)[1]))

    def run_schedule(self) -> StepResult:
        """Take the steps the ``schedule:`` policy names, and stop there: a schedule from
        ``explore`` (or a recording's) opens at the moment it leads to, a deadlock say."""
        assert self.run is not None
        if self.finished:
            return StepResult("finished", [])
        controller = self.run.controller
        r = self._after(controller.run_until(None, self.schedule_steps()))
        if r.status == "limit" and not controller.movable():
            # the schedule ends where no thread can move: say so now (a deadlock), as the
            # run that made the schedule did
            r = self._after(controller.step_any())
        return r

    def stop(self) -> None:
        self._stop.set()

    def toggle_pause(self, name: str) -> bool:
        """Pause or resume one thread; returns True if it is now paused."""
        assert self.run is not None
        st = self.run.controller.thread_states().get(name)
        if st is not None and st.user_paused:
            self.run.controller.resume(name)
            self._clear_paused_report()
            return False
        self.run.controller.pause(name)
        return True

    def close(self) -> None:
        self._stop.set()
        self.history.stop_checking()
        if self.run is not None:
            self.run.close()


def recorded_forward(header: dict[str, Any]) -> dict[int, tuple[str, ...]]:
    """The ``FORWARD`` a recording's header keeps (``Run.header``), its strings made plain;
    the header's shape was checked when it was loaded (``history.fields``)."""
    info = header.get("scenario")
    forward = info.get("forward") if isinstance(info, dict) else None
    if not isinstance(forward, dict):
        return {}
    return {int(k): tuple(plain(n) for n in v) for k, v in forward.items()
            if isinstance(k, str) and k.isdecimal() and isinstance(v, list) and v
            and all(isinstance(n, str) for n in v)}
