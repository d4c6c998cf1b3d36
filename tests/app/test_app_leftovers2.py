"""Leftovers of the app on programs a person brings, round 2 (a small plain-torch program
each, driven through Textual's Pilot):

3. ``M`` (back to the start of this module) on a node whose module had not started yet
   went to the start of the module holding it, saying nothing: it looked like this
   module's start.  Now it says that none of this module's nodes has started.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pilot import press, run_app, shown
from test_app import App, run_to_end
from textual.pilot import Pilot
from user_scripts import write_script

pytest.importorskip("torch", reason="the torch programs need PyTorch (pip install torch)")
pytestmark = pytest.mark.timeout(120)

NESTED_SEQUENTIAL = """\
    import torch

    def main():
        torch.manual_seed(0)
        net = torch.nn.Sequential(
            torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh()), torch.nn.Linear(3, 2))
        return net(torch.randn(4, 3)).sum()
    """


def _open(tmp_path: Path, body: str) -> App:
    from autograd_tui.session.torch_script import script_scenario

    return App(script_scenario(str(write_script(tmp_path, body))))


def test_back_module_on_a_module_not_started_says_so(tmp_path: Path) -> None:
    app = _open(tmp_path, NESTED_SEQUENTIAL)

    async def script(pilot: Pilot[Any]) -> None:
        s, n = await run_to_end(app, pilot)
        meta = s.state_at(n).node_meta
        events = s.events(0, n)
        # the pop of module 0.0's first node: 0.1 (Tanh), in module 0 too, has run before it
        k = next(i for i, e in enumerate(events, 1)
                 if e.kind == "pop" and meta.get(e.node, {}).get("module") == "0.0")
        assert any(e.kind == "node_start" and meta.get(e.node, {}).get("module") == "0.1"
                   for e in events[:k])
        await press(pilot, "g")
        await pilot.press(*str(k), "enter")
        await press(pilot, "M")
        assert shown(app)[0] == k  # not to module 0's start
        assert app.said(f"no node of 0.0 starts before event {k} in this GraphTask"), app.notes
        # from 0.0's first node_start, M goes on to the start of module 0 (help: "again")
        start = next(i for i, e in enumerate(events, 1) if i > k and e.kind == "node_start")
        await press(pilot, "g")
        await pilot.press(*str(start), "enter")
        await press(pilot, "M")
        first0 = next(i for i, e in enumerate(events, 1) if e.kind == "node_start"
                      and (meta.get(e.node, {}).get("module") or "").startswith("0."))
        assert shown(app)[0] == first0 < k

    run_app(app, script)
