"""One History per run: every built-in scenario ends as documented, and its live run and
its recording fold to the same state (the package layout is tests/test_layout.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from autograd_tui import scenarios
from autograd_tui.commands import main
from autograd_tui.history import StateError, fold
from autograd_tui.history import recordings as trace
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
EXIT = {"complete": 0, "deadlock": 3}


@pytest.mark.parametrize("name", scenarios.names())
def test_live_run_and_recording_fold_to_the_same_state(name, tmp_path):
    scenario = scenarios.get(name)
    run = Run(scenario)
    try:
        r = run.run()
        assert run.controller.history is run.history  # one store, the controller's
        assert run.controller.events is run.history.events
        want = "deadlock" if scenario.expect == "deadlock" else "finished"
        assert r.status == want, r.report
        assert run.error is None, f"{name}: {run.error!r}"
        run.save(tmp_path / "r.jsonl")
    finally:
        assert run.close()
    live = run.history.head
    assert live == fold(run.events)
    rec = trace.load(tmp_path / "r.jsonl")
    assert rec.history.head == live
    assert rec.history.state_at(len(rec.events) // 2) == run.history.state_at(
        len(run.events) // 2)


# run as real ``python -m autograd_tui`` processes: one scenario of each outcome, and one
# that imports PyTorch; the others call the same ``main`` in this process (the same code
# from the argument parser down, without a fresh interpreter and its imports per scenario)
END_TO_END = {"linear-relu", "deadlock-lock-steal", "torch-mlp"}


def test_the_end_to_end_runs_cover_each_outcome():
    assert END_TO_END <= set(scenarios.names())
    assert {scenarios.get(n).expect for n in END_TO_END} == set(EXIT)


@pytest.mark.parametrize("name", scenarios.names())
def test_every_scenario_runs_headless_to_its_documented_outcome(name, capsys):
    scenario = scenarios.get(name)
    argv = ["run", name, "--headless", "--quiet"]
    if name in END_TO_END:
        p = subprocess.run([sys.executable, "-m", "autograd_tui", *argv], capture_output=True,
                           text=True, timeout=100, cwd=ROOT)
        code, out, err = p.returncode, p.stdout, p.stderr
    else:
        code = main(argv)
        out, err = capsys.readouterr()
    assert code == EXIT[scenario.expect], out + err
    assert "Traceback" not in err
    word = "deadlock detected" if scenario.expect == "deadlock" else "completed"
    assert word in out


def test_an_event_the_fold_cannot_apply_stops_the_view_there_not_the_run():
    """A live run's History is folded when a view asks: an event that contradicts the
    state (a case the fold does not model) leaves the views at the state before it,
    with one message, and the controller's words about threads still work."""
    from autograd_tui.engine.events import make_event
    from autograd_tui.session import Session

    run = Run(scenarios.get("linear-relu"))
    try:
        session = Session.from_run(run)
        session.run_until_breakpoint()
        n = len(run.history)
        pop = next(e for e in run.history.events if e.kind == "pop")
        run.history.append(make_event(n + 1, "pop", pop.thread, pop.graph_task, pop.node,
                                      "nowhere", pop.data))
        assert session.state_at(n + 1) == run.history.state_at(n)
        assert session.fold_error is not None and f"after event {n + 1}" in session.fold_error
        assert run.controller.thread_states()  # no StateError from the controller either
    finally:
        assert run.close()


@pytest.mark.timeout(60)
def test_a_freed_graph_tasks_tasks_sort_first_from_the_event_that_says_so() -> None:
    """error-in-node: GraphTask 1 fails with a task left in the queue; once it is freed
    (``gone``), that task reads depth INT_MAX and pops before GraphTask 2's, as in the
    engine.  The states before that event are untouched (each state owns its pointers)."""
    from autograd_tui.engine.ready_queue import INT_MAX
    from autograd_tui.history.fold import apply

    run = Run(scenarios.get("error-in-node"))
    try:
        run.run()
    finally:
        assert run.close()
    h = run.history
    gone = [e for e in run.events if e.kind in ("push", "pop") and e.gone]
    assert [e.gone for e in gone] == [[1]]
    k = gone[0].seq
    before, at = h.state_at(k - 1), h.state_at(k)
    assert [t.depth for t in before.queue_order("cpu")] == [0]
    order = at.queue_order("cpu")
    assert order[0].graph_task is None and order[0].depth == INT_MAX
    assert order[1].graph_task == 2 and order[1].seq > order[0].seq  # seq alone: GT 2 first
    assert h.state_at(k - 1).queue_order("cpu") == before.queue_order("cpu")  # unchanged
    assert not before.graph_tasks[1].freed and at.graph_tasks[1].freed
    # a push for a freed GraphTask, or a GraphTask freed before it completed: rejected
    push = next(e for e in run.events[k:] if e.kind == "push" and e.graph_task == 2)
    bad = msgspec.structs.replace(push, graph_task=1, seq=len(run.events) + 1)
    with pytest.raises(StateError, match="GraphTask 1, which is gone"):
        apply(h.head.copy(), bad)
    early = h.state_at(4)
    with pytest.raises(StateError, match="freed before it completed"):
        apply(early, msgspec.structs.replace(gone[0], seq=5, gone=[1]))
