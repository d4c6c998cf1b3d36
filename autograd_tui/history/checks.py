"""The fold's checks: what makes an event contradict the state, and its message.

Not in PyTorch.  A recording is untrusted data (docs/security.md): before the fold
applies an event it checks that the event could have come from the engine here.
Kept apart from ``fold.py`` so that the fold reads as what each event does.
"""

from __future__ import annotations

from typing import Any

from autograd_tui.engine.events import Event
from autograd_tui.history.state import EngineState, NodeInfo, StateError


def _no_node(s: EngineState, e: Event) -> StateError:
    if e.node is None:
        return StateError(f"event {e.seq} ({e.kind}) names no node")
    return StateError(f"event {e.seq} ({e.kind}) names node {e.node}, which no "
                      "dependencies_computed event introduced")


def _no_gt(e: Event, gid: int | None) -> StateError:
    return StateError(f"event {e.seq} ({e.kind}) names GraphTask {gid}, which was never created")


#: the most inputs a node may state: its InputBuffer is made that long (PyTorch's
#: ``num_inputs`` is a uint32; no graph of ours comes near this)
MAX_NODE_INPUTS = 65_536


def _check_nodes(s: EngineState, e: Any, ids: list[int], fresh: dict[int, NodeInfo]) -> None:
    """The graph a GraphTask states: each node once, sizes in range, edges that go down
    in topological_nr (so no cycle), dependency counts of nodes that exist.  (An edge
    may lead out of the listed nodes: ``grad()`` and ``min_topo_nr`` prune what
    compute_dependencies visits.)"""
    if len(fresh) != len(ids):
        seen: set[int] = set()  # a set: ids.count per id is quadratic in a long list
        dup = next(i for i in ids if i in seen or seen.add(i))  # type: ignore[func-returns-value]
        raise StateError(f"event {e.seq}: node {dup} is listed twice")
    for info in fresh.values():
        if not 0 <= info.num_inputs <= MAX_NODE_INPUTS:
            raise StateError(f"event {e.seq}: node {info.id} states {info.num_inputs} "
                             f"inputs (0..{MAX_NODE_INPUTS})")
        for target, _ in info.next:  # topological_nr falls along every edge: no cycle
            t = fresh.get(target) or s.nodes.get(target)  # type: ignore[arg-type]
            if t is not None and not t.topo < info.topo:
                raise StateError(f"event {e.seq}: the edge from node {info.id} to node "
                                 f"{target} does not go down in topological_nr "
                                 f"({info.topo} -> {t.topo}): a backward graph has no "
                                 "cycle")
    for node, count in e.dependencies:
        if node not in fresh and node not in s.nodes:
            raise StateError(f"event {e.seq}: dependencies name node {node}, which does "
                             "not exist")
        if count < 0:
            raise StateError(f"event {e.seq}: node {node} has {count} dependencies")


def _bad_decrement(s: EngineState, e: Any, old: int | None) -> StateError:
    name = s.node_name(e.node)
    if old is None or old < 1:
        return StateError(f"event {e.seq}: dependencies of {name} would go below zero")
    return StateError(f"event {e.seq}: dependencies of {name} go from {old} to "
                      f"{e.remaining}, not {old - 1}")


def _bad_push(e: Any, heap: list[Any]) -> StateError:
    if e.queue is None:
        return StateError(f"event {e.seq} (push) names no queue")
    return StateError(f"event {e.seq}: queue {e.queue} holds {len(heap)} task(s), so a push "
                      f"makes {len(heap) + 1}, not {e.size}")
