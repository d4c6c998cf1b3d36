"""The explorer's lean runs (``Cooperative(lean=True)``, ``control/lean.py``): events
without tensor summaries and without the graph ``dependencies_computed`` describes, and
otherwise the same run: the same events (kinds, threads, tasks, queues, waits), the same
steps, footprints and gradients, and the same deadlock report (a full run's), for a
search's every schedule on a scenario that completes and on one that deadlocks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from autograd_tui import scenarios
from autograd_tui.control.dependence import step_footprint
from autograd_tui.control.explore import Budget, Explorer
from autograd_tui.control.fastrun import Cooperative
from autograd_tui.control.policies import ExplicitSchedule, decode_schedule
from autograd_tui.session.run import RunSpec

pytestmark = pytest.mark.timeout(300)

_TENSORS = ("inputs", "outputs", "grad", "value", "leaf_grad")
_GRAPH = ("dependencies", "nodes")  # dependencies_computed's: empty in a lean run


def _one(name: str, schedule: str, lean: bool) -> tuple[Cooperative, str]:
    spec = RunSpec(scenarios.get(name))
    probe = spec()
    probe.close()
    program, params = spec.scenario.program, probe.params
    run = Cooperative(lambda: program(**params), probe.options, lean=lean)
    run.policy = ExplicitSchedule(decode_schedule(schedule))
    try:
        status = run.run()
    finally:
        assert run.close()
    return run, status


def _shape(e: Any) -> tuple[Any, ...]:
    """An event but its tensors' summaries."""
    data = {k: v for k, v in e.data.items() if k not in _TENSORS and k not in _GRAPH}
    return (e.kind, e.thread, e.graph_task, e.node, e.queue, repr(data))


@pytest.mark.parametrize("name", ["multi-device", "race-lock-order", "deadlock-lock-steal"])
def test_a_lean_run_is_the_same_run_without_summaries(name: str) -> None:
    report = Explorer(RunSpec(scenarios.get(name)), name,
                      budget=Budget(schedules=12, seconds=60, preemptions=1),
                      substrate="cooperative").run("dfs")
    schedules = [s.shortest.schedule for s in report.outcomes.values()]
    assert schedules
    saw_null = 0
    for schedule in schedules:
        full, status_full = _one(name, schedule, lean=False)
        lean, status_lean = _one(name, schedule, lean=True)
        assert status_lean == status_full
        assert lean.choices == full.choices
        assert [_shape(e) for e in lean.events] == [_shape(e) for e in full.events]
        assert step_footprint(lean.events) == step_footprint(full.events)
        if status_full == "finished":
            gl, gf = lean.gradients(), full.gradients()
            assert gl.keys() == gf.keys()
            for k in gf:
                assert np.array_equal(gl[k], gf[k])
        if status_full == "deadlock":  # the lean run's report is the full run's
            assert lean.report is not None and full.report is not None
            assert lean.report.cycle == full.report.cycle
            assert lean.report.explanation == full.report.explanation
        for e in lean.events:
            if e.kind == "dependencies_computed":
                assert e.data["nodes"] == [] and e.data["dependencies"] == []
            if e.kind == "node_end":
                saw_null += 1
                assert all(v is None for v in e.data["outputs"])
                assert e.data["leaf_grad"] is None
    assert saw_null > 0
