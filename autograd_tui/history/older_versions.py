"""The older recording formats: version 1's lines, and versions 1 and 2's numbering.

Version 1 wrote ``[seq, kind, thread, graph_task, node, queue, {data}]`` per line;
versions 1 and 2 numbered events from 0 and schedule threads from 0.  A file of
either is read, checked as it was written, and renumbered to today's convention
(event k has seq k; threads count from 1) so that no view knows the difference.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from autograd_tui.engine.events import SCHEMA, Event, make_event
from autograd_tui.history.lines import TraceError, json_line


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
    if kind not in SCHEMA:
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
    missing = [f for f in SCHEMA[kind] if f not in data]
    if missing:
        raise TraceError(f"{where}: {kind} event lacks field(s) {', '.join(missing)}")
    try:
        return make_event(seq, kind, thread, gt, node, queue, data)
    except (TypeError, ValueError, KeyError, IndexError) as e:
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
