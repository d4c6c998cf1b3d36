"""``module_tree``: a PyTorch graph's nodes by nn.Module, repeated blocks folded (no torch
needed: the states are made by hand)."""

from __future__ import annotations

from autograd_tui.engine.events import NodeInfo
from autograd_tui.history.module_tree import NO_MODULE, module_tree, summary
from autograd_tui.history.state import EngineState, NodeState


def state_of(nodes: list[tuple[str, str | None, str | None]]) -> EngineState:
    """Nodes ``(name, module path, module type)``, a chain from the first (the root)."""
    s = EngineState()
    k = len(nodes)
    for i, (name, path, typ) in enumerate(nodes, 1):
        nxt = ((i + 1, 0),) if i < k else ()
        s.nodes[i] = NodeInfo(i, name, "cpu", k - i, k - i, 1, nxt, False)
        s.node_meta[i] = {"module": path, "module_type": typ}
    return s


def block(i: int, extra: str = "") -> list[tuple[str, str | None, str | None]]:
    return [("AddBackward0", f"layers.{i}", "Block"),
            ("AddmmBackward0", f"layers.{i}.fc", "Linear"),
            ("GeluBackward0" + extra, f"layers.{i}.act", "GELU")]


def labels(groups: list) -> list[str]:
    return [g.label for g in groups]


def test_repeated_blocks_fold_into_one_group_that_holds_them() -> None:
    s = state_of([("MseLossBackward0", None, None), *[n for i in range(4) for n in block(i)]])
    tree = module_tree(s)
    assert labels(tree.groups) == ["layers.0..3 (Block) ×4", NO_MODULE]
    fold = tree.groups[0]
    assert fold.repeats == 4 and len(fold.nodes) == 12 and not fold.own
    assert labels(fold.children) == [f"layers.{i} (Block)" for i in range(4)]
    assert labels(fold.children[2].children) == ["layers.2.act (GELU)", "layers.2.fc (Linear)"]
    # ``layers`` (a ModuleList, never called) is no group: its blocks take its place
    assert "layers" not in tree.by_key
    # every node: the groups holding it, outermost first
    assert tree.where[9] == ("layers.0..3", "layers.2", "layers.2.fc")
    assert tree.where[1] == (NO_MODULE,)


def test_blocks_of_another_structure_or_type_break_the_run() -> None:
    nodes = [*block(0), *block(1), *block(2, extra="X"), *block(3), *block(4)]
    nodes[12:15] = [(name, path, "Other" if path == "layers.4" else typ)
                    for name, path, typ in nodes[12:15]]
    tree = module_tree(state_of(nodes))
    assert labels(tree.groups) == ["layers.0..1 (Block) ×2", "layers.2 (Block)",
                                   "layers.3 (Block)", "layers.4 (Other)"]


def test_summary_counts_the_states_of_a_groups_nodes() -> None:
    s = state_of(block(0))
    s.node_states[1] = NodeState("done")
    s.node_states[2] = NodeState("ready", "cpu")
    assert summary(s, module_tree(s).groups[0].nodes) == "3 nodes: 1 ready, 1 done, 1 not reached"
    assert summary(s, [3]) == "1 node: 1 not reached"


def test_a_graph_without_modules_is_one_group() -> None:
    s = state_of([("MulBackward0", None, None), ("AccumulateGrad", None, None)])
    s.node_meta[2] = {"module": 7}  # from a recording: not a path
    assert labels(module_tree(s).groups) == [NO_MODULE]
