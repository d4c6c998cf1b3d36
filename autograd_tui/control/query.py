"""The one event query: which events a breakpoint stops at, a jump shows, ``--stop-at`` stops at.

Not in PyTorch.  One text, one parser, one matching rule, for every place that picks
events: the controller's ``run_until`` (``breakpoint_on``), the session's breakpoints
(the app's ``b`` and ``c``), the app's jumps (``/``, ``]``, ``[``) and the CLI's
``--stop-at``.  A query is words separated by spaces, every one of which must match
(docs/controller.md, "Event queries"):

- an event kind, in any case: ``push``, ``node_start`` (or ``kind=push``);
- a node: ``#5``, ``5``, ``MulBackward0#5`` (by id) or a name, or ``node=NAME|ID`` (a
  node whose name is also a kind or a field word).  A name is the node's (its op:
  ``MulBackward0``), or, in a PyTorch graph (``node_meta``), an nn.Module path
  (``transformer.h.0.attn``: that module and every module inside it) or a parameter's
  name (``transformer.h.0.attn.c_attn.weight``: its AccumulateGrad);
- ``module=PATH`` (the module path only), ``param=NAME`` (the parameter name only);
- ``queue=cpu``, ``thread=cuda:0``, ``gt=2`` (the GraphTask);
- ``nonfinite``: a ``node_end`` whose outputs hold a NaN or an Inf (``nonfinite.py``).

Names (of nodes, queues and threads) match case-insensitively and exactly:
``relubackward0`` is ``ReluBackward0``, ``Relu`` is not.  A dotted path matches by whole
parts: ``h.2`` holds ``h.2.attn`` but not ``h.20``.  A name matches every event that
touches a node of that name (``Event.node``), whatever the event's kind, except the
``node_meta`` events that describe the graph when it is made (ask ``kind=node_meta``):
a breakpoint on a module stops where the backward reaches it, not at the description.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from autograd_tui.control.nonfinite import first_nonfinite
from autograd_tui.engine.events import Event
from autograd_tui.words import EVENT_KINDS, inside, node_names, plain

#: a node by id: ``#5``, ``5``, ``MulBackward0#5``
_NODE_ID = re.compile(r"^(?:[A-Za-z_][\w.]*)?#(\d+)$|^(\d+)$")
#: the words ``key=value`` may start with
FIELDS = ("kind", "node", "queue", "thread", "gt", "module", "param")
NONFINITE = "nonfinite"


class QueryError(ValueError):
    """A query text (or field) that names no event: the message says what is wrong."""


def meta_of(e: Event) -> tuple[str | None, str | None]:
    """(module, parameter) a ``node_meta`` event names (a recording's: checked types)."""
    mod, tensor = getattr(e, "module", None), getattr(e, "tensor", None)
    return (mod if isinstance(mod, str) else None,
            tensor if isinstance(tensor, str) else None)


def graph_paths(meta: Mapping[int, Mapping[str, Any]]) -> tuple[set[str], set[str]]:
    """Every module path (with the modules that hold them) and parameter name that
    ``meta`` (node id -> ``node_meta`` fields) names."""
    mods: set[str] = set()
    params: set[str] = set()
    for m in meta.values():
        mod, tensor = m.get("module"), m.get("tensor")
        if isinstance(mod, str) and mod:
            parts = mod.split(".")
            mods.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        if isinstance(tensor, str) and tensor:
            params.add(tensor)
    return mods, params


def graph_words(names: Mapping[int, str], meta: Mapping[int, Mapping[str, Any]]
                ) -> list[str]:
    """What a query may name in this graph, for completion: the event kinds, the node
    names, the module paths and the parameter names, each once, sorted."""
    mods, params = graph_paths(meta)
    return sorted(set(EVENT_KINDS) | set(names.values()) | mods | params,
                  key=lambda w: (w.lower(), w))


def _node_id(node: str | int) -> int | None:
    if isinstance(node, int):
        return node
    m = _NODE_ID.match(node)
    return int(m.group(1) or m.group(2)) if m else None


@dataclass(frozen=True)
class EventQuery:
    """Events of ``kind``, touching ``node``, on ``queue``, emitted by ``thread``, of the
    GraphTask ``graph_task``, and (``nonfinite``) a non-finite gradient: every field given
    must match.  ``text`` is the query as typed (``parse_query``), "" when built from
    fields (a breakpoint from the app's dialog, ``breakpoint_on``)."""

    kind: str | None = None
    node: str | int | None = None
    queue: str | None = None
    thread: str | None = None
    graph_task: int | None = None
    nonfinite: bool = False
    module: str | None = None
    param: str | None = None
    text: str = field(default="", compare=False)
    _id: int | None = field(default=None, init=False, repr=False, compare=False)
    _name: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind is not None:
            kind = self.kind.strip().lower()
            if kind not in EVENT_KINDS:
                raise QueryError(f"unknown event kind {plain(self.kind)!r} (push, pop, "
                                 "node_start, ... docs/events.md)")
            object.__setattr__(self, "kind", kind)
        if self.node is not None:
            node = self.node if isinstance(self.node, int) else self.node.strip()
            object.__setattr__(self, "_id", _node_id(node))
            if self._id is None:
                object.__setattr__(self, "_name", str(node).lower())
        for key in ("module", "param"):
            v = getattr(self, key)
            if v is not None:
                object.__setattr__(self, key, v.strip().lower() or None)

    def describe(self) -> str:
        """The fields given, as the breakpoints dialog lists them."""
        parts = [f"{k}={v}" for k, v in (("kind", self.kind), ("node", self.node),
                                          ("queue", self.queue), ("thread", self.thread),
                                          ("gt", self.graph_task), ("module", self.module),
                                          ("param", self.param)) if v is not None and v != ""]
        if self.nonfinite:
            parts.insert(0, "first non-finite gradient")
        return plain(" ".join(parts) or "any event")

    @property
    def by_name(self) -> bool:
        """Whether matching needs the nodes' names (a node named, not numbered), their
        modules or parameters."""
        return self._name is not None or self.module is not None or self.param is not None

    def matcher(self, names: Mapping[int, str] | None = None,
                meta: Mapping[int, Mapping[str, Any]] | None = None
                ) -> Callable[[Event], bool]:
        """A predicate on events, for ``run_until`` or a search.  ``names``: node id ->
        name of the nodes known so far, ``meta``: node id -> their ``node_meta`` fields;
        a node named by a later event (a ``dependencies_computed``, a ``node_start``, a
        ``node_meta``) is learnt as the events pass, so a breakpoint set before a graph
        exists finds its nodes."""
        kind, nid, nname, gt, nonfin = (self.kind, self._id, self._name, self.graph_task,
                                        self.nonfinite)
        module, param = self.module, self.param
        queue = self.queue.lower() if self.queue else None
        thread = self.thread.lower() if self.thread else None
        named = self.by_name
        known: dict[int, str] = dict(names or {}) if named else {}
        # node id -> (module, parameter): what a node_meta said of it
        paths: dict[int, tuple[str | None, str | None]] = {}
        if named and meta:
            for n, m in meta.items():
                mod, tensor = m.get("module"), m.get("tensor")
                paths[n] = (mod if isinstance(mod, str) else None,
                            tensor if isinstance(tensor, str) else None)

        def match(e: Event) -> bool:
            if named:  # before any test: every name is learnt
                if e.kind in ("dependencies_computed", "node_start"):
                    known.update(node_names((e,)))
                elif e.kind == "node_meta" and e.node is not None:
                    paths[e.node] = meta_of(e)
                    if kind is None:  # the graph's description, not the backward
                        return False
            if kind is not None and e.kind != kind:
                return False
            if nid is not None and e.node != nid:
                return False
            if gt is not None and e.graph_task != gt:
                return False
            if queue is not None and (e.queue is None or e.queue.lower() != queue):
                return False
            if thread is not None and e.thread.lower() != thread:
                return False
            if named:
                if e.node is None:
                    return False
                mod, tensor = paths.get(e.node, (None, None))
                if module is not None and not inside(mod, module):
                    return False
                if param is not None and not inside(tensor, param):
                    return False
                if nname is not None:
                    name = known.get(e.node)
                    if not ((name is not None and name.lower() == nname)
                            or inside(mod, nname) or inside(tensor, nname)):
                        return False
            return not nonfin or first_nonfinite(e) is not None

        return match


def parse_query(text: str, names: Mapping[int, str] | None = None,
                meta: Mapping[int, Mapping[str, Any]] | None = None) -> EventQuery:
    """The query ``text`` says (the module docstring has the words).  With ``names``
    (node id -> name: the graph so far; ``meta``: its ``node_meta`` fields), a name that
    is none of them (nor a module path or parameter name of ``meta``) is refused: a jump
    looks only at events that happened, so such a query could find nothing."""
    words = text.split()
    if not words:
        raise QueryError("type an event kind (e.g. push) or a node (e.g. #5, MulBackward0)")
    got: dict[str, str] = {}
    nonfinite = False

    def put(key: str, value: str) -> None:
        if key in got and got[key].lower() != value.lower():
            what = {"kind": "event kind", "gt": "GraphTask"}.get(key, key)
            raise QueryError(f"one {what} at a time ({plain(got[key])} or {plain(value)})")
        got[key] = value

    for w in words:
        key, eq, value = w.partition("=")
        if eq:
            if key.lower() not in FIELDS or not value:
                raise QueryError(f"{plain(w)!r}: a field is kind=, node=, queue=, thread=, "
                                 "gt=, module= or param=, with a value")
            put(key.lower(), value)
        elif w.lower() in EVENT_KINDS:
            put("kind", w.lower())
        elif w.lower() == NONFINITE:
            nonfinite = True
        else:
            put("node", w)
    node = got.get("node")
    if names is not None:
        mods, params = graph_paths(meta or {})

        def known(v: str, *sets: set[str]) -> bool:
            low = v.lower()
            return any(inside(x, low) for xs in sets for x in xs)

        if node is not None and _node_id(node) is None and not any(
                n.lower() == node.lower() for n in names.values()) and not known(
                node, mods, params):
            raise QueryError(f"{plain(node)!r} is neither an event kind (push, pop, "
                             "node_start, ...) nor a node, module or parameter of this "
                             "graph (#5, MulBackward0, encoder.layers.0)")
        for key, sets in (("module", (mods,)), ("param", (params,))):
            if key in got and not known(got[key], *sets):
                raise QueryError(f"{key}={plain(got[key])}: no such "
                                 f"{'module' if key == 'module' else 'parameter'} "
                                 "in this graph")
    gt: int | None = None
    if "gt" in got:
        try:
            gt = int(got["gt"].removeprefix("GT").removeprefix("gt"))
        except ValueError:
            raise QueryError(f"gt={plain(got['gt'])}: a GraphTask is a number "
                             "(gt=2)") from None
    return EventQuery(kind=got.get("kind"), node=node, queue=got.get("queue"),
                      thread=got.get("thread"), graph_task=gt, nonfinite=nonfinite,
                      module=got.get("module"), param=got.get("param"),
                      text=" ".join(words))


def breakpoint_on(kind: str | None = None, node: str | int | None = None,
                  queue: str | None = None, graph_task: int | None = None,
                  thread: str | None = None, names: dict[int, str] | None = None
                  ) -> Callable[[Event], bool]:
    """A predicate for ``run_until``: ``EventQuery(...).matcher(names)``, every given
    field must match.  ``node`` is a node id or a node name (any case)."""
    return EventQuery(kind=kind, node=node, queue=queue, thread=thread,
                      graph_task=graph_task).matcher(names)
