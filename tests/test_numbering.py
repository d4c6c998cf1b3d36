"""One numbering: for the same k, the app, ``replay --headless``, ``export --at k`` and the
docs name the same event and show the same state (docs/architecture.md, Conventions)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograd_tui import export as gx
from autograd_tui import scenarios
from autograd_tui.app import AutogradApp
from autograd_tui.history import recordings as trace
from autograd_tui.session.run import Run
from autograd_tui.words import event_words, node_names

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("numbering") / "multi-device.jsonl"
    with Run(scenarios.get("multi-device")) as run:
        assert run.run().status == "finished"
        run.save(path)
    return path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autograd_tui", *args], capture_output=True,
                          text=True, timeout=100, cwd=ROOT)


def test_event_k_has_seq_k_and_threads_count_from_1(recording: Path) -> None:
    rec = trace.load(recording)
    assert [e.seq for e in rec.events] == list(range(1, len(rec.events) + 1))
    threads = {int(part.split(":")[0]) for part in rec.footer["schedule"].split(",")}
    assert min(threads) == 1 and threads == set(range(1, len(threads) + 1))


@pytest.mark.parametrize("k", [1, 17, 40])
def test_replay_export_and_app_agree_on_k(recording: Path, tmp_path: Path, k: int) -> None:
    rec = trace.load(recording)
    n = len(rec.events)
    event = rec.events[k - 1]
    words = event_words(event, node_names(rec.events))
    # replay --headless: the line that starts with k is event k
    out = _cli("replay", str(recording), "--headless").stdout
    line = next(x for x in out.splitlines() if x.split()[:1] == [str(k)])
    assert line.rstrip().endswith(words)
    # export --at k: the state at k (after events 1..k), titled with event k
    dot = tmp_path / "at.dot"
    p = _cli("export", str(recording), "--at", str(k), "-o", str(dot))
    assert p.returncode == 0, p.stderr
    state = rec.history.state_at(k)
    assert state.index == k and state.last_event == event
    assert dot.read_text() == gx.to_dot(state, title="multi-device")
    assert gx.event_text(state).startswith(f"event {k} · {event.thread}")
    # the app at k: title k/n, the log's row of event k selected, the same state
    app = AutogradApp(recording=rec)

    async def main() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.press("home", *["right"] * k)
            await pilot.pause()
            shown = app.debugger
            assert re.search(rf"\b{k}/{n}\b", str(shown.sub_title)), shown.sub_title
            assert shown.session is not None and shown.session.state_at(shown.cursor) == state
            log = app.debugger.query_one("#events")
            seq, _ = log.row(log.cursor_row)  # type: ignore[attr-defined]
            assert seq[0] == str(k)

    asyncio.run(main())


def test_the_docs_state_the_convention() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "**Event k** is the k-th event of a run, counted from 1" in text
    assert "**\"At k\"** is the state after events 1..k" in text
    assert "**\"At 0\"** is the state before any event" in text
    assert "`1:12,2:3,1:5`" in text
