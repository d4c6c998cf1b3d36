"""``autograd-tui run NAME --policy schedule:STRING`` (the command ``explore`` prints for
each outcome) opens the app exactly where the schedule leads: its steps are taken at
start, and the app shows the last of them (a deadlock, for race-lock-order's)."""

from __future__ import annotations

import asyncio
import time

import pytest
from pilot import busy, until

from autograd_tui import scenarios
from autograd_tui.app import AutogradApp
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(120)

DEADLOCK = "schedule:1:29,2:4,3:6,2:2"  # the shortest deadlock explore finds


def headless(policy: str) -> tuple[str, int]:
    run = Run(scenarios.get("race-lock-order"), policy=policy)
    try:
        r = run.run()
        return r.status, len(run.events)
    finally:
        run.close()


async def opened(policy: str) -> tuple[str, int, int, int | None]:
    """The app on race-lock-order under ``policy``, once the schedule's steps are taken:
    (status, events, shown event), then the exit code of ``q``."""
    app = AutogradApp("race-lock-order", policy=policy)
    async with app.run_test(size=(120, 40)) as pilot:
        s = app.debugger.session
        assert s is not None
        await until(pilot, lambda: not busy(app) and 0 < s.count() == app.debugger.cursor,
                    timeout=60)
        status, count, cursor = s.status, s.count(), app.debugger.cursor
        await pilot.press("q")
    return status, count, cursor, app.return_code


def test_a_deadlocking_schedule_opens_at_the_deadlock() -> None:
    status, n = headless(DEADLOCK)
    assert status == "deadlock"
    app_status, count, cursor, _ = asyncio.run(opened(DEADLOCK))
    assert app_status == "deadlock"
    assert count == n and cursor == n  # the same events, the last one shown


def test_a_partial_schedule_stops_after_its_steps() -> None:
    app_status, count, cursor, _ = asyncio.run(opened("schedule:1:10"))
    assert app_status == "ready" and count == 10 and cursor == 10


# --- a program that fails: the error panel and the exit code -----------------------------------
def test_a_failing_program_shows_its_line_in_the_banner_and_quits_with_1(tmp_path) -> None:
    from autograd_tui.app.widgets import Banner

    lesson = tmp_path / "typo.py"
    lesson.write_text("from autograd_tui import engine as torch\n\nNAME = 'typo'\n\n"
                      "def program():\n    x = torch.tensor([1.0], requires_grad=True)\n"
                      "    x.tahn().sum().backward()\n")

    async def go() -> tuple[str, str, int | None]:
        app = AutogradApp(str(lesson))
        async with app.run_test(size=(120, 40)) as pilot:
            s = app.debugger.session
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                await pilot.press("full_stop")
                await pilot.pause(0.05)
                if s is not None and s.status == "error":
                    break
            await pilot.pause(0.1)
            banner = app.debugger.query_one(Banner)
            text = str(banner.render()) if banner.has_class("shown") else ""
            status = s.status if s is not None else "?"
            await pilot.press("q")
        return status, text, app.return_code

    status, text, code = asyncio.run(go())
    assert status == "error"
    assert "ERROR in the program" in text
    assert "typo.py:7: AttributeError: 'Tensor' object has no attribute 'tahn'" in text
    assert "did you mean 'tanh'?" in text and "x.tahn().sum().backward()" in text
    assert code == 1  # as `run --headless` would (docs/cli.md)


def test_quitting_after_a_deadlock_exits_3_and_midway_0() -> None:
    assert asyncio.run(opened(DEADLOCK))[3] == 3
    assert asyncio.run(opened("schedule:1:10"))[3] in (0, None)
