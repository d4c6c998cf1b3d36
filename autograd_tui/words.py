"""The debugger's vocabulary: one place that turns events and nodes into words.

Every view (the app's log and panes, the headless trace, Graphviz, the Chrome
trace) names a node, a sequence number and an event through these functions, so
that a student sees the same words everywhere.  Numbers follow the one
convention of ``docs/architecture.md``: event k is the k-th event (its ``seq``).

Names, threads, queues and messages may come from a recording, which is untrusted
data: ``plain`` makes every control character in them visible, and the views show the
result as text (Rich ``Text``, never markup).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from autograd_tui.engine.events import EVENT_TYPES, SCHEMA, Event, summary
from autograd_tui.engine.graph import UINT64_MAX
from autograd_tui.history.fields import Summary
from autograd_tui.invisible import invisible_class

#: every event kind the engine emits (a breakpoint's kind must be one)
EVENT_KINDS: frozenset[str] = frozenset(SCHEMA)

#: event kind -> Rich style, for the app's event log and the headless trace
KIND_STYLE: dict[str, str] = {
    "push": "green", "pop": "cyan", "node_start": "bold", "node_end": "bold",
    "dependency_decrement": "yellow", "buffer_accumulate": "magenta",
    "not_ready_insert": "bold magenta", "not_ready_remove": "magenta",
    "completion": "bold green", "error": "bold red", "deadlock": "bold red",
    "wakeup": "bold blue", "reentrant_handoff": "bold blue", "thread_wait": "dim",
    "thread_wake": "dim", "hook": "blue", "node_skipped": "dim",
}


_INVISIBLE = invisible_class()
# C0 controls (newline and tab too: one event is one line), DEL, C1 controls, and the
# invisible and bidirectional characters above, which can disguise what a line says.
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{_INVISIBLE}]")
_HIDDEN = re.compile(f"[{_INVISIBLE}]")  # what ``visible`` escapes (it leaves C0/C1 alone)


def _visible(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"


def visible(text: object) -> str:
    """The one text filter of every output (terminal, DOT, SVG, HTML): bidirectional
    controls, zero-width and other invisible format characters, and tag characters
    written as their escapes (``\\u202e``, ``\\ufeff``, ``\\U000e0041``), so a name
    shows what it is.  (``plain`` does this and also escapes control characters; the
    Graphviz labels drop those.)"""
    s = text if isinstance(text, str) else str(text)
    return _HIDDEN.sub(_visible, s) if _HIDDEN.search(s) else s


def inside(path: object, prefix: str) -> bool:
    """``path`` (a module path or a parameter name) is ``prefix`` (lower case) or inside
    it, by whole dotted parts, in any case: ``h.2`` holds ``h.2.attn``, not ``h.20``.  The
    one rule for module paths (the event query, the app's moves)."""
    if not isinstance(path, str) or not path:
        return False
    p = path.lower()
    return p == prefix or p.startswith(prefix + ".")


def plain(text: object) -> str:
    """``text`` as a string with no control character left: each is written as its
    escape, ``\\x1b`` for ESC, ``\\u202e`` for a bidirectional override (a backslash
    itself is left alone), and the invisible characters ``visible`` makes visible.  What
    a terminal shows of it is what the string says: no escape sequence, bell or carriage
    return from a file reaches the terminal."""
    s = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_visible, s) if _UNSAFE.search(s) else s


def plain_lines(text: object) -> list[str]:
    """A library's multi-line message (a gloo or process-group error, PyTorch's "At:"
    trace) as its lines, each ``plain``: a newline (``\\n``, ``\\r\\n``) separates lines
    instead of showing as ``\\x0a``, every other control character is still escaped; blank
    lines are dropped (one message is one block).  Not for a recording's strings: there a
    newline stays escaped (one event is one line)."""
    s = text if isinstance(text, str) else str(text)
    return [plain(line.removesuffix("\r")) for line in s.split("\n") if line.strip()]


def seq_text(seq: int | None) -> str:
    """A node's sequence number; AccumulateGrad's UINT64_MAX reads "max"."""
    return "max" if isinstance(seq, int) and seq >= UINT64_MAX else plain(seq)


