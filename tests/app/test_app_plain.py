"""The app on a plain training script (``autograd-tui torch train.py --backward 2``): a
top-level loop with no ``main()``, driven key by key as a user would at 80x24."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pilot import press, run_app, shown
from test_app import App
from textual.pilot import Pilot
from textual.widgets import Input
from user_scripts import run_cli, write_script

from autograd_tui.app.screens.text import TextScreen

pytest.importorskip("torch", reason="the torch programs need PyTorch (pip install torch)")
pytestmark = pytest.mark.timeout(120)

TRAIN = """\
    import torch
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for step in range(5):
        loss = net(torch.randn(16, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    """


def test_a_training_loops_2nd_backward_notes_nodes_modules_and_c_from_the_history(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from autograd_tui.session.torch_script import script_scenario

    path = str(write_script(tmp_path, TRAIN, "train.py"))
    code, out = run_cli(["torch", path, "--backward", "2", "--headless"], capsys)
    found = re.search(r"events: (\d+)", out)
    assert code == 0 and found, out
    app = App(script_scenario(path, backward=2))

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "full_stop", "t")  # the script has run: the notes say how far
        assert isinstance(app.screen, TextScreen)
        notes = " ".join(app.screen._markdown.split())
        assert f"stepped the script's 2nd backward call ({path}:8)" in notes, notes
        assert "the one before it ran on PyTorch's engine" in notes, notes
        assert "the script was stopped there, the rest of it did not run" in notes, notes
        await press(pilot, "escape", "n")  # over the loss's first node: to its end
        s = app.debugger.session
        assert s is not None
        e = s.event(shown(app)[0] - 1)
        assert e.kind == "node_end" and s.state_at(s.count()).nodes[e.node].name == \
            "MeanBackward0"
        await press(pilot, "n", "m", "M")  # PowBackward0: the loss's op, in no module
        assert app.said("nothing to step to: a module: this node has none (it ran outside "
                        "every nn.Module, as a loss's ops do"), app.notes
        assert app.said("no module here: the shown event's node has none (it ran outside "
                        "every nn.Module"), app.notes
        await press(pilot, "n")  # the Linear's AddmmBackward0: module 2, whose end m finds
        await press(pilot, "m")
        assert app.said("at the end of 2"), app.notes
        await press(pilot, "u", "home", "b")  # c from the history: the engine goes on from
        app.screen.query_one("#bp-node", Input).value = "module=0"  # where it is, and the
        await press(pilot, "enter", "escape", "c")  # view jumps back to the newest event
        assert app.said("the run ended: no event matched a breakpoint (module=0)"), app.notes
        assert shown(app) == (s.count(), s.count()) == (int(found.group(1)),) * 2
        await press(pilot, "r", "b")  # the same breakpoint, in a fresh run: it says which
        app.screen.query_one("#bp-node", Input).value = "module=0"
        await press(pilot, "enter", "escape", "c")
        s = app.debugger.session
        assert s is not None and not s.finished, app.notes
        e = s.event(s.count() - 1)
        assert s.state_at(s.count()).node_meta[e.node]["module"] == "0"
        assert app.said(f"breakpoint: {e.kind} (module=0)"), app.notes[-3:]

    run_app(app, script, size=(80, 24))
