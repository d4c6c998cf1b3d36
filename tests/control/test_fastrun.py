"""The explorer's cooperative substrate (``control/fastrun.py``): the same search, run on
greenlets, gives the same outcome table as on real threads (outcomes, counts, shortest
schedule strings, cycles, runs), and its schedules replay on real threads to the same
outcome (``--policy schedule:STRING``)."""

from __future__ import annotations

import dataclasses
import random
import threading
from typing import Any

import pytest

from autograd_tui import engine, scenarios
from autograd_tui.control.explore import (
    Budget,
    Explorer,
    Outcome,
    Report,
    ScheduleResult,
    cooperative_program,
    fingerprint,
)
from autograd_tui.engine import grad_mode
from autograd_tui.engine.engine import _thread_engine
from autograd_tui.scenarios import Scenario
from autograd_tui.session.run import Run, RunSpec

pytestmark = pytest.mark.timeout(600)


def _two_devices() -> dict[str, Any]:
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    (x.to("cuda:0") * 3.0).to("cpu").sum().backward()
    return {"x": x.grad}


TWO_DEVICES = Scenario(
    name="two-devices", title="two threads", summary="", notes="", params={}, engine={},
    threads=("cpu (owner)", "cuda:0"), expect="complete", program=_two_devices,
    torch_program=None, source="tests.test_fastrun")


def _scenario(name: str) -> Scenario:
    return TWO_DEVICES if name == "two-devices" else scenarios.get(name)


def table(report: Report) -> dict[str, Any]:
    """Everything the explorer reports, but time; and every schedule it ran to its end,
    with its outcome and length, in the order it ran them."""
    return {
        "schedules": [(r.schedule, r.outcome, r.events, r.preemptions)
                      for r in getattr(report, "results", [])],
        "outcomes": {o: (s.count, s.shortest.schedule, s.shortest.events, s.shortest.cycle,
                         s.shortest.preemptions, s.first_after)
                     for o, s in report.outcomes.items()},
        "counts": (report.explored, report.runs, report.pruned, report.bound,
                   report.complete, report.stopped, dict(report.per_bound)),
    }


def explore(name: str, substrate: str, *, strategy: str = "dfs", bound: int = 2,
            reduce: bool = True, params: dict[str, Any] | None = None,
            engine_options: dict[str, Any] | None = None, schedules: int | None = None,
            seen: list[ScheduleResult] | None = None) -> Report:
    results: list[ScheduleResult] = []

    def keep(report: Report, result: ScheduleResult | None) -> None:
        if result is not None:
            results.append(result)

    before = set(threading.enumerate())
    report = Explorer(RunSpec(_scenario(name), params, engine_options), name,
                      budget=Budget(schedules, None, bound), reduce=reduce,
                      substrate=substrate, on_schedule=keep).run(strategy)
    assert not [t for t in threading.enumerate() if t not in before and t.is_alive()]
    report.results = results  # type: ignore[attr-defined]
    if seen is not None:
        seen.extend(results)
    return report


CASES = [  # (scenario, preemption bound, params, engine options)
    ("two-devices", 2, None, None),
    ("multi-device", 2, None, None),
    ("reentrant-deep", 2, {"depth": 3}, {"max_recursion_depth": 1}),
    ("race-lock-order", 1, None, None),  # deadlocks under some schedules, a user lock
    ("race-accumulation-order", 1, None, None),  # bit-different gradients
    ("deadlock-wait-on-device", 1, None, None),  # a Signal
    ("deadlock-pool-exhausted", 1, None, None),  # the reentrant pool
    ("deadlock-no-wakeup", 1, None, None),
    ("error-in-node", 1, None, None),
]


@pytest.mark.parametrize("name, bound, params, options", CASES)
def test_the_same_outcome_table_on_greenlets_as_on_threads(name, bound, params, options):
    threads = explore(name, "threads", bound=bound, params=params, engine_options=options)
    coop = explore(name, "cooperative", bound=bound, params=params,
                   engine_options=options)
    assert table(coop) == table(threads)
    assert coop.explored >= 1 and coop.complete


