"""The older recording formats: version 1's lines, versions 1 and 2's numbering, and
versions 1 to 3's push events.

Version 1 wrote ``[seq, kind, thread, graph_task, node, queue, {data}]`` per line;
versions 1 and 2 numbered events from 0 and schedule threads from 0.  Versions 1 to
3 listed the whole queue in every ``push`` (``order``), had no ``gone`` in ``push``
and ``pop``, and no ``depth_priority`` in ``graph_task_created``.  A file of any of
them is read, checked as it was written, and brought to today's events and
numbering (event k has seq k; threads count from 1) so that no view knows the
difference: ``gone`` is found where a task of a finished GraphTask first shows as
expired, ``depth_priority`` comes from the header's engine options.

Version 4 needs nothing here: version 5 only added DDP's kinds (``ddp_*``) and the
header's ``distributed``, so a version 4 file is read by version 5's reader, as it was
(one written by the release that added them before the version was bumped may hold them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from autograd_tui.engine.events import EVENT_TYPES, SCHEMA, Event, make_event, make_types
from autograd_tui.engine.ready_queue import INT_MAX
from autograd_tui.history.lines import TraceError, json_line

_ORDER = "list[[int|null,int|null,int,int|null]]"
#: the kinds whose fields changed in version 4, as versions 1 to 3 wrote them
V3_CHANGED = {
    "graph_task_created": {k: v for k, v in SCHEMA["graph_task_created"].items()
                           if k != "depth_priority"},
    "push": {"depth": SCHEMA["push"]["depth"], "seq": SCHEMA["push"]["seq"],
             "dummy": SCHEMA["push"]["dummy"], "shutdown": SCHEMA["push"]["shutdown"],
             "size": SCHEMA["push"]["size"],
             "order": (_ORDER, "the queue after the push, in pop order: "
                               "[graph_task, node, depth, seq] per task"),
             "outstanding": SCHEMA["push"]["outstanding"]},
    "pop": {k: v for k, v in SCHEMA["pop"].items() if k != "gone"},
}
V3_SCHEMA = {**SCHEMA, **V3_CHANGED}
_ORDER_TYPE = list[tuple[int | None, int | None, int, int | None]]
_OLD = make_types(V3_CHANGED, {_ORDER: _ORDER_TYPE})
#: kind -> event class, for versions 1 to 3 (the unchanged kinds are today's)
V3_EVENT_TYPES = {**EVENT_TYPES, **_OLD}


def decode_v1(p: Path, body: memoryview) -> list[Event]:
    """Version 1: ``[seq, kind, thread, graph_task, node, queue, {data}]`` per line."""
    lines = bytes(body).split(b"\n")[:-1]
    try:
        objs = json.loads(b"[" + b",".join(lines) + b"]")
        if len(objs) != len(lines):
            raise ValueError
    except (UnicodeDecodeError, ValueError):
        objs = [json_line(p, i, line) for i, line in enumerate(lines, 2)]
    return [event_v1(p, lineno, obj) for lineno, obj in enumerate(objs, 2)]


def event_v1(p: Path, lineno: int, obj: Any) -> Event:
    where = f"{p}, line {lineno}"
    if not isinstance(obj, list) or len(obj) != 7:
        raise TraceError(f"{where}: an event must be a list of 7 fields "
                         "[seq, kind, thread, graph_task, node, queue, data]")
    seq, kind, thread, gt, node, queue, data = obj
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise TraceError(f"{where}: seq must be a non-negative integer, not {seq!r}")
    if kind not in V3_SCHEMA:
        raise TraceError(f"{where}: unknown event kind {kind!r}")
    if not isinstance(thread, str):
        raise TraceError(f"{where}: thread must be a string")
    for name, v in (("graph_task", gt), ("node", node)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
            raise TraceError(f"{where}: {name} must be an integer or null, not {v!r}")
    if queue is not None and not isinstance(queue, str):
        raise TraceError(f"{where}: queue must be a string or null")
    if not isinstance(data, dict):
        raise TraceError(f"{where}: data must be an object")
    missing = [f for f in V3_SCHEMA[kind] if f not in data]
    if missing:
        raise TraceError(f"{where}: {kind} event lacks field(s) {', '.join(missing)}")
    try:
        if kind == "push":  # make_event converts no field of this type: check it here
            data = {**data, "order": msgspec.convert(data["order"], _ORDER_TYPE)}
        return make_event(seq, kind, thread, gt, node, queue, data, V3_EVENT_TYPES)
    except (TypeError, ValueError, KeyError, IndexError, msgspec.ValidationError) as e:
        raise TraceError(f"{where}: malformed {kind} event ({e})") from None


def renumber(events: list[Event], footer: dict[str, Any]
              ) -> tuple[list[Event], dict[str, Any]]:
    """A version 1 or 2 recording in today's numbering: event k gets seq k, and the
    schedule's threads count from 1 (they counted from 0)."""
    events = [msgspec.structs.replace(e, seq=k) for k, e in enumerate(events, 1)]
    sched = footer.get("schedule")
    if isinstance(sched, str) and sched.strip():
        try:
            runs = [part.partition(":") for part in sched.strip().split(",")]
            footer = {**footer, "schedule": ",".join(
                f"{int(c) + 1}{sep}{n}" for c, sep, n in runs)}
        except ValueError:
            pass  # a bad schedule stays as it is: re-executing it says what is wrong
    return events, footer


_GTC, _PUSH, _POP = (EVENT_TYPES[k] for k in ("graph_task_created", "push", "pop"))
_OLD_GTC, _OLD_PUSH, _OLD_POP = (_OLD[k] for k in ("graph_task_created", "push", "pop"))


def upgrade_v3(events: list[Event], header: dict[str, Any]) -> list[Event]:
    """Versions 1 to 3's push, pop and graph_task_created as today's (in place)."""
    engine = header.get("engine")
    depth_priority = engine.get("depth_priority", True) if isinstance(engine, dict) else True
    depth_priority = depth_priority if isinstance(depth_priority, bool) else True
    node_gt: dict[int, int] = {}  # the GraphTask each node was last pushed for
    freed: set[int] = set()

    def gone(tasks: Any) -> list[int]:
        out = []
        for gid, node, depth, _ in tasks:
            g = node_gt.get(node) if gid is None and depth == INT_MAX else None
            if g is not None and g not in freed:
                freed.add(g)
                out.append(g)
        return out

    for i, e in enumerate(events):
        t = type(e)
        if t is _OLD_PUSH:
            if e.node is not None and e.graph_task is not None:
                node_gt[e.node] = e.graph_task
            events[i] = _PUSH(e.seq, e.thread, e.graph_task, e.node, e.queue, e.depth,
                              e.seq_nr, e.dummy, e.shutdown, e.size, e.outstanding,
                              gone(e.order))
        elif t is _OLD_POP:
            expired = [(None, e.node, INT_MAX, None)] if e.expired else []
            events[i] = _POP(e.seq, e.thread, e.graph_task, e.node, e.queue, e.dummy,
                             e.shutdown, e.size, e.expired, gone(expired))
        elif t is _OLD_GTC:
            events[i] = _GTC(*msgspec.structs.astuple(e), depth_priority)
    return events
