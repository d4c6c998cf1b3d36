"""The event schema: every step of the engine a student should see.

This module is the single source of truth for event kinds and their fields;
``docs/events.md`` is written from it.  An event is a small frozen record: a
global sequence number, the thread that emitted it, the GraphTask, node and
queue it concerns (ids and names, never Python objects), and a few typed
fields in ``data``.

The engine calls its observers synchronously on the emitting thread.  With no
observer attached the only cost at each site is one truth test.  A tensor's
summary (``summarize``) is the one place an event reads values: a CuPy array is
copied to the host for it (``device.to_numpy``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple, Protocol

import msgspec
import numpy as np

from .device import to_numpy

_GONE = ("GraphTasks freed since the last push or pop, before this one sorted the queue: "
         "those that completed (failed) with tasks left in a queue, which from now on "
         "sort first with depth INT_MAX, as a NodeTask whose weak pointer has expired")

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
        "depth_priority": ("bool", "the engine's queues put deeper reentrant GraphTasks first "
                                   "(the engine option; PyTorch always does)"),
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
        "outstanding": ("int", "the GraphTask's outstanding_tasks after the push"),
        "gone": ("list[int]", _GONE),
    },
    "pop": {
        "dummy": ("bool", "a wake-up task"),
        "shutdown": ("bool", "a shutdown task"),
        "size": ("int", "queue length after the pop"),
        "expired": ("bool", "the task's GraphTask no longer exists (skipped)"),
        "gone": ("list[int]", _GONE),
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
        "hook_kind": ("str", "tensor_pre | retain_grad | pre | post | final_callback | capture "
                              "| unpack | recompute"),
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
    "node_meta": {
        "module": ("str|null", "the nn.Module path that created the node (a PyTorch graph)"),
        "module_type": ("str|null", "that module's class name"),
        "tensor": ("str|null", "AccumulateGrad: the parameter's name"),
        "created": ("str|null", "where the forward op ran: the program's own frame (the "
                                "innermost outside torch, site-packages and the standard "
                                "library), file:line in function"),
        "source": ("str|null", "that source line"),
        "saved": ("list[str]", "the node's saved tensors: name, shape, dtype, version, "
                               "size, norm"),
        "stack": ("list[str]", "every frame of the forward op, outermost first, library "
                               "frames included: file:line in function (optional: [] when "
                               "absent, as in files written before it)"),
    },
    "ddp_bucket_assigned": {
        "rank": ("int", "the process's rank in DDP's process group"),
        "bucket": ("int", "the bucket's index (DDP's own: GradBucket.index())"),
        "params": ("list[str]", "its parameters, by name, in DDP's order (emitted for every "
                                "bucket when the first gradient of the backward arrives)"),
    },
    "ddp_bucket_ready": {
        "rank": ("int", "the process's rank in DDP's process group"),
        "bucket": ("int", "the bucket's index (DDP's own: GradBucket.index())"),
        "params": ("list[str]", "the parameters in the bucket, by name, in DDP's order"),
    },
    "ddp_allreduce_start": {
        "rank": ("int", "the process's rank"),
        "bucket": ("int", "the bucket whose all-reduce DDP's communication hook started"),
        "hook": ("str", "the communication hook's name"),
    },
    "ddp_allreduce_end": {
        "rank": ("int", "the process's rank"),
        "bucket": ("int", "the bucket whose all-reduce finished (its future done)"),
    },
    "ddp_finalize": {
        "rank": ("int", "the process's rank"),
        "buckets": ("int", "buckets reduced: the reducer's final callback "
                           "(finalize_backward) waited for each and wrote the .grad"),
    },
    "ddp_bucket_never_ready": {
        "rank": ("int", "the process's rank"),
        "bucket": ("int", "a bucket still pending at the end of the backward"),
        "params": ("list[str]", "the parameters in the bucket"),
        "missing": ("list[str]", "those that got no gradient on this rank"),
        "find_unused": ("bool", "DDP's find_unused_parameters"),
        "static_graph": ("bool", "DDP's static_graph"),
    },
    "deadlock": {
        "explanation": ("str", "plain words"),
        "cycle": ("list[str]", "the wait-for cycle"),
        "threads": ("dict[str,str]", "thread -> what it waits on"),
    },
}


class NodeInfo(NamedTuple):
    """A node of the graph, as ``dependencies_computed`` describes it."""
    id: int
    name: str
    device: str
    seq: int
    topo: int
    num_inputs: int
    next: tuple[tuple[int | None, int], ...]
    leaf: bool


class Event(msgspec.Struct, array_like=True, frozen=True, gc=False, tag_field="kind",
            forbid_unknown_fields=True):
    """One event.  Each kind is a subclass (``EVENT_TYPES[kind]``) whose fields after the
    common five are the kind's ``SCHEMA`` fields, in order; build one with
    :func:`make_event`.  Encoded (``msgspec.json``) it is one JSON array
    ``[kind, seq, thread, graph_task, node, queue, field...]``: the trace format's
    event line.  Tensor summaries are kept as raw JSON (``msgspec.Raw``) so that
    loading a recording does not build them until something shows them; graph
    nodes are ``NodeInfo`` tuples.  ``data``
    gives every field as plain JSON-like values (dicts and lists)."""

    seq: int
    thread: str
    graph_task: int | None
    node: int | None
    queue: str | None

    kind: ClassVar[str] = ""
    #: (data key, attribute, SCHEMA type) per kind field, in SCHEMA order
    FIELDS: ClassVar[tuple[tuple[str, str, str], ...]] = ()

    @property
    def data(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, attr, typ in self.FIELDS:
            v = getattr(self, attr)
            conv = _TO_PLAIN.get(typ)
            out[key] = conv(v) if conv is not None else v
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "kind": self.kind, "thread": self.thread,
                "graph_task": self.graph_task, "node": self.node, "queue": self.queue,
                "data": self.data}


_NODES = "list[dict]"
#: SCHEMA type name -> the field's type (summaries: raw JSON, decoded on demand)
_TYPES: dict[str, Any] = {
    "int": int, "bool": bool, "str": str, "int|null": int | None, "str|null": str | None,
    "list[int]": list[int], "list[bool]": list[bool], "list[str]": list[str],
    "list[list[int]]": list[list[int]], "list[[int,int]]": list[list[int]],
    _NODES: list[NodeInfo], "dict[str,str]": dict[str, str],
    "dict|null": msgspec.Raw, "list[dict|null]": msgspec.Raw,
}


def node_dict(n: NodeInfo) -> dict[str, Any]:
    """A graph node as ``data`` and a recording's header give it."""
    d = dict(zip(NodeInfo._fields, n))
    d["next"] = [list(x) for x in n.next]
    return d