@pytest.mark.parametrize("name", ["two-devices", "race-lock-order"])
def test_the_same_table_without_the_reduction(name: str):
    assert table(explore(name, "cooperative", bound=1, reduce=False)) == \
        table(explore(name, "threads", bound=1, reduce=False))


@pytest.mark.parametrize("strategy", ["random", "pct"])
def test_random_walks_and_pct_are_the_same_on_both(strategy: str):
    kw: dict[str, Any] = {"strategy": strategy, "schedules": 40}
    assert table(explore("race-lock-order", "cooperative", **kw)) == \
        table(explore("race-lock-order", "threads", **kw))


def _replayed(name: str, schedule: str) -> Outcome:
    """The outcome of ``schedule`` replayed on real threads, as ``autograd-tui run NAME
    --policy schedule:STRING`` runs it."""
    with Run(_scenario(name), policy=f"schedule:{schedule}") as run:
        result = run.run()
        if result.status == "deadlock":
            return Outcome("deadlock", " -> ".join(result.report.cycle))
        if run.error is not None:
            return Outcome("error", f"{type(run.error).__name__}: {run.error}")
        assert result.status == "finished", result.status
        return Outcome("completed", fingerprint(run.gradients()))


@pytest.mark.parametrize("name", ["race-lock-order", "multi-device",
                                  "race-accumulation-order"])
def test_explored_schedules_replay_on_real_threads_to_the_same_outcome(name: str):
    seen: list[ScheduleResult] = []
    report = explore(name, "cooperative", bound=1, seen=seen)
    unique = list({r.schedule: r for r in seen}.values())  # a bound reruns the last's
    assert len(unique) == report.explored
    sample = random.Random(0).sample(unique, min(8, len(unique)))
    sample += [s.shortest for s in report.outcomes.values()]  # every outcome once
    for r in sample:
        assert _replayed(name, r.schedule) == r.outcome, r.schedule


def test_the_callers_thread_locals_are_left_as_they_were():
    other = engine.Engine()
    with engine.no_grad(), engine.use_engine(other):
        explore("race-lock-order", "cooperative", bound=0)
        assert not grad_mode.is_grad_enabled()
        assert _thread_engine.engine is other


def test_which_substrate_runs():
    scenario = scenarios.get("multi-device")
    with pytest.raises(ValueError, match="cooperative substrate needs a RunSpec"):
        Explorer(lambda: Run(scenario), "x", substrate="cooperative").run("dfs")
    with pytest.raises(ValueError, match="unknown substrate"):
        Explorer(RunSpec(scenario), "x", substrate="fibers")
    # a plain factory runs on threads, with the same result
    a = Explorer(lambda: Run(scenario), "x", budget=Budget(None, None, 0)).run("dfs")
    b = Explorer(RunSpec(scenario), "x", budget=Budget(None, None, 0)).run("dfs")
    assert table(a) == table(b)
    # auto: greenlets for a built-in scenario; threads for a scenario file or a torch one
    assert cooperative_program(RunSpec(scenario)) is not None
    assert cooperative_program(lambda: Run(scenario)) is None
    assert cooperative_program(RunSpec(TWO_DEVICES)) is None  # not built in
    assert cooperative_program(RunSpec(TWO_DEVICES), any_scenario=True) is not None
    torchy = dataclasses.replace(TWO_DEVICES, requires=("torch",))
    assert cooperative_program(RunSpec(torchy), any_scenario=True) is None


def test_ctrl_c_in_a_greenlet_run_stops_the_search():
    def interrupt(report: Report, result: Any) -> None:
        if report.explored == 3:
            raise KeyboardInterrupt

    report = Explorer(RunSpec(scenarios.get("race-lock-order")), "x",
                      on_schedule=interrupt, substrate="cooperative").run("dfs")
    assert report.stopped == "interrupted" and report.explored == 3


