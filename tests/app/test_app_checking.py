"""The app opens a recording loaded with ``background=True`` (as ``autograd-tui replay``
does): it is shown as it is checked, at its end once checked; an event the check refuses
closes it with the message a full load gives."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from forge import signed
from pilot import SIZE, shown, until
from textual.pilot import Pilot

from autograd_tui import scenarios
from autograd_tui.app import AutogradApp as App
from autograd_tui.history import recordings as trace
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(120)


def _record(tmp_path: Path) -> tuple[Path, int]:
    path = tmp_path / "run.jsonl"
    with Run(scenarios.load("linear-relu")) as run:
        assert run.run().status == "finished"
        run.save(path)
        return path, len(run.events)


def test_a_recording_is_shown_as_it_is_checked_then_at_its_end(tmp_path: Path) -> None:
    path, total = _record(tmp_path)
    rec = trace.load(path, background=True)
    assert rec.history is not None and rec.history.available == 0
    rec.history.every = 4  # many chunks
    app = App(recording=rec)

    async def main() -> None:
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await until(pilot, lambda: shown(app) == (total, total))
            await pilot.pause()
            s = app.debugger.session
            assert s is not None and s.count() == total and not s.history.checking
            assert "checking" not in str(app.debugger.sub_title)
            await pilot.press("home")
            await until(pilot, lambda: shown(app) == (0, total))
            await pilot.press("left", "right", "right")
            await until(pilot, lambda: shown(app) == (2, total))
            assert s.state_at(2) == trace.load(path).history.state_at(2)
            await pilot.press("q")

    asyncio.run(main())


def test_an_event_the_check_refuses_closes_the_recording_with_its_message(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = _record(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    body = lines[1:-1]
    at = next(i for i, line in enumerate(body) if line.startswith(b'["node_start"'))
    ev = json.loads(body[at])
    ev[4] = 999_999  # a node no event made
    body[at] = json.dumps(ev, separators=(",", ":")).encode() + b"\n"
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(signed(lines[0], body, json.loads(lines[-1])["footer"]))
    with pytest.raises(trace.TraceError) as err:
        trace.load(bad)
    app = App(recording=trace.load(bad, background=True))

    async def main(pilot_box: list[Pilot[Any]]) -> None:
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            pilot_box.append(pilot)
            deadline = time.monotonic() + 30
            while app.return_code is None and time.monotonic() < deadline:
                await pilot.pause(0.02)

    asyncio.run(main([]))
    assert app.return_code == 1 and app.debugger.session is None
    said = "".join(capsys.readouterr().err.split())  # printed on exit, wrapped (a long
    assert "".join(str(err.value).split()) in said  # path may break anywhere in a word)


def test_while_checking_the_header_says_so_and_no_key_passes_the_checked_event(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autograd_tui.history import History

    path, total = _record(tmp_path)
    real = History._catch_up

    def slow(self: History, *a: Any, **kw: Any) -> None:  # an event at a time, slowly
        time.sleep(0.06)
        real(self, *a, **kw)

    monkeypatch.setattr(History, "_catch_up", slow)
    rec = trace.load(path, background=True)
    assert rec.history is not None
    rec.history.every = 1
    app = App(recording=rec)

    async def main() -> None:
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await until(pilot, lambda: "checking the recording" in str(app.debugger.sub_title)
                        and shown(app)[1] > 0)
            assert f" of {total} events (" in str(app.debugger.sub_title)
            await pilot.press("end")
            await pilot.pause()
            at, seen = shown(app)
            assert at == seen <= rec.history.folded < total  # never past the check
            await pilot.press("left")
            await until(pilot, lambda: shown(app)[0] == at - 1 or shown(app)[1] > seen)
            await until(pilot, lambda: shown(app)[1] == total, timeout=60)
            await pilot.pause()
            assert "checking" not in str(app.debugger.sub_title)
            await pilot.press("end")
            await until(pilot, lambda: shown(app) == (total, total))
            await pilot.press("q")

    asyncio.run(main())