def node_label(name: str | None, node: int | None, none: str = "-") -> str:
    """``MulBackward0#3``; no node (a dummy wake-up or shutdown task) reads ``none``."""
    if node is None:
        return none
    return plain(f"{name or 'node'}#{node}")


def node_names(events: Iterable[Event]) -> dict[int, str]:
    """Node id -> name, from the events that name nodes."""
    names: dict[int, str] = {}
    for e in events:
        if e.kind == "dependencies_computed":
            for n in e.data["nodes"]:
                names[n["id"]] = n["name"]
        elif e.kind == "node_start" and e.node is not None:
            names[e.node] = e.data["name"]
    return names


def where(e: Event) -> str:
    """``GT3``: the GraphTask an event concerns, or ""."""
    return f"GT{e.graph_task}" if e.graph_task is not None else ""


#: what a summary from a damaged file reads as (the fold keeps values as they came)
DAMAGED = {"shape": [], "dtype": "?", "values": ["(damaged value)"], "norm": "?"}


def _checked(s: Any) -> Any:
    if s is None:
        return None
    try:
        msgspec.convert(s, Summary, strict=True)
    except msgspec.ValidationError:
        return DAMAGED
    return s


def value_summary(value: Any, many: bool = False) -> Any:
    """A value as the events summarise it (a dict of shape, dtype, values, norm), or
    with ``many`` a list of them, decoded if a recording kept it raw; anything else a
    file may hold reads as ``DAMAGED``."""
    s = summary(value)
    if not many:
        return _checked(s)
    return [_checked(x) for x in s] if isinstance(s, list) else None if s is None else [DAMAGED]


def short_value(s: Any) -> str:
    if isinstance(s, msgspec.Raw):  # as a recording keeps it: one text per distinct summary
        key = bytes(s)
        text = _SHORT.get(key)
        if text is None:
            if len(_SHORT) > 4096:
                _SHORT.clear()
            text = _SHORT[key] = _short(value_summary(s))
        return text
    return _short(value_summary(s))


def _outputs_text(outputs: Any) -> str:
    """A node_end's outputs, each as ``short_value``: the list split without decoding its
    summaries, each then shown once per distinct summary."""
    if isinstance(outputs, msgspec.Raw):
        try:
            items = _RAW_LIST.decode(outputs)
        except msgspec.DecodeError:  # not a list: shown as value_summary shows it
            pass
        else:
            return ", ".join(short_value(x) for x in items or ())
    return ", ".join(_short(o) for o in value_summary(outputs, many=True) or ())


_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw] | None)
#: raw summary -> its short text (a gradient shows up twice in a trace: as the producer's
#: output and in the receiver's buffer)
_SHORT: dict[bytes, str] = {}


def _short(s: Any) -> str:
    """``short_value`` of a summary ``value_summary`` has checked already."""
    if s is None:
        return "None"
    vals = ", ".join(f"{v:.4g}" if isinstance(v, float) else _short_text(v)
                     for v in s["values"])
    more = "…" if math.prod(s["shape"]) > len(s["values"]) else ""
    text = f"[{vals}{more}]" if s["shape"] else vals
    nnz = s.get("nnz")
    if type(nnz) is int:  # a sparse gradient too big to densify, summarised from its values
        lo, hi = (f"{v:.4g}" if isinstance(v, float) else _short_text(v)
                  for v in (s.get("min"), s.get("max")))
        text += f" (sparse: nnz {nnz}, min {lo}, max {hi})"
    return plain(text)


def _short_text(v: Any) -> str:
    """A value written as text: ``"nan"``, or a complex one (``"(1.25+0.5j)"``) as the
    floats are, four digits each."""
    text = str(v)
    if text.endswith(("j", "j)")):
        try:
            c = complex(text)
        except ValueError:
            return text
        return f"{c.real:.4g}{c.imag:+.4g}j"
    return text


#: kind -> {data key: attribute}, to read an event's fields one at a time
_ATTRS = {kind: {key: attr for key, attr, _ in cls.FIELDS} for kind, cls in EVENT_TYPES.items()}


