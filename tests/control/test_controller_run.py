"""``run_until`` takes steps at the gates (no hand-off per event): the same steps, the
same schedule, the same stops as a driver that calls ``step_any`` once per step."""

from __future__ import annotations

import time

import pytest
from graphs import GRAPHS, multi_device

from autograd_tui import engine
from autograd_tui.control import Controller, breakpoint_on

pytestmark = pytest.mark.timeout(120)

OPTS = {"max_recursion_depth": 1}  # the reentrant graphs hand off to pool threads


def by_steps(ctl: Controller, predicate=None, max_steps=None) -> tuple[str, int]:
    """``run_until`` as it was: the driver asks the policy at every step."""
    steps = 0
    while max_steps is None or steps < max_steps:
        r = ctl.step_any()
        steps += 1
        if r.status in ("stepped", "blocked", "finished") and r.thread is not None:
            if predicate is not None and any(predicate(e) for e in r.events):
                return "breakpoint", steps
            movable = [s for s in ctl.thread_states().values() if s.state == "paused"]
            if r.status == "finished" and ctl.finished and not movable:
                return "finished", steps
            continue
        return r.status, steps
    return "limit", steps


def started(program, policy: str, seed: int = 0) -> Controller:
    ctl = Controller(engine.Engine(**OPTS), policy=policy, seed=seed)
    ctl.start(program)
    return ctl


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("policy,seed", [("round-robin", 0), ("random", 1), ("random", 5)])
def test_run_takes_the_steps_a_step_by_step_driver_takes(name, policy, seed):
    runs = []
    for drive in ("steps", "run"):
        ctl = started(GRAPHS[name], policy, seed)
        try:
            status = by_steps(ctl)[0] if drive == "steps" else ctl.run().status
            assert status == "finished" and ctl.program_error is None
            runs.append((list(ctl.events), ctl.schedule_string(), len(ctl.choices)))
        finally:
            assert ctl.close()
    assert runs[0] == runs[1]
    ctl = started(GRAPHS[name], f"schedule:{runs[0][1]}")
    try:  # the schedule replays the run, taken at the gates too
        assert ctl.run().status == "finished"
        assert (list(ctl.events), ctl.schedule_string()) == runs[0][:2]
    finally:
        assert ctl.close()


@pytest.mark.parametrize("limit", [1, 2, 7, 30])
def test_max_steps_stops_after_that_many_steps(limit):
    full = started(multi_device, "random", 3)
    try:
        assert full.run().status == "finished"
        events, choices = list(full.events), list(full.choices)
    finally:
        assert full.close()
    ctl = started(multi_device, "random", 3)
    try:
        r = ctl.run(max_steps=limit)
        assert r.status == "limit" and ctl.choices == choices[:limit]
        assert r.events == ctl.events == events[:len(ctl.events)]
        assert ctl.run().status == "finished"
        assert ctl.choices == choices and ctl.events == events
    finally:
        assert ctl.close()


def test_a_breakpoint_stops_where_a_step_by_step_driver_stops_and_is_asked_once():
    stops = []
    for drive in ("steps", "run"):
        calls: list[int] = []
        pops: list[int] = []

        def third_pop(e, calls=calls, pops=pops):  # counts: it must be asked once an event
            calls.append(e.seq)
            if e.kind == "pop":
                pops.append(e.seq)
            return e.kind == "pop" and len(pops) == 3

        ctl = started(multi_device, "random", 2)
        try:
            if drive == "steps":
                status, _ = by_steps(ctl, third_pop)
            else:
                status = ctl.run_until(third_pop).status
            assert status == "breakpoint"
            stops.append((list(ctl.events), list(ctl.choices)))
            if drive == "run":  # once per event: the predicate is not asked twice
                assert sorted(calls) == [e.seq for e in ctl.events]
        finally:
            assert ctl.close()
    assert stops[0] == stops[1]


def test_breakpoint_on_then_run_on_to_the_end():
    ctl = started(multi_device, "round-robin")
    try:
        r = ctl.run_until(breakpoint_on(kind="node_start", thread="cuda:1"))
        assert r.status == "breakpoint" and r.events[-1].kind == "node_start"
        assert r.events[-1].thread == "cuda:1"
        assert ctl.run().status == "finished"
    finally:
        assert ctl.close()


def test_an_error_in_the_predicate_comes_out_of_run_until():
    def bad(e):
        if e.kind == "pop":
            raise ValueError("predicate failed")
        return False

    ctl = started(multi_device, "round-robin")
    try:
        with pytest.raises(ValueError, match="predicate failed"):
            ctl.run_until(bad)
        assert ctl.events[-1].kind == "pop"  # it stopped at that step
        assert ctl.run().status == "finished" and ctl.program_error is None
    finally:
        assert ctl.close()


class Sleepy(engine.Function):
    """A backward that sleeps where the controller cannot see it."""

    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        time.sleep(1.0)
        return g


def sleepy_chain() -> None:
    x = engine.tensor(2.0, requires_grad=True)
    y = x
    for _ in range(20):
        y = y * 1.5
    Sleepy.apply(y).sum().backward()


def test_a_thread_stuck_between_gates_is_reported_in_a_run_and_the_run_goes_on():
    ctl = Controller(engine.Engine(), stuck_after=0.3)
    try:
        ctl.start(sleepy_chain)
        r = ctl.run()
        assert r.status == "stuck" and r.thread == "cpu (owner)"
        assert "has not reached a gate" in r.report.explanation
        assert r.events[-1].kind == "node_start" and r.events[-1].data["name"] == "SleepyBackward"
        time.sleep(1.0)  # it reaches its next gate, and waits there for the driver
        assert ctl.run().status == "finished" and ctl.program_error is None
    finally:
        assert ctl.close()


# --- the app's run: Session.run_until_breakpoint -------------------------------------------------
def test_the_apps_run_stops_at_a_breakpoint_then_runs_to_the_end():
    from autograd_tui import scenarios
    from autograd_tui.session import Breakpoint, Session
    from autograd_tui.session.run import Run

    with Run(scenarios.get("linear-relu")) as run:
        session = Session.from_run(run)
        session.breakpoints.append(Breakpoint(kind="not_ready_insert"))
        r = session.run_until_breakpoint()
        assert r.status == "breakpoint" and r.events[-1].kind == "not_ready_insert"
        assert run.events[-1] == r.events[-1] and session.status == "ready"
        assert session.run_until_breakpoint().status == "finished"
        assert session.status == "completed"


def test_stop_ends_the_apps_run_after_the_step_under_way():
    import threading

    from autograd_tui import scenarios
    from autograd_tui.session import Session
    from autograd_tui.session.run import Run

    with Run(scenarios.get("chain"), {"n": 20000}) as run:
        session = Session.from_run(run)
        got = []
        worker = threading.Thread(target=lambda: got.append(session.run_until_breakpoint()))
        worker.start()
        deadline = time.monotonic() + 60
        while len(run.events) < 100 and time.monotonic() < deadline:
            time.sleep(0.01)
        session.stop()
        worker.join(60)
        assert got and got[0].status == "stopped" and not session.finished
        n = len(run.events)
        time.sleep(0.2)
        assert len(run.events) == n  # nothing moves until asked
        assert session.step_any().status == "stepped" and len(run.events) == n + 1
