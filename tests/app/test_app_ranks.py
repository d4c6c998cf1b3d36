"""The app on several ranks' recordings (``torch --ranks``, ``replay runs/``): the ranks bar
shows every rank, ``<``/``>`` go from rank to rank, and stepping one rank leaves the
others where they were.  Driven through Textual's Pilot, as in ``test_app.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pilot import press, run_app, settle, shown
from test_app import App, text_of
from textual.pilot import Pilot

from autograd_tui import scenarios
from autograd_tui.app import AutogradApp
from autograd_tui.app.debugger import RankScreen
from autograd_tui.history import recordings as trace
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(120)


def record(path: Path, scenario: str, rank: int | None) -> trace.Recording:
    run = Run(scenarios.get(scenario))
    try:
        assert run.run().status == "finished"
        header = run.header()
        if rank is not None:
            header["distributed"] = {"rank": rank, "world_size": 2, "backend": "gloo"}
        trace.save(path, header, run.events, run.footer())
    finally:
        assert run.close()
    return trace.load(path, background=True)


def bar(app: App) -> str:
    return text_of(app, "#rank-bar")


def test_two_ranks_side_by_side_each_keeps_its_position(tmp_path: Path) -> None:
    # rank 1's recording given first: the header's rank orders them
    one = record(tmp_path / "rank1.jsonl.gz", "reentrant", 1)
    zero = record(tmp_path / "rank0.jsonl.gz", "linear-relu", 0)
    n0, n1 = len(zero.events), len(one.events)
    assert n0 != n1
    app = App(recordings=[one, zero])

    async def script(pilot: Pilot[Any]) -> None:
        assert isinstance(app.debugger, RankScreen) and app.debugger.rank == 0
        assert "linear-relu" in str(app.debugger.sub_title)
        # rank 1 is not opened yet: it will open, as a replay does, at its newest event
        assert "▶ rank 0" in bar(app) and f"rank 1 · event {n1}/{n1}" in bar(app)
        await press(pilot, "home", "right", "right", "right")
        assert shown(app) == (3, n0)
        assert f"rank 0 · event 3/{n0}" in bar(app)
        await press(pilot, "greater_than_sign")  # > : rank 1, at its own start
        assert app.debugger.rank == 1 and "reentrant" in str(app.debugger.sub_title)
        await press(pilot, "home", "right")
        assert shown(app) == (1, n1)
        assert "▶ rank 1" in bar(app) and f"rank 0 · event 3/{n0}" in bar(app)
        assert f"rank 1 · event 1/{n1}" in bar(app)
        await press(pilot, "less_than_sign")  # < : rank 0, where it was left
        assert app.debugger.rank == 0 and shown(app) == (3, n0)
        assert f"rank 1 · event 1/{n1}" in bar(app)
        await press(pilot, "greater_than_sign", "greater_than_sign")  # round: 1, then 0
        assert app.debugger.rank == 0 and shown(app) == (3, n0)
        await pilot.press("q")

    run_app(app, script)
    assert all(s.session is None for s in app.ranks)  # every rank's session closed


def test_recordings_without_a_rank_take_their_order(tmp_path: Path) -> None:
    a = record(tmp_path / "a.jsonl.gz", "linear-relu", None)
    b = record(tmp_path / "b.jsonl.gz", "reentrant", None)
    app = App(recordings=[a, b])

    async def script(pilot: Pilot[Any]) -> None:
        assert [s.rank for s in app.ranks] == [0, 1]
        assert "linear-relu" in str(app.debugger.sub_title)
        await press(pilot, "less_than_sign")  # < from the first: the last
        assert app.debugger.rank == 1
        await pilot.press("q")

    run_app(app, script)


def test_replay_headless_prints_every_rank_of_a_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from autograd_tui.commands.parser import main

    record(tmp_path / "rank1.jsonl.gz", "reentrant", 1)
    record(tmp_path / "rank0.jsonl.gz", "linear-relu", 0)
    assert main(["replay", str(tmp_path), "--headless"]) == 0
    out = capsys.readouterr().out
    assert out.index("rank: 0 of 2") < out.index("rank: 1 of 2")
    assert "scenario: linear-relu" in out and "scenario: reentrant" in out
    assert main(["replay", str(tmp_path), "--reexecute"]) == 2
    assert "--reexecute takes one recording" in capsys.readouterr().err


def test_snapshot_rank_1_shown_rank_0_kept_at_event_3(snap_compare: Any,
                                                       tmp_path: Path) -> None:
    from pilot import SIZE, finish

    app = AutogradApp(recordings=[record(tmp_path / "rank0.jsonl.gz", "linear-relu", 0),
                                  record(tmp_path / "rank1.jsonl.gz", "reentrant", 1)])

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await press(pilot, "home", "right", "right", "right", "greater_than_sign")
        await finish(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_five_ranks_fit_the_bar_and_go_round(tmp_path: Path) -> None:
    recs = [record(tmp_path / f"rank{k}.jsonl.gz", "linear-relu", k) for k in (4, 2, 0, 3, 1)]
    n = len(recs[0].events)
    app = App(recordings=recs)

    async def script(pilot: Pilot[Any]) -> None:
        assert [s.rank for s in app.ranks] == [0, 1, 2, 3, 4]
        assert bar(app).count(f": {n}/{n}") == 5 and "▶ 0:" in bar(app)
        await press(pilot, "home")  # rank 0 at its start; the others where they open
        seen = []
        for _ in range(5):
            await press(pilot, "greater_than_sign")
            seen.append(app.debugger.rank)  # type: ignore[attr-defined]
        assert seen == [1, 2, 3, 4, 0] and shown(app) == (0, n)
        assert f"▶ 0: 0/{n}" in bar(app) and bar(app).count(f": {n}/{n}") == 4
        await pilot.press("q")

    run_app(app, script)
