"""The event schema: every step of the engine a student should see.

This module is the single source of truth for event kinds and their fields;
``docs/events.md`` is written from it.  An event is a small frozen record: a
global sequence number, the thread that emitted it, the GraphTask, node and
queue it concerns (ids and names, never Python objects), and a few typed
fields in ``data``.

The engine calls its observers synchronously on the emitting thread.  With no
observer attached the only cost at each site is one truth test.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

#: kind -> {field: (type name, meaning)}.  Common fields (seq, kind, thread,
#: graph_task, node, queue) are not repeated here.
SCHEMA: dict[str, dict[str, tuple[str, str]]] = {
    "graph_task_created": {
        "reentrant_depth": ("int", "0 for a top-level backward, total_depth + 1 when reentrant"),
        "keep_graph": ("bool", "retain_graph"),
        "create_graph": ("bool", "create_graph (grad mode while running nodes)"),
        "accumulate_grad": ("bool", "True for backward(), False for grad()"),
        "roots": ("list[int]", "root node ids"),
        "graph_root": ("int", "id of the node queued first (GraphRoot, or the single root)"),
    },
    "dependencies_computed": {
        "dependencies": ("list[[int,int]]", "[node id, number of edges into it], by node id"),
        "nodes": ("list[dict]", "every node reached: id, name, device, seq, topo, num_inputs, "
                                "next [[id or null, input_nr]], leaf (bool)"),
        "min_topo_nr": ("int", "pruning bound from the outputs of grad()"),
    },
    "exec_info": {
        "needed": ("list[int]", "node ids with needed_ = True"),
        "captures": ("list[list[int]]", "[node id, input_nr, output_idx] per capture"),
    },
    "push": {
        "depth": ("int", "reentrant depth of the task's GraphTask (max int if it is gone)"),
        "seq": ("int|null", "sequence_nr of the node (null for dummy and shutdown tasks)"),
        "dummy": ("bool", "a wake-up task with no node"),
        "shutdown": ("bool", "a shutdown task"),
        "size": ("int", "queue length after the push"),
        "order": ("list[[int|null,int|null,int,int|null]]",
                  "the queue after the push, in pop order: [graph_task, node, depth, seq] "
                  "per task (node null for a dummy task)"),
        "outstanding": ("int", "the GraphTask's outstanding_tasks after the push"),
    },
    "pop": {
        "dummy": ("bool", "a wake-up task"),
        "shutdown": ("bool", "a shutdown task"),
        "size": ("int", "queue length after the pop"),
        "expired": ("bool", "the task's GraphTask no longer exists (skipped)"),
    },
    "dependency_decrement": {
        "from_node": ("int", "the node whose output flowed"),
        "input_nr": ("int", "the input slot of the receiving node"),
        "remaining": ("int", "dependencies left after the decrement"),
    },
    "buffer_accumulate": {
        "slot": ("int", "input_nr in the node's InputBuffer"),
        "mode": ("str", "first | add | undefined"),
        "value": ("dict|null", "summary of the slot after accumulation"),
        "from_node": ("int", "the node whose output flowed"),
    },
    "outstanding_decrement": {
        "outstanding": ("int", "the GraphTask's outstanding_tasks after thread_main finished a "
                               "task (node null for a dummy task)"),
    },
    "not_ready_insert": {"slots": ("list[bool]", "which slots are filled")},
    "not_ready_remove": {},
    "node_start": {
        "name": ("str", "node name"),
        "depth": ("int", "reentrant depth of the GraphTask"),
        "inputs": ("list[dict|null]", "summaries of the gradients the node receives"),
    },
    "node_end": {
        "name": ("str", "node name"),
        "outputs": ("list[dict|null]", "summaries of the gradients it produced"),
        "leaf_grad": ("dict|null", "AccumulateGrad: summary of the leaf's .grad afterwards"),
    },
    "node_skipped": {"reason": ("str", "not_needed | has_error | captured")},
    "hook": {
        "hook_kind": ("str", "tensor_pre | retain_grad | pre | post | final_callback | capture"),
        "modified": ("bool", "the hook returned a replacement"),
        "name": ("str", "the hook function's name"),
    },
    "completion": {
        "error": ("str|null", "the error message if the GraphTask failed"),
        "outstanding": ("int", "outstanding_tasks at completion"),
    },
    "wakeup": {
        "owner": ("str", "the owner's queue the dummy task goes to"),
    },
    "reentrant_handoff": {
        "mode": ("str", "nested (inline thread_main) | pool (add_thread_pool_task) | block"),
        "depth": ("int", "the new GraphTask's reentrant depth"),
        "current_depth": ("int", "nesting depth on this thread before the call"),
        "parent_graph_task": ("int|null", "the GraphTask whose node made the call"),
    },
    "thread_start": {"role": ("str", "device | pool | owner")},
    "thread_exit": {},
    "thread_wait": {
        "on": ("str", "queue | future | lock | pool | signal"),
        "target": ("str", "what it waits on (queue name, 'GraphTask N', lock name)"),
        "holder": ("str|null", "for a lock: the thread that holds it"),
    },
    "thread_wake": {"on": ("str", "queue | future | lock | pool | signal"),
                    "target": ("str", "what it waited on")},
    "error": {
        "message": ("str", "the exception, as the caller will see it"),
        "exc_type": ("str", "exception class name"),
    },
    "deadlock": {
        "explanation": ("str", "plain words"),
        "cycle": ("list[str]", "the wait-for cycle"),
        "threads": ("dict[str,str]", "thread -> what it waits on"),
    },
}


@dataclass(frozen=True, slots=True)
class Event:
    seq: int
    kind: str
    thread: str
    graph_task: int | None = None
    node: int | None = None
    queue: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "kind": self.kind, "thread": self.thread,
                "graph_task": self.graph_task, "node": self.node, "queue": self.queue,
                "data": self.data}


class Observer(Protocol):
    def __call__(self, event: Event) -> None: ...


class ListObserver:
    """Collects every event (thread-safe: list.append is atomic)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]