class _Fields:
    """``e.data[key]``, decoding only the fields a line reads (``e.data`` decodes
    every tensor summary the event holds; a trace reads a few of them)."""

    __slots__ = ("_e", "_attrs")

    def __init__(self, e: Event, attrs: dict[str, str]) -> None:
        self._e, self._attrs = e, attrs

    def __getitem__(self, key: str) -> Any:
        return summary(getattr(self._e, self._attrs[key]))

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._attrs else default


def event_words(e: Event, names: dict[int, str] | None = None) -> str:
    """What the event says, in words (no number, thread or GraphTask)."""
    names = names or {}

    def nm(i: int | None) -> str:  # node_label, made plain with the whole line below
        return "-" if i is None else f"{names.get(i) or 'node'}#{i}"

    k = e.kind
    x: Any = e  # the kinds of nearly every line read their (typed) fields directly
    if k == "push":
        what = "dummy" if x.dummy else "shutdown" if x.shutdown else nm(e.node)
        body = (f"push {what} -> {e.queue} (depth {x.depth}, seq {seq_text(x.seq_nr)}, "
                f"size {x.size})")
    elif k == "pop":
        what = "dummy" if x.dummy else "shutdown" if x.shutdown else nm(e.node)
        body = f"pop {what} <- {e.queue} (size {x.size}{', expired' if x.expired else ''})"
    elif k == "dependency_decrement":
        body = (f"dependencies[{nm(e.node)}] -> {x.remaining} "
                f"(from {nm(x.from_node)}, input {x.input_nr})")
    elif k == "buffer_accumulate":
        body = f"buffer {nm(e.node)}[{x.slot}] {x.mode} = {short_value(x.value)}"
    elif k == "node_start":
        body = f"start {nm(e.node)} (depth {x.depth})"
    elif k == "outstanding_decrement":
        body = f"outstanding_tasks -> {x.outstanding}"
    else:
        body = _rare_words(e, nm)
    return plain(body)  # names, queues and messages may come from a file


def _rare_words(e: Event, nm: Callable[[int | None], str]) -> str:
    """``event_words`` of the other kinds, reading fields through ``_Fields``."""
    k = e.kind
    attrs = _ATTRS.get(k)
    d: Any = _Fields(e, attrs) if attrs is not None else e.data
    if k == "not_ready_insert":
        body = f"not_ready += {nm(e.node)} slots {d['slots']}"
    elif k == "not_ready_remove":
        body = f"not_ready -= {nm(e.node)}"
    elif k == "node_end":
        outs = _outputs_text(e.outputs)  # type: ignore[attr-defined]
        body = f"end {nm(e.node)} -> ({outs})"
        if d.get("leaf_grad") is not None:
            body += f" .grad = {short_value(d['leaf_grad'])}"
    elif k == "node_skipped":
        body = f"skip {nm(e.node)} ({d['reason']})"
    elif k == "hook" and d["hook_kind"] == "recompute":
        body = f"recompute in {nm(e.node)}: {d['name']}"
    elif k == "hook" and d["hook_kind"] == "unpack":
        body = f"unpack a saved tensor in {nm(e.node)} ({d['name']})"
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
        body = f"{k.split('_')[1]} on {wait_words(d['on'], d['target'], d.get('holder'))}"
    elif k == "error":
        body = f"error {d['exc_type']}: {d['message']}"
    elif k == "exec_info":
        body = f"exec_info needed {d['needed']} captures {d['captures']}"
    elif k == "thread_start":
        body = f"thread starts ({d['role']} thread)"
    elif k == "node_meta":  # a node's module, parameter, creation site; or its saved tensors
        parts = [f"in {d['module']} ({d['module_type']})" if d["module"] else "",
                 leaf_words(d["tensor"], d["module"]) if d["tensor"] else "",
                 f"made at {d['created']}" if d["created"] else ""]
        if not any(parts):  # our engine's node: what it saved (a version changed in place)
            parts = [f"saved {s}" for s in d["saved"] or ()]
        body = f"meta {nm(e.node)} " + ", ".join(p for p in parts if p)
    elif k.startswith("ddp_"):
        body = ddp_words(k, d)
    elif k == "deadlock":  # the explanation's first sentence (it is long; the report has it all)
        first = d["explanation"].removeprefix("Deadlock: ").split(". ", 1)[0].rstrip(".")
        body = f"deadlock: {first}"
    else:
        data = e.data
        body = k + (" " + str(data) if data else "")
    return body