def _node_info(d: dict[str, Any] | NodeInfo) -> NodeInfo:
    if isinstance(d, NodeInfo):
        return d
    return NodeInfo(d["id"], d["name"], d["device"], d["seq"], d["topo"], d["num_inputs"],
                    tuple(tuple(x) for x in d["next"]), d["leaf"])


#: SCHEMA type -> (stored value -> plain value), for ``data``
_TO_PLAIN: dict[str, Callable[[Any], Any]] = {
    "dict|null": lambda v: _decode(v), "list[dict|null]": lambda v: _decode(v),
    _NODES: lambda v: [node_dict(n) for n in v],
}
#: SCHEMA type -> (plain value -> stored value), for ``make_event``
_FROM_PLAIN: dict[str, Callable[[Any], Any]] = {
    "dict|null": lambda v: raw(v), "list[dict|null]": lambda v: raw(v),
    _NODES: lambda v: [_node_info(n) for n in v],
}
#: data keys that clash with a common field get another attribute name
_ATTR = {("push", "seq"): "seq_nr"}
#: trailing fields that may be absent (added within a format version): their default.
#: msgspec fills a missing trailing field of an array-like struct from its default.
OPTIONAL: dict[tuple[str, str], Any] = {("node_meta", "stack"): []}


def make_types(schema: dict[str, dict[str, tuple[str, str]]],
               more_types: dict[str, Any] | None = None) -> dict[str, type[Event]]:
    """One Event subclass per kind of ``schema`` (older recording formats build theirs,
    with the field types of ``more_types`` that only they use)."""
    types = {**_TYPES, **(more_types or {})}
    out: dict[str, type[Event]] = {}
    for kind, fields in schema.items():
        spec = tuple((key, _ATTR.get((kind, key), key), t) for key, (t, _) in fields.items())
        name = "".join(w.title() for w in kind.split("_")) + "Event"
        out[kind] = msgspec.defstruct(
            name, [(attr, types[t], OPTIONAL[kind, key]) if (kind, key) in OPTIONAL
                   else (attr, types[t]) for key, attr, t in spec], bases=(Event,),
            tag=kind, namespace={"kind": kind, "FIELDS": spec, "__module__": __name__})
    return out


