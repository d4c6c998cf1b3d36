"""A run to the end keeps the cyclic collector aside (``session.run._collector_aside``): a
higher first threshold and what existed before frozen, for the run only; a run of a few
steps (the app's) leaves the collector as it is."""

from __future__ import annotations

import gc

import pytest

from autograd_tui import scenarios
from autograd_tui.session.run import RUN_GC_THRESHOLD, Run

pytestmark = pytest.mark.usefixtures("no_thread_left")


def _watching(run: Run, seen: list[tuple[int, int]]) -> None:
    program = run._program

    def watched():  # on the program's thread, during the run
        seen.append((gc.get_threshold()[0], gc.get_freeze_count()))
        return program()

    run._program = watched  # type: ignore[method-assign]


@pytest.mark.timeout(60)
def test_a_run_to_the_end_raises_the_threshold_then_puts_it_back():
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    seen: list[tuple[int, int]] = []
    with Run(scenarios.get("chain"), {"n": 50}) as run:
        _watching(run, seen)
        assert run.run().status == "finished"
    assert seen and seen[0][0] == max(before[0], RUN_GC_THRESHOLD)
    assert seen[0][1] > frozen  # what existed before the run: frozen for it
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen


@pytest.mark.timeout(60)
def test_a_few_steps_leave_the_collector_alone():
    before = gc.get_threshold()
    seen: list[tuple[int, int]] = []
    with Run(scenarios.get("chain"), {"n": 50}) as run:
        _watching(run, seen)
        assert run.run(max_steps=5).status == "limit"
        assert seen and seen[0][0] == before[0]
    assert gc.get_threshold() == before
