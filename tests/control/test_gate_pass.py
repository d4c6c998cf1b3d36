"""A serialized run to the end passes most gates without the lock (``Gates._pass``): it
must take exactly the steps the locked path takes, one ``step_any`` at a time, and give
the same events and schedule, whether one thread moves or several (a pool, devices, a
deadlock)."""

from __future__ import annotations

import pytest

from autograd_tui import scenarios
from autograd_tui.control.gates import Gates
from autograd_tui.session.run import Run

pytestmark = pytest.mark.usefixtures("no_thread_left")

NAMES = ["chain", "diamond", "reentrant", "multi-device", "race-accumulation-order",
         "deadlock-lock-steal", "deadlock-wait-on-device", "hooks", "checkpoint"]


def _stepped(name: str) -> tuple[list[tuple], str, str]:
    """The run one ``step_any`` at a time: each step through the locked gate path."""
    with Run(scenarios.get(name)) as run:
        run.start()
        ctl = run.controller
        status = "limit"
        for _ in range(100_000):
            r = ctl.step_any()
            if r.status not in ("stepped", "blocked"):
                status = r.status
                break
            if r.status == "blocked" and ctl.finished and not ctl.movable():
                status = "finished"
                break
        return _shape(run), ctl.schedule_string(), status


def _shape(run: Run) -> list[tuple]:
    return [(e.seq, e.kind, e.thread, e.graph_task, e.node, e.queue) for e in run.events]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", NAMES)
def test_a_run_to_the_end_takes_the_steps_one_at_a_time_takes(name, monkeypatch):
    passes = []
    real = Gates._pass

    def counting(self, info, auto, event):
        ok = real(self, info, auto, event)
        passes.append(ok)
        return ok

    monkeypatch.setattr(Gates, "_pass", counting)
    with Run(scenarios.get(name)) as run:
        result = run.run()
        fast, schedule = _shape(run), run.controller.schedule_string()
        events = list(run.events)
    slow, slow_schedule, slow_status = _stepped(name)
    assert fast == slow
    assert schedule == slow_schedule
    assert [e.kind for e in events].count("deadlock") == (1 if result.status == "deadlock" else 0)
    if name == "chain":  # one thread: every gate but the first and the last, unlocked
        assert sum(passes) >= len(events) - 3, (sum(passes), len(events))
    if result.status == "finished":
        assert slow_status == "finished"


def test_a_step_limit_or_a_breakpoint_takes_the_locked_path(monkeypatch):
    passes = []
    real = Gates._pass
    monkeypatch.setattr(Gates, "_pass", lambda *a: passes.append(real(*a)) or passes[-1])
    with Run(scenarios.get("chain")) as run:
        r = run.run(max_steps=20)
        assert r.status == "limit" and len(r.events) == 20
        r = run.controller.run_until(lambda e: e.kind == "node_end")
        assert r.status == "breakpoint" and r.events[-1].kind == "node_end"
        assert not any(passes)
        assert run.run().status == "finished"
        assert any(passes)