EVENT_TYPES: dict[str, type[Event]] = make_types(SCHEMA)
globals().update({cls.__name__: cls for cls in EVENT_TYPES.values()})  # for pickle
NULL = msgspec.Raw(b"null")
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


def raw(value: Any) -> msgspec.Raw:
    """A summary (or list of summaries) as the raw JSON an event keeps."""
    if isinstance(value, msgspec.Raw):
        return value
    return NULL if value is None else msgspec.Raw(_encode(value))


def make_event(seq: int, kind: str, thread: str, graph_task: int | None = None,
               node: int | None = None, queue: str | None = None,
               data: dict[str, Any] | None = None,
               types: dict[str, type[Event]] = EVENT_TYPES) -> Event:
    """The event of ``kind`` with its fields from ``data`` (every SCHEMA field)."""
    cls = types[kind]
    d = data or {}
    args = []
    for key, _, typ in cls.FIELDS:
        v = d[key] if key in d or (kind, key) not in OPTIONAL else OPTIONAL[kind, key]
        conv = _FROM_PLAIN.get(typ)
        args.append(conv(v) if conv is not None else v)
    return cls(seq, thread, graph_task, node, queue, *args)  # type: ignore[call-arg]


def summary_raw(t: Any, full: bool = False) -> msgspec.Raw:
    """``raw(summarize(t, full=full))``, the same bytes: what an event keeps of a tensor.
    A tensor that knows when its value last changed (a PyTorch node's gradient, whose
    version counter counts in-place ops) makes it once (``summary_once``) and reuses it:
    a gradient is shown as a node's output, then in a buffer, then as the next node's
    input."""
    if t is None:
        return NULL
    cls = type(t)
    once = _ONCE.get(cls, _UNSEEN)
    if once is _UNSEEN:  # looked up once per class (a miss on a Tensor costs an exception)
        once = _ONCE[cls] = getattr(cls, "summary_once", None)
    if once is not None:
        return once(t, full, _summary_raw)
    return _summary_raw(t, full)


#: tensor class -> its ``summary_once`` (unbound), or None
_ONCE: dict[type, Any] = {}
_UNSEEN = object()


