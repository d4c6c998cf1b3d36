"""The schedule explorer: it finds the deadlocking and the order-dependent schedules,
covers every schedule up to its bound where there are none, and each schedule it
reports replays (``control/explore.py``, ``commands/explore.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autograd_tui import scenarios
from autograd_tui.commands.parser import main
from autograd_tui.control.dependence import (
    EVERYTHING,
    event_footprint,
    independent,
    step_footprint,
)
from autograd_tui.control.explore import Budget, Explorer, Report
from autograd_tui.engine.events import SCHEMA, make_event
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(600)

EXE = str(Path(sys.executable).parent / "autograd-tui")

# Scenarios that deadlock under some schedules and complete under others.
SOMETIMES_DEADLOCK = {"race-lock-order"}
# Smaller parameters for scenarios whose default run is too long to search exhaustively.
SMALL: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "reentrant-deep": ({"depth": 3}, {"max_recursion_depth": 1}),
}


def explore(name: str, *, strategy: str = "dfs", budget: Budget | None = None,
            reduce: bool = True, params: dict[str, Any] | None = None,
            engine: dict[str, Any] | None = None, **kw: Any) -> Report:
    scenario = scenarios.get(name)
    before = set(threading.enumerate())
    report = Explorer(lambda: Run(scenario, params, engine_overrides=engine), name,
                      budget=budget, reduce=reduce, **kw).run(strategy)
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not left, f"the explorer left threads behind: {left}"
    return report


def replay(name: str, schedule: str, **kw: Any) -> tuple[Any, Run]:
    with Run(scenarios.get(name), policy=f"schedule:{schedule}", **kw) as run:
        result = run.run()
        return result, run


# --- must-show 1: a deadlock that only some schedules reach ----------------------------------
def test_race_lock_order_completes_under_round_robin():
    with Run(scenarios.get("race-lock-order")) as run:
        r = run.run()
        assert r.status == "finished" and run.error is None
        assert run.gradients()["x"].shape == ()


@pytest.mark.parametrize("name", sorted(SOMETIMES_DEADLOCK))
def test_the_default_budget_finds_the_deadlock_and_it_replays(name: str):
    report = explore(name)
    deadlocks = report.of_kind("deadlock")
    assert deadlocks, report.outcomes
    assert report.of_kind("completed"), "it should complete under most schedules"
    for stats in deadlocks:
        shortest = stats.shortest
        assert shortest.preemptions <= report.bound
        result, run = replay(name, shortest.schedule)
        assert result.status == "deadlock", result.status
        assert result.report.cycle == shortest.cycle
        assert run.controller.schedule_string() == shortest.schedule
    # and a completed schedule replays to the same gradients, bit for bit
    done = report.of_kind("completed")[0].shortest
    result, run = replay(name, done.schedule)
    assert result.status == "finished"
    for k, v in done.gradients.items():
        assert run.gradients()[k].tobytes() == v.tobytes()


def test_the_command_prints_the_replay_command_and_it_deadlocks():
    p = subprocess.run([EXE, "explore", "race-lock-order", "--preemptions", "1"],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"})
    assert p.returncode == 3, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("deadlock ("))
    command = lines[i + 1].split()
    assert command[:4] == ["autograd-tui", "run", "race-lock-order", "--policy"]
    assert "every schedule up to 1 preemption covered" in p.stdout
    q = subprocess.run([EXE, *command[1:], "--headless", "--quiet"], capture_output=True,
                       text=True, timeout=120)
    assert q.returncode == 3, q.stdout + q.stderr
    assert "deadlock detected" in q.stdout


@pytest.mark.parametrize("strategy", ["random", "pct"])
def test_random_walks_and_pct_find_the_deadlock_too(strategy: str):
    report = explore("race-lock-order", strategy=strategy,
                     budget=Budget(schedules=400, seconds=None))
    assert report.explored == 400 and report.stopped == "schedules"
    assert report.of_kind("deadlock") and report.of_kind("completed")


# --- must-show 2: where no schedule deadlocks, the search says how many it covered ------------
NEVER = [s.name for s in scenarios.builtins()
         if s.expect == "complete" and s.name not in SOMETIMES_DEADLOCK]


@pytest.mark.parametrize("name", NEVER)
def test_no_schedule_up_to_two_preemptions_deadlocks(name: str):
    params, engine = SMALL.get(name, (None, None))
    report = explore(name, budget=Budget(schedules=None, seconds=None, preemptions=2),
                     params=params, engine=engine)
    assert report.complete and report.bound == 2 and report.stopped == "done"
    assert report.explored >= 1
    assert sum(s.count for s in report.outcomes.values()) == report.explored
    assert not report.of_kind("deadlock"), report.outcomes
    assert {o.kind for o in report.outcomes} == {"completed"}


def test_multi_threaded_scenarios_have_many_schedules():
    """The exhaustive search is not trivially complete where threads interleave."""
    report = explore("multi-device", budget=Budget(None, None, 1))
    assert report.complete and report.explored > 10
    assert sum(report.per_bound.values()) == report.explored


# --- must-show 3: gradients that differ in the last bits ------------------------------------
def test_accumulation_order_gives_bit_different_gradients():
    report = explore("race-accumulation-order", budget=Budget(None, None, 1))
    completed = report.of_kind("completed")
    assert len(completed) >= 2, report.outcomes
    a, b = completed[0].shortest, completed[1].shortest
    assert a.gradients["x"].tobytes() != b.gradients["x"].tobytes()
    np.testing.assert_allclose(a.gradients["x"], b.gradients["x"], rtol=1e-15)
    for r in (a, b):  # each replays to its own bits
        result, run = replay("race-accumulation-order", r.schedule)
        assert result.status == "finished"
        assert run.gradients()["x"].tobytes() == r.gradients["x"].tobytes()


def test_the_command_shows_the_two_schedules_side_by_side(capsys):
    assert main(["explore", "race-accumulation-order", "--preemptions", "1"]) == 5  # differ
    out = capsys.readouterr().out
    assert "the gradients differ with the interleaving" in out
    assert "grad x (differs)" in out
    row = next(line for line in out.splitlines() if "grad x (differs)" in line)
    values = [float(v) for v in row.replace("│", " ").split()[3:]]
    assert len(values) == 2 and values[0] != values[1]
    assert abs(values[0] - values[1]) < 1e-15


# --- the reduction ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["race-lock-order", "race-accumulation-order",
                                  "multi-device"])
def test_the_reduction_finds_the_same_outcomes_with_fewer_schedules(name: str):
    budget = Budget(None, None, 1)
    full = explore(name, budget=budget, reduce=False)
    reduced = explore(name, budget=budget)
    assert full.complete and reduced.complete
    assert set(full.outcomes) == set(reduced.outcomes)
    assert reduced.explored < full.explored
    assert reduced.pruned > 0 and full.pruned == 0


def _event(kind: str, queue: str | None = None, graph_task: int | None = 1, **data: Any):
    """An event of ``kind``: the fields not given are zeros of their type."""
    zero = {"int": 0, "bool": False, "str": "", "list": [], "int|null": None}
    full = {k: zero.get(typ, zero.get(typ.split("[")[0], None))
            for k, (typ, _) in SCHEMA[kind].items()}
    return make_event(1, kind, "cuda:0", graph_task, 3, queue, {**full, **data})


def test_the_dependence_relation():
    pop0, pop1 = _event("pop", "cuda:0"), _event("pop", "cuda:1")
    assert independent(step_footprint([pop0]), step_footprint([pop1]))
    assert not independent(step_footprint([pop0]), step_footprint([_event("push", "cuda:0")]))
    # a push also touches its GraphTask; work on another GraphTask commutes with it
    push = step_footprint([_event("push", "cuda:1")])
    assert not independent(push, step_footprint([_event("outstanding_decrement")]))
    assert independent(push, step_footprint([_event("outstanding_decrement", graph_task=2)]))
    # user code (a node's function, a hook, a user lock) depends on all other user code
    end = step_footprint([_event("node_end", name="F")])
    assert not independent(end, step_footprint([_event("hook", hook_kind="pre")]))
    assert not independent(end, step_footprint(
        [_event("thread_wait", on="lock", target="stats", holder=None)]))
    assert independent(end, step_footprint([_event("node_start", name="G")]))
    # unknown: everything
    assert event_footprint(_event("error", message="x", exc_type="E")) == set(EVERYTHING)
    assert step_footprint([], finished=True) == EVERYTHING
    assert step_footprint([]) == EVERYTHING
    assert "spawn" in step_footprint([pop0], spawned=True)


# --- budgets, Ctrl-C, the command's edges ------------------------------------------------------
def test_a_schedule_budget_stops_the_search():
    report = explore("race-lock-order", budget=Budget(schedules=7, seconds=None))
    assert report.explored == 7 and report.stopped == "schedules" and not report.complete


def test_ctrl_c_reports_what_was_found_so_far():
    seen: list[int] = []

    def interrupt(report: Report, result: Any) -> None:
        seen.append(report.explored)
        if report.explored == 5:
            raise KeyboardInterrupt

    report = explore("race-lock-order", on_schedule=interrupt)
    assert report.stopped == "interrupted" and report.explored == 5
    assert sum(s.count for s in report.outcomes.values()) == 5


def test_json_output(capsys):
    code = main(["explore", "race-lock-order", "--json", "--strategy", "random",
                 "--schedules", "60", "--seed", "7"])
    out = json.loads(capsys.readouterr().out)
    assert out["explored"] == 60 and out["strategy"] == "random"
    assert sum(o["count"] for o in out["outcomes"]) == 60
    kinds = {o["kind"] for o in out["outcomes"]}
    assert code == (3 if "deadlock" in kinds else 0)
    for o in out["outcomes"]:
        assert o["replay"].startswith("autograd-tui run race-lock-order --policy schedule:")
        if o["kind"] == "deadlock":
            assert o["cycle"][0].startswith("thread ")


def test_the_replay_command_keeps_params_and_engine_options(capsys):
    assert main(["explore", "reentrant-deep", "--param", "depth=2", "--engine",
                 "max_recursion_depth=0", "--json", "--preemptions", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    (o,) = out["outcomes"]
    assert o["replay"].endswith("--param depth=2 --engine max_recursion_depth=0")


@pytest.mark.parametrize("argv, message", [
    (["--preemptions", "-1"], "--preemptions"),
    (["--schedules", "-3"], "--schedules"),
    (["--depth", "0"], "--depth"),
    (["--param", "nope=1"], "unknown parameter"),
])
def test_bad_usage_is_one_message(argv: list[str], message: str, capsys):
    assert main(["explore", "race-lock-order", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("autograd-tui: ") and message in err


def test_an_unknown_scenario_is_bad_usage(capsys):
    assert main(["explore", "race-lock-ordr"]) == 2
    assert "did you mean race-lock-order" in capsys.readouterr().err


def test_help_has_examples_and_docs_cover_the_command(capsys):
    with pytest.raises(SystemExit) as e:
        main(["explore", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "usage: autograd-tui explore" in out and "examples:" in out
    docs = Path(__file__).resolve().parents[2] / "docs"
    assert "## `explore NAME|PATH`" in (docs / "cli.md").read_text()
    for option in ("--strategy", "--preemptions", "--schedules", "--seconds", "--depth",
                   "--no-reduction", "--json"):
        assert option in out and option in (docs / "cli.md").read_text(), option


def test_a_program_that_does_not_run_the_same_way_twice_is_reported():
    from autograd_tui.control.explore import Nondeterministic

    names = iter(["race-lock-order", "multi-device"] * 50)
    before = set(threading.enumerate())
    ex = Explorer(lambda: Run(scenarios.get(next(names))), "flaky",
                  budget=Budget(None, None, 1))
    with pytest.raises(Nondeterministic, match="does not run the same way twice"):
        ex.run("dfs")
    assert not [t for t in threading.enumerate() if t not in before and t.is_alive()]
