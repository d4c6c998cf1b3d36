"""Graphviz export of a PyTorch graph's modules: clusters nested by module path, repeated
blocks folded (``export/modules.py``).  Most states are made by hand (no torch); the CLI
test runs torch-attention and skips without torch."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from autograd_tui import export as gx
from autograd_tui import scenarios
from autograd_tui.engine.events import NodeInfo, make_event
from autograd_tui.history.state import EngineState
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(300)
_NODE = re.compile(r"^\s*(n\d+|fold_\w+) \[", re.M)


def blocks_state(k: int, shown: int | None = None) -> EngineState:
    """A loss (no module) then ``k`` blocks ``layers.i`` (Block) each with ``fc`` (Linear)
    and ``act`` (GELU), one chain; ``shown``: the node the last event is about."""
    rows: list[tuple[str, str | None, str | None]] = [("MseLossBackward0", None, None)]
    for i in range(k):
        rows += [("AddBackward0", f"layers.{i}", "Block"),
                 ("AddmmBackward0", f"layers.{i}.fc", "Linear"),
                 ("GeluBackward0", f"layers.{i}.act", "GELU")]
    s = EngineState()
    for i, (name, path, typ) in enumerate(rows, 1):
        nxt = ((i + 1, 0),) if i < len(rows) else ()
        s.nodes[i] = NodeInfo(i, name, "cpu", len(rows) - i, len(rows) - i, 1, nxt, False)
        if path is not None:
            s.node_meta[i] = {"module": path, "module_type": typ}
    if shown is not None:
        s.last_event = make_event(1, "node_start", "cpu (owner)", 1, shown, None,
                                  {"name": "AddmmBackward0", "depth": 0, "inputs": []})
    return s


def nodes_in(dot: str) -> list[str]:
    return _NODE.findall(dot)


def cluster_body(dot: str, cid: str) -> str:
    """The text of ``subgraph cid { ... }`` (balanced braces)."""
    start = dot.index(f"subgraph {cid} {{")
    depth, i = 0, dot.index("{", start)
    while True:
        depth += {"{": 1, "}": -1}.get(dot[i], 0)
        if depth == 0:
            return dot[start:i + 1]
        i += 1


def test_clusters_nest_by_module_path_with_path_and_type() -> None:
    dot = gx.to_dot(blocks_state(1))  # one block: nothing to fold
    outer = cluster_body(dot, "cluster_m_cpu_layers_0")
    assert "layers.0 <I>Block</I>" in outer
    for inner in ("cluster_m_cpu_layers_0_fc", "cluster_m_cpu_layers_0_act"):
        assert f"subgraph {inner} {{" in outer
    assert "layers.0.fc <I>Linear</I>" in cluster_body(dot, "cluster_m_cpu_layers_0_fc")
    assert "n1 [" not in outer  # the loss is outside every module
    assert "fold_" not in dot


def test_repeated_blocks_fold_keeping_the_block_of_the_shown_node() -> None:
    s = blocks_state(6, shown=3 * 4 + 2)  # node 14: layers.4.fc
    folded, full = gx.to_dot(s), gx.to_dot(s, unfold=True)
    assert len(nodes_in(full)) == 19 and "fold_" not in full
    assert len(nodes_in(folded)) == 1 + 3 + 5  # the loss, layers.4 in full, 5 summaries
    fold = cluster_body(folded, "cluster_f_cpu_layers_0__5")
    assert "layers.0..5 (Block) ×6 — showing layers.4" in fold
    assert "subgraph cluster_m_cpu_layers_4 {" in fold and "n14 [" in fold
    assert "cluster_m_cpu_layers_3" not in folded
    assert 'fold_cpu_layers_3 [id="fold_cpu_layers_3"' in fold
    assert "3 nodes folded: 3 not reached" in fold
    # edges go to the summaries, one per pair of ends, none inside a folded block
    assert "fold_cpu_layers_2 -> fold_cpu_layers_3 " in folded
    assert "fold_cpu_layers_3 -> n14 " in folded and "n12 " not in folded
    assert "fold_cpu_layers_3 -> fold_cpu_layers_3" not in folded
    assert "n16 -> fold_cpu_layers_5 " in folded  # layers.4's last node into layers.5


def test_without_a_shown_node_the_first_block_is_drawn() -> None:
    dot = gx.to_dot(blocks_state(4))
    assert "— showing layers.0" in dot and "subgraph cluster_m_cpu_layers_0 {" in dot
    assert [f"fold_cpu_layers_{i}" for i in (1, 2, 3)] == \
        [n for n in nodes_in(dot) if n.startswith("fold_")]


def test_folded_picture_renders() -> None:
    if shutil.which("dot") is None:
        pytest.skip("Graphviz dot is not installed")
    svg = gx.render(gx.to_dot(blocks_state(5, shown=8)), "svg").decode()
    assert 'id="fold_cpu_layers_0"' in svg and 'id="cluster_f_cpu_layers_0__4"' in svg


@pytest.mark.parametrize("name", ["linear-relu", "diamond"])
def test_graphs_without_node_meta_draw_no_module_clusters(name: str) -> None:
    with Run(scenarios.get(name)) as run:
        run.run()
        state = run.history.head
    assert not state.node_meta
    dot = gx.to_dot(state)
    assert "cluster_m_" not in dot and "cluster_f_" not in dot and "fold_" not in dot
    assert gx.to_dot(state, unfold=True) == dot


def test_cli_folds_torch_attention_and_unfold_keeps_every_block(tmp_path: Path,
                                                                  capsys) -> None:
    pytest.importorskip("torch", reason="torch-attention needs PyTorch (pip install torch)")
    from autograd_tui.commands import main

    def export(*extra: str) -> str:
        """The command through ``main`` in this process (``export`` as a real process:
        test_numbering, test_budget, test_wheel)."""
        out = tmp_path / f"a{len(extra)}.dot"
        code = main(["export", "torch-attention", "--param", "layers=4", "--at", "end",
                     "-o", str(out), *extra])
        assert code == 0, capsys.readouterr().err
        return out.read_text()

    folded, full = export(), export("--unfold")
    assert len(nodes_in(folded)) < len(nodes_in(full)) / 2
    assert "blocks.0..3 (Block) ×4 — showing blocks." in folded
    assert "subgraph cluster_m_cpu_blocks_0_attn {" in cluster_body(full,
                                                                     "cluster_m_cpu_blocks_0")
    assert "cluster_f_" not in full and "fold_" not in full
    assert all(f"subgraph cluster_m_cpu_blocks_{i} {{" in full for i in range(4))