def leaf_words(tensor: object, module: object) -> str:
    """An ``AccumulateGrad``'s tensor (``node_meta``): a parameter has the module that holds
    it (``param fc.weight``); a leaf the program made (``torch.randn(3,
    requires_grad=True)`` in ``q``) has none, and is not a parameter (``leaf q``)."""
    return f"{'param' if module else 'leaf'} {tensor}"


def ddp_words(k: str, d: Any) -> str:
    """A DDP event (``engine/torch_bridge/ddp.py``), on its rank."""
    r, b = d["rank"], d.get("bucket")
    if k == "ddp_bucket_assigned":
        return f"rank {r}: bucket {b} holds {', '.join(d['params'])}"
    if k == "ddp_bucket_ready":
        return f"rank {r}: bucket {b} ready ({', '.join(d['params'])})"
    if k == "ddp_allreduce_start":
        return f"rank {r}: all-reduce of bucket {b} started ({d['hook']})"
    if k == "ddp_allreduce_end":
        return f"rank {r}: all-reduce of bucket {b} finished"
    if k == "ddp_finalize":
        return f"rank {r}: DDP finalizes the backward ({d['buckets']} buckets reduced)"
    if k == "ddp_bucket_never_ready":
        return f"rank {r}: bucket {b} never became ready (no gradient for " \
               f"{', '.join(d['missing']) or '?'})"
    return k


def never_ready_explanation(rank: int, bucket: int, missing: list[str], find_unused: bool,
                            static_graph: bool) -> str:
    """Why a DDP bucket never became ready, what PyTorch will say and when, the fixes."""
    params = ", ".join(missing) or "a parameter"
    why = (f"{params} got no gradient on rank {rank} in this backward "
           f"(not used in producing the loss on this rank), so bucket {bucket} never became "
           "ready: DDP waits for every parameter of a bucket, and launches the buckets in "
           f"order, so neither its all-reduce nor a later bucket's starts on rank {rank}, "
           "and the reducer never queues finalize_backward.")
    if find_unused:
        return plain(why + " find_unused_parameters=True did not mark it ready: was it "
                     "used in the forward but its gradient not reached?")
    return plain(
        why + f" This backward completes on rank {rank} with its local, unaveraged "
        "gradients; the other ranks wait in their backward (finalize_backward) for the "
        f"all-reduce of bucket {bucket}, until the process group's timeout (a hang), or "
        f"fail when rank {rank} exits. At rank {rank}'s next forward, PyTorch raises "
        "\"RuntimeError: Expected to have finished reduction in the prior iteration before "
        "starting a new one\". Fixes: DistributedDataParallel(..., "
        "find_unused_parameters=True) (DDP finds the unused parameters after each forward "
        "and marks them ready at the first hook) or static_graph=True (the first iteration "
        "all-reduces every bucket at the end of the backward and learns which are unused)"
        + ("" if not static_graph else "; static_graph is set, but the set of used "
           "parameters changed since its first iteration") + ".")


def wait_words(on: str, target: object, holder: object = None) -> str:
    """What a thread waits on, as a ``thread_wait`` names it: ``queue cpu``, ``future
    GraphTask 2``, ``lock GraphTask 1 mutex (held by cuda:1)``.  The event log, the
    controller's thread descriptions and the fold's thread states all say it so."""
    return plain(f"{on} {target}" + (f" (held by {holder})" if holder else ""))


def event_line(e: Event, names: dict[int, str] | None = None) -> str:
    """An event without its number: its thread, its GraphTask and its words (the app's
    event log shows the number in a column of its own)."""
    thread = _THREADS.get(e.thread)
    if thread is None:
        if len(_THREADS) > 1024:
            _THREADS.clear()
        thread = _THREADS[e.thread] = f"{plain(e.thread):<18}"
    return f"{thread} {where(e):<5} {event_words(e, names)}"


_THREADS: dict[str, str] = {}  # thread name -> its column, made plain (a few per run)


def format_event(e: Event, names: dict[int, str] | None = None) -> str:
    """One trace line: the event's number k, its thread, its GraphTask and its words."""
    return f"{e.seq:5d} {event_line(e, names)}"