def summarize(t: Any, n: int = 4, full: bool = False) -> dict[str, Any] | None:
    """A small, JSON-safe summary of a tensor: shape, dtype, first values, norm
    (and with ``full``, every value as nested lists under ``data``)."""
    if t is None:
        return None
    data = np.asarray(getattr(t, "data", t))
    flat = data.reshape(-1)
    vals = [float(v) if np.isfinite(v) else repr(float(v)) for v in flat[:n].astype(float)]
    norm = float(np.linalg.norm(flat.astype(float))) if flat.size else 0.0
    out = {"shape": list(data.shape), "dtype": str(data.dtype), "values": vals,
           "norm": norm if math.isfinite(norm) else repr(norm)}
    if full:
        out["data"] = _json_safe(data.astype(float).tolist())
    return out


def _json_safe(x: Any) -> Any:
    if isinstance(x, list):
        return [_json_safe(v) for v in x]
    return x if math.isfinite(x) else repr(x)


def short_value(s: dict[str, Any] | None) -> str:
    if s is None:
        return "None"
    vals = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in s["values"])
    more = "…" if math.prod(s["shape"]) > len(s["values"]) else ""
    return f"[{vals}{more}]" if s["shape"] else vals


def format_event(e: Event, names: dict[int, str] | None = None) -> str:
    """One readable line per event (used by ``print_trace``)."""
    names = names or {}

    def nm(i: int | None) -> str:
        return f"{names.get(i, 'node')}#{i}" if i is not None else "-"

    d = e.data
    k = e.kind
    where = f"GT{e.graph_task}" if e.graph_task is not None else ""
    if k == "push":
        what = "dummy" if d["dummy"] else "shutdown" if d["shutdown"] else nm(e.node)
        seq = "max" if d["seq"] is not None and d["seq"] >= 2**64 - 1 else d["seq"]
        body = f"push {what} -> {e.queue} (depth {d['depth']}, seq {seq}, size {d['size']})"
    elif k == "pop":
        what = "dummy" if d["dummy"] else "shutdown" if d["shutdown"] else nm(e.node)
        body = f"pop {what} <- {e.queue} (size {d['size']}{', expired' if d['expired'] else ''})"
    elif k == "dependency_decrement":
        body = (f"dependencies[{nm(e.node)}] -> {d['remaining']} "
                f"(from {nm(d['from_node'])}, input {d['input_nr']})")
    elif k == "buffer_accumulate":
        body = (f"buffer {nm(e.node)}[{d['slot']}] {d['mode']} = {short_value(d['value'])}")
    elif k == "not_ready_insert":
        body = f"not_ready += {nm(e.node)} slots {d['slots']}"
    elif k == "not_ready_remove":
        body = f"not_ready -= {nm(e.node)}"
    elif k == "node_start":
        body = f"start {nm(e.node)} (depth {d['depth']})"
    elif k == "node_end":
        outs = ", ".join(short_value(o) for o in d["outputs"])
        body = f"end {nm(e.node)} -> ({outs})"
        if d.get("leaf_grad") is not None:
            body += f" .grad = {short_value(d['leaf_grad'])}"
    elif k == "outstanding_decrement":
        body = f"outstanding_tasks -> {d['outstanding']}"
    elif k == "node_skipped":
        body = f"skip {nm(e.node)} ({d['reason']})"
    elif k == "hook":
        body = f"hook {d['hook_kind']} {d['name']} on {nm(e.node)}"
        body += " (modified)" if d["modified"] else ""
    elif k == "dependencies_computed":
        deps = ", ".join(f"{nm(int(n))}:{c}" for n, c in d["dependencies"])
        body = f"dependencies {{{deps}}}"
    elif k == "graph_task_created":
        body = f"new GraphTask (depth {d['reentrant_depth']}, roots {d['roots']})"
    elif k == "completion":
        body = "completed" + (f" with error: {d['error']}" if d["error"] else "")
    elif k == "wakeup":
        body = f"wake-up task -> {d['owner']}"
    elif k == "reentrant_handoff":
        body = f"reentrant backward: {d['mode']} at depth {d['depth']}"
    elif k in ("thread_wait", "thread_wake"):
        body = f"{k.split('_')[1]} on {d['on']} {d['target']}"
        if d.get("holder"):
            body += f" (held by {d['holder']})"
    elif k == "error":
        body = f"error {d['exc_type']}: {d['message']}"
    elif k == "exec_info":
        body = f"exec_info needed {d['needed']} captures {d['captures']}"
    elif k == "deadlock":  # the explanation's first sentence (it is long; the report has it all)
        first = d["explanation"].removeprefix("Deadlock: ").split(". ", 1)[0].rstrip(".")
        body = f"deadlock: {first}"
    else:
        body = k + (" " + str(d) if d else "")
    return f"{e.seq:5d} {e.thread:<18} {where:<5} {body}"


def print_trace(events: list[Event], out: Callable[[str], Any] = print) -> None:
    """Print one readable line per event."""
    names: dict[int, str] = {}
    for e in events:
        if e.kind == "dependencies_computed":
            for n in e.data["nodes"]:
                names[n["id"]] = n["name"]
        elif e.kind == "node_start" and e.node is not None:
            names[e.node] = e.data["name"]
    for e in events:
        out(format_event(e, names))
