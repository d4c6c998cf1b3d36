"""The app on a PyTorch model (``autograd-tui torch``, ``run torch-*``): the grouped view
of the graph pane (nodes by nn.Module, repeated blocks folded) and a node's PyTorch
details.  Driven through Textual's Pilot, as in ``test_app.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pilot import press, run_app, settle, shown
from test_app import App
from textual.pilot import Pilot

from autograd_tui.app.widgets.graph_pane import GraphPane
from autograd_tui.app.widgets.group_table import GROUP_KEY, GroupTable
from autograd_tui.session import Breakpoint

pytest.importorskip("torch", reason="the torch examples need PyTorch (pip install torch)")
pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]


def rows(app: App) -> list[tuple[str, str]]:
    """The grouped view's rows: (key, first cell's text)."""
    table = app.debugger.query_one(GroupTable)
    return [(table.key(i), table.row(i)[0][0].strip()) for i in range(table.row_count)]


def row_of(app: App, key: str) -> int:
    return [k for k, _ in rows(app)].index(key)


async def to_breakpoint(pilot: Pilot[Any], bp: Breakpoint) -> None:
    app = pilot.app
    assert isinstance(app, App) and app.debugger.session is not None
    app.debugger.session.breakpoints = [bp]
    await press(pilot, "c")


def test_repeated_blocks_fold_and_open_by_key_and_by_click() -> None:
    app = App("torch-attention", params={"layers": 3})

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "space")
        pane = app.debugger.query_one("#graph-pane")
        assert pane.has_class("groups") and "by module" in str(pane.border_title)
        assert [r for _, r in rows(app)] == ["▸ blocks.0..2 (Block) ×3", "▸ (no module)"]
        table = app.debugger.query_one(GroupTable)
        done = app.debugger.query_one(GraphPane).palette.style("done")  # the theme's graph-done
        assert table.row(0)[1] == ("186 nodes: ✓186", done)  # badges: every node done
        table.focus()
        await press(pilot, "enter")  # the cursor is on the fold: it opens into the blocks
        assert [r for _, r in rows(app)][:4] == [
            "▾ blocks.0..2 (Block) ×3", "▸ blocks.0 (Block)", "▸ blocks.1 (Block)",
            "▸ blocks.2 (Block)"]
        await press(pilot, "down", "enter")  # blocks.0 opens: its own nodes, its modules
        keys = [k for k, _ in rows(app)]
        assert GROUP_KEY + "blocks.0.attn" in keys and keys[2].isdigit()
        y = row_of(app, GROUP_KEY + "blocks.0") + 1  # the header is line 0
        await pilot.click("#group-list", offset=(4, y))  # a click closes it again
        await settle(pilot)
        assert GROUP_KEY + "blocks.0.attn" not in [k for k, _ in rows(app)]
        await press(pilot, "v")  # the flat list, then the groups again
        assert pane.has_class("list") and not pane.has_class("groups")
        await press(pilot, "v")
        assert pane.has_class("groups")

    run_app(app, script)


def test_stepping_marks_the_group_and_f_finds_the_node_with_its_details() -> None:
    app = App("torch-attention", params={"layers": 2})

    async def script(pilot: Pilot[Any]) -> None:
        await to_breakpoint(pilot, Breakpoint(kind="node_start", node="SplitBackward0"))
        s = app.debugger.session
        assert s is not None
        node = s.event(s.count() - 1).node
        marked = [k for k, r in rows(app)
                  if "reverse" in app.debugger.query_one(GroupTable).row(row_of(app, k))[0][1]]
        assert marked == [GROUP_KEY + "blocks.0..1"]  # closed: the fold is marked
        await press(pilot, "f")  # open the groups holding the running node, select it
        table = app.debugger.query_one(GroupTable)
        assert table.has_focus and table.key(table.cursor_row) == str(node)
        assert GROUP_KEY + "blocks.1.attn" in [k for k, _ in rows(app)]
        assert "reverse" in table.row(table.cursor_row)[0][1]
        await press(pilot, "d")
        details = str(app.debugger.query_one("#details").content)
        assert "SplitBackward0" in details and "module: blocks.1.attn (Attention)" in details
        assert "created at" in details and "torch_attention.py" in details
        await press(pilot, "full_stop")  # the next event: the node stays marked
        assert shown(app)[0] == s.count()

    run_app(app, script)


def test_the_torch_command_opens_a_script_small_graph_boxes_then_groups() -> None:
    from autograd_tui.session.torch_script import script_scenario

    # what ``autograd-tui torch scenarios/torch_cnn.py`` opens
    app = App(script_scenario(str(ROOT / "scenarios" / "torch_cnn.py"), "main"))

    async def script(pilot: Pilot[Any]) -> None:
        await to_breakpoint(pilot, Breakpoint(kind="node_end", node="ConvolutionBackward0"))
        pane = app.debugger.query_one("#graph-pane")
        assert not pane.has_class("groups") and not pane.has_class("list")  # 15 boxes
        await press(pilot, "v")  # a PyTorch graph: boxes, groups, list
        assert pane.has_class("groups")
        assert [r for _, r in rows(app)] == [
            "▸ Net (Net)", "▸ conv (Conv2d)", "▸ fc (Linear)", "▸ pool (MaxPool2d)",
            "▸ (no module)"]
        table = app.debugger.query_one(GroupTable)
        table.focus()
        table.move_cursor(row_of(app, GROUP_KEY + "conv"))
        await press(pilot, "enter")
        conv = [k for k, r in rows(app) if "ConvolutionBackward0" in r]
        assert len(conv) == 2  # the shared conv ran twice
        table.move_cursor(row_of(app, conv[0]))
        await press(pilot, "enter", "d")  # a node's row: its details
        details = str(app.debugger.query_one("#details").content)
        assert "module: conv (Conv2d)" in details and "created at" in details
        assert "saved tensors (" in details  # each with its size: 81 float64s
        assert "weight: Tensor[3, 3, 3, 3] float64, version 1, 648 B, |x|=1.01" in details
        await press(pilot, "v")
        assert pane.has_class("list")
        await press(pilot, "v")
        assert not pane.has_class("list") and not pane.has_class("groups")

    run_app(app, script)


def test_a_non_reentrant_checkpoint_recompute_is_in_the_log() -> None:
    from autograd_tui.app.widgets.line_table import LineTable

    app = App("torch-checkpoint-nonreentrant")

    async def script(pilot: Pilot[Any]) -> None:
        await to_breakpoint(pilot, Breakpoint(kind="node_start", node="TanhBackward0"))
        await press(pilot, "full_stop")  # its first read of a saved tensor re-runs block2's forward
        log = app.debugger.query_one("#events", LineTable)
        last = " ".join(str(c[0]) for c in log.row(log.row_count - 1))
        assert "recompute in TanhBackward0" in last, last

    run_app(app, script)


def test_the_header_says_a_compiled_model_steps_its_eager_graph(tmp_path: Path) -> None:
    from autograd_tui.session.torch_script import script_scenario

    script = tmp_path / "compiled.py"
    script.write_text("import torch\n\ndef main():\n    torch.manual_seed(0)\n"
                      "    net = torch.compile(torch.nn.Linear(3, 2), backend='aot_eager')\n"
                      "    return net(torch.randn(4, 3)).sum()\n")
    app = App(script_scenario(str(script)))

    async def script_(pilot: Pilot[Any]) -> None:
        await press(pilot, "full_stop")
        assert "stepped the eager graph of a torch.compile'd model" in app.debugger.sub_title

    run_app(app, script_)
