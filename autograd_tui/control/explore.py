"""The schedule explorer: search the interleavings of a scenario's threads.

Not in PyTorch (its tests hope a race shows itself); this is what loom, CHESS and
shuttle do for real systems.  Every serialized run is a schedule (``policies.py``),
so instead of one schedule the explorer runs many, each from scratch on a fresh
engine (real threads, or greenlets: ``fastrun.py``; one run and its outcome:
``explore_run.py``; a run it knows is not run again: ``runtrie.py``), and sorts them by
outcome: *completed* (a bit-exact fingerprint of the
gradients, so a different float accumulation order is a different result),
*deadlock* (with the wait-for cycle) or *error*.  Each schedule it reports replays
with ``autograd-tui run NAME --policy schedule:STRING``.

Strategies:
* ``dfs``: exhaustive depth-first search over the scheduling choices, with a
  preemption bound (a *preemption* is a switch away from a thread that could have
  gone on), iterated as CHESS does: bound 0, then 1, then 2, ...  Sleep sets
  (Godefroid) prune an interleaving that only swaps two adjacent steps that
  commute (``dependence.py`` defines when they do; ``search.py`` holds the strategies).
* ``random``: seeded random walks (a random eligible thread at every step).
* ``pct``: probabilistic concurrency testing (Burckhardt et al. 2010) of depth d:
  random thread priorities, the highest eligible one runs, and at d - 1 random
  steps the running thread drops to the lowest priority.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from autograd_tui.control.dependence import Footprint
from autograd_tui.control.explore_run import (
    Outcome,
    Replay,
    Runner,
    ScheduleResult,
    _Policy,
    cooperative_program,
    fingerprint,
    run_cooperative,
    run_schedule,
    schedule_runner,
)
from autograd_tui.control.runtrie import RunTrie
from autograd_tui.control.search import PCT, BoundedDFS, Nondeterministic, RandomWalk

__all__ = ["PCT", "STRATEGIES", "BoundedDFS", "Budget", "Explorer", "Nondeterministic",
           "Outcome", "OutcomeStats", "RandomWalk", "Report", "SUBSTRATES", "ScheduleResult",
           "cooperative_program", "fingerprint", "run_cooperative", "run_schedule",
           "schedule_runner"]

STRATEGIES = ("dfs", "random", "pct")
#: where each explored run runs: real threads under the controller, or greenlets
#: (``fastrun.py``); ``auto`` takes greenlets for a built-in scenario (``cooperative_program``)
SUBSTRATES = ("auto", "threads", "cooperative")


@dataclass
class OutcomeStats:
    outcome: Outcome
    count: int
    shortest: ScheduleResult  # the shortest schedule string that gave it
    first_after: int = 0  # how many schedules the search had covered when it first saw it
    first_seconds: float = 0.0  # and how long it had searched


@dataclass
class Report:
    scenario: str
    strategy: str
    explored: int = 0  # schedules run to their end (each distinct)
    pruned: int = 0  # branches the reduction skipped (sleeping threads), runs it cut short
    runs: int = 0  # engine runs, cut ones included
    bound: int | None = None  # dfs: the preemption bound reached
    complete: bool = False  # dfs: every schedule up to ``bound`` was covered
    stopped: str = "done"  # done | schedules | seconds | interrupted
    seconds: float = 0.0
    per_bound: dict[int, int] = field(default_factory=dict)  # dfs: new schedules per bound
    outcomes: dict[Outcome, OutcomeStats] = field(default_factory=dict)

    def add(self, r: ScheduleResult) -> None:
        s = self.outcomes.get(r.outcome)
        if s is None:
            self.outcomes[r.outcome] = OutcomeStats(r.outcome, 1, r)
            return
        s.count += 1
        if (len(r.schedule), r.schedule) < (len(s.shortest.schedule), s.shortest.schedule):
            s.shortest = r

    def of_kind(self, kind: str) -> list[OutcomeStats]:
        return [s for s in self.outcomes.values() if s.outcome.kind == kind]


# --- the explorer -----------------------------------------------------------------------------
@dataclass
class Budget:
    schedules: int | None = 2000  # schedules to run to their end
    seconds: float | None = 120.0
    preemptions: int = 2  # dfs: the largest bound


class Explorer:
    """Explore ``make_run``'s schedules; ``on_schedule(report, result)`` after each one
    run to its end (a progress bar, ``--json`` lines).  Ctrl-C stops it: the report says
    what was found so far."""

    memo = True  # dfs: a run whose steps an earlier run took is not run again (runtrie.py)

    def __init__(self, make_run: Callable[[], Any], scenario: str, *,
                 budget: Budget | None = None, reduce: bool = True, seed: int = 0,
                 pct_depth: int = 3,
                 on_schedule: Callable[[Report, ScheduleResult | None], None] | None = None,
                 substrate: str = "auto") -> None:
        if substrate not in SUBSTRATES:
            raise ValueError(f"unknown substrate {substrate!r}: use {', '.join(SUBSTRATES)}")
        self.make_run, self.scenario = make_run, scenario
        self.substrate = substrate  # auto: cooperative for a RunSpec of a built-in scenario
        self._runner: Runner | None = None  # how a schedule runs (``schedule_runner``)
        self.budget = budget or Budget()
        self.reduce, self.seed, self.pct_depth = reduce, seed, pct_depth
        self.on_schedule = on_schedule
        self._t0 = 0.0

    def _over(self, report: Report) -> str | None:
        b = self.budget
        if b.schedules is not None and report.explored >= b.schedules:
            return "schedules"
        if b.seconds is not None and time.perf_counter() - self._t0 >= b.seconds:
            return "seconds"
        return None

    def _record(self, report: Report, result: ScheduleResult | None, seen: set[str]) -> None:
        report.runs += 1
        if result is not None and result.schedule not in seen:
            seen.add(result.schedule)
            report.explored += 1
            report.add(result)
            stats = report.outcomes[result.outcome]
            if stats.count == 1:
                stats.first_after = report.explored
                stats.first_seconds = time.perf_counter() - self._t0
        if self.on_schedule is not None:
            self.on_schedule(report, result)

    def run(self, strategy: str = "dfs") -> Report:
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}: use {', '.join(STRATEGIES)}")
        self._runner, cooperative = self._schedule_runner()
        report = Report(self.scenario, strategy)
        self._t0 = time.perf_counter()
        try:
            if not cooperative:
                getattr(self, f"_{strategy}")(report, set())
            else:
                from autograd_tui.control.carriers import interrupts_to_driver

                with interrupts_to_driver():
                    getattr(self, f"_{strategy}")(report, set())
        except KeyboardInterrupt:
            report.stopped = "interrupted"
        report.seconds = time.perf_counter() - self._t0
        return report

    def _schedule_runner(self) -> tuple[Runner | None, bool]:
        """How this process runs a schedule, and whether on greenlets."""
        return schedule_runner(self.make_run, self.substrate)

    def _one(self, decide: Callable[[int, tuple[int, ...], Footprint | None], int],
             footprints: bool, needs: Callable[[int], bool] | None = None,
             replay: Replay = None) -> tuple[ScheduleResult | None, _Policy]:
        assert self._runner is not None  # set by ``run``
        return self._runner(decide, footprints, needs, replay)

    def _dfs(self, report: Report, seen: set[str]) -> None:
        trie = RunTrie()  # the runs taken: one whose steps are all known is not run again
        for bound in range(self.budget.preemptions + 1):
            search = BoundedDFS(bound, self.reduce)
            before = report.explored
            report.bound, report.complete = bound, False
            while True:
                over = self._over(report)
                if over is not None:
                    report.stopped = over
                    report.pruned += search.pruned
                    report.per_bound[bound] = report.explored - before
                    return
                # Replayed, ``decide`` answers each frame's choice and reads the footprint
                # of no step before ``known``: the frames the walk added after it have
                # theirs (from the trie, what the run would work out again)
                known = trie.walk(search.decide, self.reduce, search.needs_footprint,
                                  (search.frames, len(search.frames))) if self.memo else None
                if known is not None:
                    result = known[0]
                else:
                    result, policy = self._one(search.decide, self.reduce,
                                               search.needs_footprint,
                                               (search.frames, len(search.frames)))
                    trie.record(policy.steps, policy.footprints,
                                policy.offered if result is None else None, result)
                self._record(report, result, seen)
                if not search.backtrack():
                    break
            report.pruned += search.pruned
            report.per_bound[bound] = report.explored - before
            report.complete = True
            if not search.capped:  # nothing was left out for the bound: larger ones add none
                report.bound = self.budget.preemptions
                return

    def _random(self, report: Report, seen: set[str]) -> None:
        walk = 0
        while (over := self._over(report)) is None:
            result, _ = self._one(RandomWalk(self.seed + walk).decide, False)
            walk += 1
            self._record(report, result, seen)
            if self.budget.schedules is None and walk >= 100_000:
                break
        report.stopped = over or "done"

    def _pct(self, report: Report, seen: set[str]) -> None:
        k, walk = 1, 0
        while (over := self._over(report)) is None:
            result, policy = self._one(PCT(self.seed + walk, self.pct_depth, k).decide, False)
            k = max(k, len(policy.steps))
            walk += 1
            self._record(report, result, seen)
            if self.budget.schedules is None and walk >= 100_000:
                break
        report.stopped = over or "done"
