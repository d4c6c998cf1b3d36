"""The DDP pane (``D``, app/widgets/ddp_pane.py) on a real two-rank recording: rank 0's
file from ``autograd-tui torch --record`` of tests/engine/ddp_program.py (gloo on
127.0.0.1; conftest.py's ``ddp_recorded``, the run test_torch_ddp reads too), opened in the
app; the pane shows bucket 0 pending, then ready, then reduced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pilot import press, run_app, until
from test_app import App
from textual.pilot import Pilot

torch = pytest.importorskip("torch", reason="a DDP run needs PyTorch (pip install torch)")
if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

from autograd_tui.app.widgets.ddp_pane import NONE, DdpScreen  # noqa: E402
from autograd_tui.history import recordings  # noqa: E402

pytestmark = [pytest.mark.timeout(240), pytest.mark.usefixtures("no_thread_left")]


def pane_text(app: Any) -> str:
    assert isinstance(app.screen, DdpScreen)
    return str(app.screen.query_one("#ddp-text").render())


def test_the_ddp_pane_shows_a_bucket_going_ready(ddp_recorded: Path) -> None:
    rec = recordings.load(ddp_recorded / "rank0.jsonl")  # the run conftest.py records
    events = rec.events
    k_assigned = next(e.seq for e in events if e.kind == "ddp_bucket_assigned")
    k_ready = next(e.seq for e in events if e.kind == "ddp_bucket_ready" and e.bucket == 0)
    k_final = next(e.seq for e in events if e.kind == "ddp_finalize")
    assert k_assigned < k_ready < k_final
    app = App(recording=rec)
    seen: dict[str, str] = {}

    async def look(pilot: Pilot[Any], k: int, name: str) -> None:
        app.debugger.show_event(k)
        await until(pilot, lambda: f"at event {k}" in str(
            app.screen.query_one("#ddp-title").render()))
        seen[name] = pane_text(app)

    async def script(pilot: Pilot[Any]) -> None:
        app.debugger.show_event(k_assigned - 1)
        await press(pilot, "D")  # the pane stays open and follows the shown event
        await look(pilot, k_assigned - 1, "before")
        await look(pilot, k_assigned, "assigned")
        await look(pilot, k_ready - 1, "just before")
        await press(pilot, "right")  # its key walks the history: bucket 0 goes ready
        await look(pilot, k_ready, "ready")
        await look(pilot, k_final, "final")
        await press(pilot, "escape")
        assert not isinstance(app.screen, DdpScreen)

    run_app(app, script)
    assert seen["before"] == NONE
    bucket0 = [ln for ln in seen["assigned"].splitlines() if "bucket 0" in ln]
    assert bucket0 and "pending" in bucket0[0]
    assert "pending" in [ln for ln in seen["just before"].splitlines() if "bucket 0" in ln][0]
    ready0 = [ln for ln in seen["ready"].splitlines() if "bucket 0" in ln][0]
    assert "ready" in ready0 and "pending" not in ready0
    assert "4.weight" in ready0  # its parameters, as DDP bucketed them
    assert "rank 0" in seen["final"] and "finalized" in seen["final"]
    assert all("reduced" in ln for ln in seen["final"].splitlines() if "bucket" in ln)
