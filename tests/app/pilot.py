"""The app under Textual's Pilot, for the tests of ``tests/app/``: one wait loop.

A test drives the app the way a person would (a key, then a wait until the engine's
worker is done and the debugger screen has drawn the newest event: its title's
``event i/n``), and reads the debugger screen (``app.debugger``).  ``shown_in`` reads
the same title from a terminal's text (tmux, a browser).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from textual.pilot import Pilot

from autograd_tui.app import AutogradApp

SIZE = (120, 40)
SHOWN = re.compile(r"event (\d+)/(\d+)")


def shown_in(text: str) -> tuple[int, int] | None:
    """(shown event, newest event) as a title in ``text`` says, if one does."""
    m = SHOWN.search(text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def shown(app: AutogradApp) -> tuple[int, int]:
    """(shown index, newest event) as the debugger's title says."""
    found = shown_in(str(app.debugger.sub_title))
    assert found is not None, app.debugger.sub_title
    return found


def busy(app: AutogradApp) -> bool:
    """An engine request is in flight (the debugger's ``driver`` worker)."""
    return any(w.group == "driver" and not w.is_finished for w in app.workers)


async def settle(pilot: Pilot[Any], timeout: float = 30.0) -> None:
    """Until no engine request is in flight and the app has drawn the newest event."""
    app = pilot.app
    assert isinstance(app, AutogradApp)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.01)
        s = app.debugger.session
        if not busy(app) and (s is None or shown_in(str(app.debugger.sub_title)) is not None
                              and shown(app)[1] == s.count()):
            break
    else:
        raise AssertionError("the app did not settle")
    await pilot.pause()


async def until(pilot: Pilot[Any], done: Callable[[], bool], timeout: float = 30.0) -> None:
    """Until ``done()``, however long the app takes to get there (``timeout`` at most)."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.02)


async def press(pilot: Pilot[Any], *keys: str) -> None:
    """Each key, settled after it."""
    for k in keys:
        await pilot.press(k)
        await settle(pilot)


async def finish(pilot: Pilot[Any]) -> None:
    """Settled, without notifications, refreshed (a snapshot's last step)."""
    await settle(pilot)
    pilot.app.clear_notifications()
    # a few rounds: a scroll to the newest node is scheduled after the refresh that laid
    # it out, so on a loaded machine one round could snapshot the pane before it scrolled
    for _ in range(3):
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
    await pilot.pause()


async def step_until(pilot: Pilot[Any], done: Callable[[AutogradApp], bool],
                     limit: int = 300) -> None:
    """``.`` (one event) until ``done(app)``."""
    app = pilot.app
    assert isinstance(app, AutogradApp)
    await settle(pilot)
    for _ in range(limit):
        if done(app):
            return
        await pilot.press("full_stop")
        await settle(pilot)
    raise AssertionError("never reached the wanted state")


def last_kind(app: AutogradApp) -> str | None:
    """The newest event's kind (None before any)."""
    s = app.debugger.session
    assert s is not None
    return s.event(s.count() - 1).kind if s.count() else None


def run_app(app: AutogradApp, script: Callable[[Pilot[Any]], Awaitable[None]],
            size: tuple[int, int] = SIZE) -> None:
    """Open ``app`` headless at ``size``, settle, and run ``script``."""
    async def main() -> None:
        async with app.run_test(size=size, notifications=True) as pilot:
            await settle(pilot)
            await script(pilot)

    asyncio.run(main())