def test_a_real_ctrl_c_in_an_engine_thread_reaches_the_explorer():
    """SIGINT while a greenlet runs the program: the search stops, as interrupted, and no
    run records a KeyboardInterrupt as its outcome."""
    import signal

    runs = [0]

    def program() -> dict[str, Any]:
        runs[0] += 1
        if runs[0] == 4:
            signal.raise_signal(signal.SIGINT)
        return _two_devices()

    sc = dataclasses.replace(TWO_DEVICES, program=program)
    report = Explorer(RunSpec(sc), "x", substrate="cooperative").run("dfs")
    assert report.stopped == "interrupted" and 3 <= report.runs < 25  # 25: the whole search
    assert report.explored >= 1 and runs[0] == 4  # the 4th engine run never ended
    assert {o.kind for o in report.outcomes} == {"completed"}


def test_a_steps_footprint_is_the_union_of_its_events():
    """``step_footprint`` inlines the commonest kinds of ``event_footprint``: the same sets."""
    from autograd_tui.control.dependence import event_footprint, step_footprint

    events = []
    for name in ("race-lock-order", "deadlock-pool-exhausted", "multi-device"):
        with Run(scenarios.get(name)) as run:
            run.run()
            events += run.events
    assert len({e.kind for e in events}) >= 12
    rng = random.Random(1)
    for _ in range(300):
        i = rng.randrange(len(events))
        step = events[i:i + rng.randrange(1, 6)]
        union = set().union(*(event_footprint(e) for e in step))
        assert step_footprint(step) == frozenset(union)
        assert step_footprint(step, spawned=True) == frozenset(union | {"spawn"})


@pytest.mark.parametrize("name, bound, params, options", CASES[:4])
@pytest.mark.parametrize("reduce", [True, False])
def test_runs_known_from_the_trie_are_not_run_again(monkeypatch, name, bound, params,
                                                     options, reduce):
    """The same report with the run trie as without it, in fewer engine runs."""
    from autograd_tui.control import explore_run as explore_mod  # schedule_runner's

    engine_runs = [0]
    real = explore_mod.run_cooperative

    def counted(*a: Any, **kw: Any) -> Any:
        engine_runs[0] += 1
        return real(*a, **kw)

    monkeypatch.setattr(explore_mod, "run_cooperative", counted)
    kw: dict[str, Any] = {"bound": bound, "params": params, "engine_options": options,
                          "reduce": reduce}
    with_trie = explore(name, "cooperative", **kw)
    ran = engine_runs[0]
    monkeypatch.setattr(Explorer, "memo", False)
    engine_runs[0] = 0
    without = explore(name, "cooperative", **kw)
    assert table(with_trie) == table(without)
    assert engine_runs[0] == without.runs
    assert ran < without.runs  # each bound walks the last one's schedules again


def _trie_nodes(node: Any, depth: int = 0) -> list[Any]:
    """Every node of a run trie, depth first: what each step offered, its footprint, the
    run's result there, its children's picks."""
    from autograd_tui.control.runtrie import _OPEN

    here = (depth, node.eligible, node.fp,
            None if node.result is _OPEN else getattr(node.result, "schedule", "cut"),
            tuple(sorted(node.children)))
    return [here, *[n for k in sorted(node.children)
                    for n in _trie_nodes(node.children[k], depth + 1)]]


@pytest.mark.parametrize("name, bound, params, options", CASES[:4])
def test_a_run_is_recorded_from_where_its_walk_left_the_trie(monkeypatch, name, bound, params,
                                                             options):
    """``RunTrie.record`` starts where the walk before the run left the trie: the trie it
    builds is the one that recording every run from its first step builds."""
    from autograd_tui.control import runtrie

    made: list[runtrie.RunTrie] = []
    real_init, real_record = runtrie.RunTrie.__init__, runtrie.RunTrie.record

    def init(self: runtrie.RunTrie) -> None:
        real_init(self)
        made.append(self)

    def from_the_root(self: runtrie.RunTrie, *a: Any) -> None:
        self._left = None  # as before: every step from the first
        real_record(self, *a)

    monkeypatch.setattr(runtrie.RunTrie, "__init__", init)
    kw: dict[str, Any] = {"bound": bound, "params": params, "engine_options": options}
    tries = []
    for record in (real_record, from_the_root):
        monkeypatch.setattr(runtrie.RunTrie, "record", record)
        made.clear()
        explore(name, "cooperative", **kw)
        tries.append(_trie_nodes(made[0].root))
    assert len(tries[0]) > 50
    assert tries[0] == tries[1]
