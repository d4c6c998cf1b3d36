"""The app on programs a person brings (``autograd-tui torch my_script.py``): what a
pilot driver through every key (``/work/programs-scripts/r3app/drive.py``) found on real
programs, each as a small plain-torch program written here, driven through Textual's Pilot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pilot import press, run_app, shown
from test_app import App
from textual.pilot import Pilot
from textual.widgets import Input
from user_scripts import write_script

pytest.importorskip("torch", reason="the torch programs need PyTorch (pip install torch)")
pytestmark = pytest.mark.timeout(120)

LINEAR = """\
    import torch

    def main():
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh())
        return net(torch.randn(4, 3)).sum()
    """


def _open(tmp_path: Path, body: str) -> App:
    from autograd_tui.session.torch_script import script_scenario

    return App(script_scenario(str(write_script(tmp_path, body))))


def test_moves_past_the_last_node_and_before_the_first_say_so(tmp_path: Path) -> None:
    app = _open(tmp_path, LINEAR)

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "N", "U", "M")  # nothing before event 0: said in words
        assert app.said("no module here: the shown event's node has none"), app.notes
        assert app.said("no node starts before event 0"), app.notes
        assert app.said("no GraphTask is created before event 0"), app.notes
        await press(pilot, "full_stop", "u")  # to the completion: the program has still to return
        s = app.debugger.session
        assert s is not None and not s.finished
        app.notes.clear()
        await press(pilot, "n")  # no next node: the run ends, and the app says so
        assert s.finished and shown(app)[0] == s.count()
        assert app.said("the run ended before the end of the next node"), app.notes
        await press(pilot, "e")  # .json: the events up to the shown one, a Chrome trace
        out = tmp_path / "trace.json"
        app.screen.query_one("#export-path", Input).value = str(out)
        await press(pilot, "enter")
        assert app.said(f"(a Chrome trace of events 1..{s.count()}; open it in"), app.notes
        trace = json.loads(out.read_text())
        names = " ".join(str(e.get("name")) for e in trace["traceEvents"])
        assert "TanhBackward0#" in names and "AddmmBackward0#" in names, names

    run_app(app, script)


async def _breakpoint(pilot: Pilot[Any], text: str) -> None:
    """``b``, ``text`` in its node field, enter (adds it), escape (closes)."""
    await press(pilot, "b")
    pilot.app.screen.query_one("#bp-node", Input).value = text
    await press(pilot, "enter", "escape")


def test_a_breakpoint_on_sequentials_module_0_and_one_that_never_matches(
        tmp_path: Path) -> None:
    # nn.Sequential's children are modules 0, 1, ...: "0" is node #0, "module=0" the module
    app = _open(tmp_path, LINEAR)

    async def script(pilot: Pilot[Any]) -> None:
        await _breakpoint(pilot, "0")
        await press(pilot, "c")  # no node #0: the run ends, and the app says why
        s = app.debugger.session
        assert s is not None and s.finished
        assert app.said("the run ended: no event matched a breakpoint (node=0); 0 is node "
                        "#0: the module 0 is module=0"), app.notes
        await press(pilot, "r")
        s = app.debugger.session
        assert s is not None and not s.finished
        await _breakpoint(pilot, "module=0")
        assert [b.describe() for b in s.breakpoints] == ["module=0"]
        await press(pilot, "c")
        assert not s.finished and app.said("breakpoint: "), app.notes
        e = s.event(s.count() - 1)
        assert s.state_at(s.count()).node_meta[e.node]["module"] == "0"
        await press(pilot, "M")  # module 0's first node has not started: which module, said
        assert app.said(f"no node of 0 starts before event {s.count()} in this GraphTask")
        await press(pilot, "m")  # module 0's breakpoint stops the move at its next event
        assert app.said("breakpoint (module=0) at "), app.notes
        assert app.said(", before the end of 0; b clears it"), app.notes
        await press(pilot, "c", "home", "slash")  # to the end; / 0 finds the module too
        app.screen.query_one("#jump", Input).value = "0"
        await press(pilot, "enter")
        meta = s.state_at(s.count()).node_meta
        assert meta[s.event(shown(app)[0] - 1).node]["module"] == "0"
        await press(pilot, "slash")
        app.screen.query_one("#jump", Input).value = "99"  # no such node: said, not sought
        await press(pilot, "enter")
        assert app.said("no node #99 in this graph yet (#1 to #"), app.notes
        await press(pilot, "escape", "end", "right_square_bracket")  # none after: says where
        assert app.said(f"no module=0 event after event {s.count()} (one before it: event "), \
            app.notes

    run_app(app, script)


def test_cross_entropys_ignore_index_shows_as_minus_100(tmp_path: Path) -> None:
    from autograd_tui.session import Breakpoint

    app = _open(tmp_path, """\
        import torch

        def main():
            torch.manual_seed(0)
            x = torch.randn(3, 4, requires_grad=True)
            return torch.nn.functional.cross_entropy(x, torch.tensor([0, 1, 2]))
        """)

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        s.breakpoints = [Breakpoint(kind="node_start", node="NllLossBackward0")]
        await press(pilot, "c", "d")
        details = str(app.debugger.query_one("#details").content)
        # PyTorch's getter says 18446744073709551516: the int64 -100 read as unsigned
        assert "ignore_index: -100 (PyTorch's _saved_ignore_index reads " \
               "18446744073709551516" in details, details

    run_app(app, script)


def test_u_inside_a_reentrant_checkpoints_graphtask_leaves_that_one(tmp_path: Path) -> None:
    from autograd_tui.session import Breakpoint

    app = _open(tmp_path, """\
        import torch
        from torch.utils.checkpoint import checkpoint

        def main():
            torch.manual_seed(0)
            lin = torch.nn.Linear(3, 3)
            x = torch.randn(2, 3, requires_grad=True)
            return checkpoint(lambda t: lin(t).tanh(), x, use_reentrant=True).sum()
        """)

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        s.breakpoints = [Breakpoint(kind="graph_task_created")]
        await press(pilot, "c", "c")  # GraphTask 2: the checkpoint's backward, inside GT1's
        made = shown(app)[0]
        assert s.event(made - 1).graph_task == 2
        s.breakpoints = []
        await press(pilot, "u")  # out of GraphTask 2, not of the outer one
        done = s.event(shown(app)[0] - 1)
        assert (done.kind, done.graph_task) == ("completion", 2), done
        assert app.said("at the completion of GraphTask 2"), app.notes
        await press(pilot, "U")  # from its completion: back to its creation
        assert shown(app)[0] == made
        await press(pilot, "U")  # again: the outer one's
        assert s.event(shown(app)[0] - 1).graph_task == 1

    run_app(app, script)
