"""A PyTorch graph's nodes grouped by the nn.Module that made them (``node_meta``): a tree
of groups, in which repeated sibling blocks fold into one.

Module paths nest by their dots (``blocks.0.attn`` is inside ``blocks.0``).  A path that
made no node itself and has no type (``blocks``, a ModuleList that is never called) is
left out: its children take its place.  Siblings named ``prefix.K`` with consecutive
indices, the same module type and the same structure (the same children, recursively,
and the same node names) fold into one group, ``blocks.0..47 (Block) ×48``, whose
children are the blocks.  Pure: an ``EngineState`` in, groups out (the app's grouped
view and the Graphviz export draw them).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from autograd_tui.history.state import EngineState

NO_MODULE = "(no module)"  # the group of nodes made outside any module (the loss)
_INDEX = re.compile(r"^(.*)\.(\d+)$")
#: the order a group's summary lists states in: the moving ones first
STATE_ORDER = ("running", "ready", "not_ready", "errored", "done", "skipped", "not_reached")


@dataclass(eq=False)
class Group:
    """One module (or a fold of repeated ones) and the nodes inside it."""

    key: str  # unique in the tree: the module path, a fold's ``prefix.a..b``, NO_MODULE
    label: str  # ``blocks.0.attn (Attention)``, ``blocks.0..47 (Block) ×48``
    type: str | None
    own: list[int]  # nodes this module made itself, in topological order
    children: list[Group] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)  # own and every child's
    repeats: int = 1  # a fold: how many blocks
    sig: Any = None  # the structure that repeated blocks share


@dataclass
class ModuleTree:
    groups: list[Group]  # the top level
    by_key: dict[str, Group]
    where: dict[int, tuple[str, ...]]  # node -> keys of the groups holding it, outermost first

    def walk(self) -> Iterator[Group]:
        todo = list(reversed(self.groups))
        while todo:
            g = todo.pop()
            yield g
            todo.extend(reversed(g.children))


def _module_of(meta: Any) -> tuple[str | None, str | None]:
    """(path, type) of a ``node_meta`` (from a recording: checked for its types)."""
    if not isinstance(meta, dict):
        return None, None
    path, typ = meta.get("module"), meta.get("module_type")
    if not isinstance(path, str) or not path:
        return None, None
    return path, typ if isinstance(typ, str) else None


def _natural(path: str) -> tuple[Any, ...]:
    """``blocks.10`` after ``blocks.9``."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in path.split("."))


def module_tree(state: EngineState) -> ModuleTree:
    """The groups of ``state``'s nodes (every node is in exactly one innermost group)."""
    own: dict[str | None, list[int]] = {}
    types: dict[str, str | None] = {}
    for n in state.topological_order():
        path, typ = _module_of(state.node_meta.get(n))
        own.setdefault(path, []).append(n)
        if path is not None and types.get(path) is None:
            types[path] = typ
    kids: dict[str, set[str]] = {}
    for path in types:
        parts = path.split(".")
        for i in range(1, len(parts) + 1):
            kids.setdefault(".".join(parts[:i - 1]), set()).add(".".join(parts[:i]))

    def make(path: str) -> list[Group]:
        children = [g for c in sorted(kids.get(path, ()), key=_natural) for g in make(c)]
        mine = own.get(path, [])
        if not mine and types.get(path) is None:
            return children  # a container that made nothing: its children stand for it
        typ = types.get(path)
        g = Group(path, f"{path} ({typ or '?'})", typ, mine, _fold(children))
        g.nodes = mine + [n for c in g.children for n in c.nodes]
        names = tuple(sorted(state.nodes[n].name for n in mine))
        g.sig = (typ, names, tuple((_relative(c.key, path), c.repeats, c.sig)
                                   for c in g.children))
        return [g]

    top = _fold([g for c in sorted(kids.get("", ()), key=_natural) for g in make(c)])
    if own.get(None):
        nodes = own[None]
        top.append(Group(NO_MODULE, NO_MODULE, None, nodes, nodes=list(nodes)))
    tree = ModuleTree(top, {}, {})
    _index(tree, top, ())
    return tree


def _relative(key: str, parent: str) -> str:
    return key[len(parent) + 1:] if key.startswith(parent + ".") else key


def _fold(groups: list[Group]) -> list[Group]:
    """Runs of repeated sibling blocks (``prefix.K``, K consecutive, the same structure)
    made one group each."""
    out: list[Group] = []
    i = 0
    while i < len(groups):
        m = _INDEX.match(groups[i].key)
        j = i + 1
        if m and groups[i].repeats == 1:
            prefix, k = m.group(1), int(m.group(2))
            while j < len(groups) and groups[j].repeats == 1 \
                    and groups[j].key == f"{prefix}.{k + j - i}" and groups[j].sig == groups[i].sig:
                j += 1
        if j - i < 2:
            out.append(groups[i])
            i += 1
            continue
        run = groups[i:j]
        first = groups[i]
        key = f"{first.key}..{k + j - i - 1}"
        out.append(Group(key, f"{key} ({first.type or '?'}) ×{len(run)}", first.type, [],
                         run, [n for g in run for n in g.nodes], len(run), first.sig))
        i = j
    return out


def _index(tree: ModuleTree, groups: list[Group], outer: tuple[str, ...]) -> None:
    for g in groups:
        if g.key in tree.by_key:  # a module path that looks like a fold's: keep the first
            continue
        tree.by_key[g.key] = g
        keys = (*outer, g.key)
        for n in g.own:
            tree.where[n] = keys
        _index(tree, g.children, keys)


def state_counts(state: EngineState, nodes: list[int]) -> dict[str, int]:
    """How many of ``nodes`` are in each state (``STATE_ORDER``; the ones not reached
    have no ``node_states`` entry)."""
    counts: dict[str, int] = {}
    states = state.node_states
    reached = 0
    for n in nodes:
        ns = states.get(n)
        if ns is not None:
            counts[ns.state] = counts.get(ns.state, 0) + 1
            reached += 1
    if len(nodes) > reached:
        counts["not_reached"] = counts.get("not_reached", 0) + len(nodes) - reached
    return counts


def summary(state: EngineState, nodes: list[int]) -> str:
    """``12 nodes: 3 done, 1 ready, 8 not reached``."""
    counts = state_counts(state, nodes)
    rank = {s: i for i, s in enumerate(STATE_ORDER)}
    parts = [f"{c} {s.replace('_', ' ')}" for s, c in
             sorted(counts.items(), key=lambda kv: rank.get(kv[0], len(rank)))]
    return f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}: " + ", ".join(parts)
