"""One explored run: the searching policy at each step, the run's outcome.

Not in PyTorch.  What the explorer (``explore.py``) runs for each schedule: a fresh
``Run`` under the controller on real threads (``run_schedule``) or the same program on
greenlets (``run_cooperative``, ``fastrun.py``), both under ``_Policy``, which records each
step (who moved, who could have, the step's footprint: ``dependence.py``) and asks the
search's ``decide`` who moves next; and the outcome of the run (``Outcome``: completed,
with a bit-exact fingerprint of the gradients, deadlock, error, stuck).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autograd_tui.control.dependence import Footprint, step_footprint
from autograd_tui.control.search import Cut


# --- outcomes ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    kind: str  # completed | deadlock | error | stuck
    detail: str  # the gradients' fingerprint, the wait-for cycle, the error message

    def __str__(self) -> str:
        return f"{self.kind} {self.detail}" if self.detail else self.kind


def fingerprint(grads: dict[str, np.ndarray]) -> str:
    """Bit-exact: a gradient that differs in its last bit gives another fingerprint."""
    h = hashlib.sha256()
    for name in sorted(grads):
        a = np.ascontiguousarray(grads[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:12]


@dataclass
class ScheduleResult:
    schedule: str
    outcome: Outcome
    preemptions: int
    events: int
    gradients: dict[str, np.ndarray] = field(default_factory=dict)
    cycle: list[str] = field(default_factory=list)  # a deadlock's wait-for cycle


# --- one run under a searching policy -------------------------------------------------------
#: a search's replayed prefix: (its frames, how many of them ``decide`` answers without a
#: footprint: ``_Policy``)
Replay = tuple[Any, int] | None


class _Policy:
    """The controller's policy for one explored run: records each step (who moved, who
    could have, where its events start) and asks ``decide`` who moves next."""

    name = "explore"

    def __init__(self, ctl: Any, decide: Callable[[int, tuple[int, ...], Footprint | None], int],
                 footprints: bool = True, needs: Callable[[int], bool] | None = None,
                 replay: Replay = None) -> None:
        self.ctl = ctl
        self.decide = decide
        self.want_footprints = footprints
        # needs(j): whether decide(j, ...) reads the footprint of step j - 1 (a search that
        # replays a prefix knows those already: they are the same each run)
        self.needs = needs
        # (frames, n): decide's answer at steps 0..n-1 is frames[j].chosen, given the same
        # eligible threads, with no footprint read: taken here without calling it
        self.frames, self.replay = replay if replay is not None else ((), 0)
        self.steps: list[tuple[int, tuple[int, ...], int, int]] = []  # pick, eligible, start, n
        self.footprints: dict[int, Footprint] = {}  # by step, those worked out
        self.offered: tuple[int, ...] = ()  # who could move at the last choice
        self._info: Any = None  # the thread of the last step (a ThreadInfo)
        # the last eligible list and its threads' numbers: ``fastrun`` passes the same list
        # (never changed) from gate to gate while nobody's state changes (held: its id
        # cannot be another list's)
        self._last: list[Any] | None = None
        self._indices: tuple[int, ...] = ()
        self._table, self._history = ctl.table.by_name, ctl.history

    def _finish_step(self, end: int | None) -> Footprint:
        """The footprint of the last step taken (its events are start:end)."""
        _, _, start, nthreads = self.steps[-1]
        info = self._info  # no lock: choose may run at a gate, which holds it
        state = info.state
        fp = step_footprint(
            self.ctl.history.events[start:end], spawned=len(self._table) > nthreads,
            finished=state == "finished",
            waits=(info.waiting_kind, info.waiting_on) if state == "waiting" else None)
        self.footprints[len(self.steps) - 1] = fp
        return fp

    def choose(self, eligible: list[Any]) -> Any:  # at each gate: the fewest calls
        now, steps = len(self._history.events), self.steps
        j, prev, needs = len(steps), None, self.needs
        if eligible is self._last:
            indices = self._indices
        else:
            indices = (eligible[0].index,) if len(eligible) == 1 else \
                tuple([t.index for t in eligible])
            self._last, self._indices = eligible, indices
        if j < self.replay:  # a replayed step: decide's answer is known
            f = self.frames[j]
            if indices == f.eligible:  # else decide raises Nondeterministic
                self.offered = indices
                pick = f.chosen
                steps.append((pick, indices, now, len(self._table)))
                for t in eligible:
                    if t.index == pick:
                        self._info = t
                        return t
        if j and self.want_footprints and (needs is None or needs(j)):
            prev = self._finish_step(now)
        self.offered = indices
        pick = self.decide(j, indices, prev)
        steps.append((pick, indices, now, len(self._table)))
        for t in eligible:
            if t.index == pick:
                self._info = t
                return t
        raise RuntimeError(f"the explorer picked thread {pick}, which cannot move")

    def end(self) -> None:
        """After the run: the last step's footprint (the controller's own deadlock event
        is not part of it)."""
        if self.want_footprints and self.steps:
            events = self.ctl.history.events
            end = len(events) - (1 if events and events[-1].kind == "deadlock" else 0)
            self._finish_step(end)

    def preemptions(self) -> int:
        n, prev = 0, None
        for pick, eligible, _, _ in self.steps:
            if prev is not None and pick != prev and prev in eligible:
                n += 1
            prev = pick
        return n


def _result(status: str, report: Any, error: BaseException | None,
            gradients: Callable[[], dict[str, np.ndarray]], schedule: str, policy: _Policy,
            events: int) -> ScheduleResult:
    """A run's outcome, from how it ended (the same for both substrates)."""
    if status == "deadlock" and report is not None:
        cycle = list(report.cycle)
        return ScheduleResult(schedule, Outcome("deadlock", " -> ".join(cycle)),
                              policy.preemptions(), events, cycle=cycle)
    if error is not None:
        outcome = Outcome("error", f"{type(error).__name__}: {error}")
    elif status == "finished":
        grads = gradients()
        return ScheduleResult(schedule, Outcome("completed", fingerprint(grads)),
                              policy.preemptions(), events, grads)
    else:
        outcome = Outcome(status, report.explanation if report is not None else "")
    return ScheduleResult(schedule, outcome, policy.preemptions(), events)


