"""SVG snapshots of the app at 120x40 (pytest-textual-snapshot's ``snap_compare``).

Each ``run_before`` drives the app to the moment shown, waits until the engine's
worker is done and the newest event is drawn, then clears the notifications (they
are transient) and lets the screen refresh, so the screenshot is deterministic.

Update after a deliberate change to the app's look:
``.venv/bin/python -m pytest tests/app/test_app_snapshots.py --snapshot-update``
and review the SVGs in ``tests/app/__snapshots__/test_app_snapshots/``.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from pilot import SIZE, finish, last_kind, settle, step_until
from textual.pilot import Pilot

from autograd_tui.app import AutogradApp
from autograd_tui.app.widgets import SidePane
from autograd_tui.app.widgets.group_table import GroupTable
from autograd_tui.session import Breakpoint

pytestmark = pytest.mark.timeout(120)


def test_default_scenario_at_its_start(snap_compare: Any) -> None:
    app = AutogradApp("linear-relu")
    assert snap_compare(app, terminal_size=SIZE, run_before=finish)


def test_linear_relu_with_linear1_in_not_ready(snap_compare: Any) -> None:
    app = AutogradApp("linear-relu")

    async def run_before(pilot: Pilot[Any]) -> None:
        await step_until(pilot, lambda a: last_kind(a) == "not_ready_insert")
        await finish(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_multi_device_with_two_queues_busy(snap_compare: Any) -> None:
    app = AutogradApp("multi-device")

    def two_busy(a: AutogradApp) -> bool:
        assert a.debugger.session is not None
        state = a.debugger.session.state_at(a.debugger.session.count())
        return len([q for q, heap in state.heaps.items() if heap]) >= 2

    async def run_before(pilot: Pilot[Any]) -> None:
        await step_until(pilot, two_busy)
        await finish(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_reentrant_hand_off_to_a_pool_thread(snap_compare: Any) -> None:
    # depth limit 2: the third nested backward is handed to reentrant-pool-1
    app = AutogradApp("reentrant-deep", params={"depth": 5},
                      engine_overrides={"max_recursion_depth": 2})

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        assert app.debugger.session is not None
        app.debugger.session.breakpoints = [Breakpoint(kind="thread_start",
                                                       thread="reentrant-pool-1")]
        await pilot.press("c")
        await settle(pilot)
        assert last_kind(app) == "thread_start"
        await finish(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_deadlock(snap_compare: Any) -> None:
    app = AutogradApp("deadlock-reentrant-block")

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("space")
        await settle(pilot)
        assert app.debugger.session is not None and app.debugger.session.status == "deadlock"
        await finish(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_help_screen(snap_compare: Any) -> None:
    app = AutogradApp("linear-relu")

    async def run_before(pilot: Pilot[Any]) -> None:
        await finish(pilot)
        await pilot.press("question_mark")
        await finish(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_small_terminal_message(snap_compare: Any) -> None:
    app = AutogradApp("linear-relu")
    assert snap_compare(app, terminal_size=(60, 20), run_before=finish)


needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="the torch examples need PyTorch (pip install torch)")


async def at_first_split(pilot: Pilot[Any]) -> None:
    """torch-attention (3 blocks) when its last block's SplitBackward0 (q, k, v) starts."""
    app = pilot.app
    assert isinstance(app, AutogradApp) and app.debugger.session is not None
    await finish(pilot)
    app.debugger.session.breakpoints = [Breakpoint(kind="node_start", node="SplitBackward0")]
    await pilot.press("c")
    await finish(pilot)
    # The side panes keep the height of the tallest content drawn during the run, which
    # depends on which frames the run had time to draw: fit them to this moment's.
    for pane in app.debugger.query(SidePane):
        pane.reset()
    app.debugger.redraw()
    await finish(pilot)


@needs_torch
def test_torch_attention_grouped_by_module(snap_compare: Any) -> None:
    """The blocks folded into one group, marked: it holds the running node."""
    app = AutogradApp("torch-attention", params={"layers": 3})
    assert snap_compare(app, terminal_size=SIZE, run_before=at_first_split)


@needs_torch
def test_torch_attention_groups_opened(snap_compare: Any) -> None:
    """``enter`` on the fold (it opens into the blocks), then on the running block."""
    app = AutogradApp("torch-attention", params={"layers": 3})

    async def run_before(pilot: Pilot[Any]) -> None:
        await at_first_split(pilot)
        app.debugger.query_one(GroupTable).focus()
        for key in ("enter", "down", "down", "down", "enter"):  # enter's message first
            await pilot.press(key)
            await pilot.pause()
        await finish(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