def _summary_raw(t: Any, full: bool) -> msgspec.Raw:
    """``raw(summarize(t, full=full))``, its bytes put together without the dict: the
    part fixed by shape and dtype (``_head``) once per (shape, dtype), the values and
    the norm encoded as ``msgspec`` encodes them inside the dict."""
    if full:
        return msgspec.Raw(_encode(summarize(t, full=True)))
    data = getattr(t, "data", t)
    if type(data) is not np.ndarray:
        data = to_numpy(data)
    if data.size == 1 and data.dtype is _F64:  # a scalar gradient: no NumPy call but tolist
        vals = data.reshape(-1).tolist()
        v = vals[0]
        norm = math.sqrt(v * v)  # what flat.dot(flat) gives for one element: one rounding
        if not math.isfinite(norm):
            return msgspec.Raw(_encode(summarize(t)))
    else:
        flat = data.reshape(-1)
        if flat.dtype != _F64:
            if flat.dtype.kind == "c":  # summarize writes complex values as text
                return msgspec.Raw(_encode(summarize(t)))
            flat = flat.astype(float)
        norm = math.sqrt(flat.dot(flat)) if flat.size else 0.0
        if not math.isfinite(norm):  # a finite norm says every value is finite
            return msgspec.Raw(_encode(summarize(t)))
        vals = flat[:4].tolist()
    key = (data.shape, data.dtype)
    head = _HEADS.get(key)
    if head is None:
        if len(_HEADS) >= 4096:  # a run of ever new shapes: start over rather than grow
            _HEADS.clear()
        head = _HEADS[key] = _encode(
            {"shape": list(data.shape), "dtype": _dtype_name(data.dtype), "values": []}
        )[:-3]
    return msgspec.Raw(b"".join((head, _encode(vals), b',"norm":', _encode(norm), b"}")))


def raw_list(raws: list[msgspec.Raw]) -> msgspec.Raw:
    """Raw summaries as one raw JSON list (what ``raw`` makes of the list of them)."""
    return msgspec.Raw(b"[" + b",".join(raws) + b"]")


def summary(value: Any) -> Any:
    """A summary (or list of them) as plain values, whether kept raw or not."""
    return _decode(value) if isinstance(value, msgspec.Raw) else value


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


_F64 = np.dtype(np.float64)
_DTYPE_NAMES: dict[Any, str] = {}
#: (shape, dtype) -> the summary's bytes up to its values: b'{"shape":[..],"dtype":"..","values":'
_HEADS: dict[tuple[tuple[int, ...], Any], bytes] = {}


def summarize(t: Any, n: int = 4, full: bool = False) -> dict[str, Any] | None:
    """A small, JSON-safe summary of a tensor: shape, dtype, first values, norm
    (and with ``full``, every value as nested lists under ``data``)."""
    if t is None:
        return None
    data = getattr(t, "data", t)
    if type(data) is not np.ndarray:  # a summary is shown on the host: CuPy's copies
        data = to_numpy(data)
    flat = data.reshape(-1)
    if flat.dtype.kind == "c":
        return _complex_summary(data, n, full)
    if flat.dtype != _F64:
        flat = flat.astype(float)
    isfinite = math.isfinite
    vals = [v if isfinite(v) else repr(v) for v in flat[:n].tolist()]
    # np.linalg.norm of a real vector is sqrt(x.dot(x)) (the same bits, without its checks)
    norm = math.sqrt(flat.dot(flat)) if flat.size else 0.0
    out = {"shape": list(data.shape), "dtype": _dtype_name(data.dtype), "values": vals,
           "norm": norm if isfinite(norm) else repr(norm)}
    if full:
        out["data"] = _json_safe(data.astype(float).tolist())
    return out


def _complex_summary(data: np.ndarray, n: int, full: bool) -> dict[str, Any]:
    """A complex tensor (``torch.fft``, a complex layer's gradient): JSON has no complex
    number, so each value is its text, ``"(1+2j)"``; the norm is of the moduli (a cast to
    float would keep the real parts only)."""
    flat = data.reshape(-1)
    norm = float(np.linalg.norm(flat)) if flat.size else 0.0
    out = {"shape": list(data.shape), "dtype": _dtype_name(data.dtype),
           "values": [repr(complex(v)) for v in flat[:n].tolist()],
           "norm": norm if math.isfinite(norm) else repr(norm)}
    if full:
        out["data"] = np.vectorize(lambda v: repr(complex(v)), otypes=[object])(data).tolist()
    return out


def _dtype_name(dtype: Any) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:  # numpy builds a dtype's name in Python each time: keep it
        name = _DTYPE_NAMES[dtype] = str(dtype)
    return name


def _json_safe(x: Any) -> Any:
    if isinstance(x, list):
        return [_json_safe(v) for v in x]
    return x if math.isfinite(x) else repr(x)