def run_schedule(make_run: Callable[[], Any],
                 decide: Callable[[int, tuple[int, ...], Footprint | None], int],
                 footprints: bool = True, needs: Callable[[int], bool] | None = None,
                 replay: Replay = None) -> tuple[ScheduleResult | None, _Policy]:
    """One run of a fresh ``Run`` (``make_run()``) whose choices ``decide`` makes (given
    each step's footprint when ``footprints``); None when ``decide`` cut it short (raised
    ``Cut``).  The run is always closed."""
    run = make_run()
    policy = _Policy(run.controller, decide, footprints, needs, replay)
    run.controller.policy = policy
    try:
        run.start()
        try:
            result = run.controller.run()
        except Cut:
            return None, policy
        policy.end()
        return _result(result.status, result.report, run.error, run.gradients,
                       run.controller.schedule_string(), policy, len(run.events)), policy
    finally:
        if not run.close():
            raise RuntimeError("an explored run's engine threads did not exit")


def run_cooperative(program: Callable[[], Any], options: dict[str, Any],
                    decide: Callable[[int, tuple[int, ...], Footprint | None], int],
                    footprints: bool = True, needs: Callable[[int], bool] | None = None,
                    replay: Replay = None) -> tuple[ScheduleResult | None, _Policy]:
    """``run_schedule`` on greenlets (``fastrun.py``): the same steps and outcome."""
    from autograd_tui.control.fastrun import Cooperative

    run = Cooperative(program, options, lean=True)
    policy = _Policy(run, decide, footprints, needs, replay)
    run.policy = policy
    try:
        try:
            status = run.run()
        except Cut:
            return None, policy
        policy.end()
        return _result(status, run.report, run.program_error, run.gradients,
                       run.schedule_string(), policy, len(run.events)), policy
    finally:
        if not run.close():
            raise RuntimeError("an explored run's threads did not end")


@functools.cache
def _has_greenlet() -> bool:
    """Whether greenlet is installed (looked up once: 90 us, a search's tenth on a small
    scenario)."""
    return importlib.util.find_spec("greenlet") is not None


def cooperative_program(make_run: Any, any_scenario: bool = False
                        ) -> tuple[Callable[[], Any], dict[str, Any]] | None:
    """``(program, engine options)`` for ``run_cooperative`` when ``make_run`` is a
    ``RunSpec`` of a program greenlets can run (not torch; built in unless
    ``any_scenario``: see ``fastrun.py``) and greenlet is installed; else None."""
    scenario = getattr(make_run, "scenario", None)
    if scenario is None or not hasattr(make_run, "engine_overrides"):
        return None
    if "torch" in getattr(scenario, "requires", ()):
        return None
    if not any_scenario and not str(getattr(scenario, "source", "")).startswith("scenarios."):
        return None
    if not _has_greenlet():
        return None
    probe = make_run()  # the checks a Run makes (parameters, engine options); no thread
    probe.close()
    params, program = probe.params, scenario.program
    return (lambda: program(**params)), probe.options


#: how one schedule is run: ``(decide, footprints, needs, replay) -> (result, policy)``
Runner = Callable[..., tuple[ScheduleResult | None, _Policy]]


def schedule_runner(make_run: Any, substrate: str = "auto") -> tuple[Runner, bool]:
    """How the explorer, and each ``--jobs`` worker alike, runs ``make_run``'s schedules,
    and whether on greenlets: ``run_cooperative`` where ``cooperative_program`` allows it
    (``auto``: a built-in scenario; ``cooperative``: any scenario file, else an error),
    ``run_schedule`` on real threads otherwise (``threads``).  ``make_run``: a ``RunSpec``,
    or what has one (``spec()``: a worker's picklable ``ScenarioRun``)."""
    coop = None
    if substrate != "threads":
        spec = make_run.spec() if hasattr(make_run, "spec") else make_run
        coop = cooperative_program(spec, any_scenario=substrate == "cooperative")
        if coop is None and substrate == "cooperative":
            raise ValueError("the cooperative substrate needs a RunSpec of a program "
                             "without torch, and greenlet")
    if coop is None:
        return functools.partial(run_schedule, make_run), False
    return functools.partial(run_cooperative, *coop), True
