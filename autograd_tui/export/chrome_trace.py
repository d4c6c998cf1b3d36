"""Export a run's events to Chrome's Trace Event Format (Perfetto, chrome://tracing).

Not in PyTorch.  ``to_chrome_trace(events, header)`` turns a list of engine
events (a live run's ``Run.events`` or a loaded ``Recording.events``) into the
JSON *object* format of the Trace Event Format::

    {"traceEvents": [...], "displayTimeUnit": "ms", "metadata": {...}}

and ``write_chrome_trace(path, events, header)`` writes it (atomically; gzip if
the name ends in ``.gz``).  Open the file in https://ui.perfetto.dev or
chrome://tracing.  What is drawn (``docs/trace-format.md`` has the details):

* one process, "autograd engine" (pid 1), and one track (tid) per engine thread,
  named by ``thread_name`` metadata events, in order of first appearance;
* **slices** ("X") on the thread's track: each node's execution from
  ``node_start`` to ``node_end`` (or ``error``), named after the node
  (``words.node_label``: ``ReluBackward0#4``); around it
  the thread_main *task* from ``pop`` to ``outstanding_decrement`` (or to the
  ``completion``, ``wakeup`` and dummy ``push`` that follow it); and the
  thread's waits from ``thread_wait`` to ``thread_wake``;
* **instant events** ("i", thread scope), named as every view words the event
  (``words.event_words``: ``push ReluBackward0#4 -> cpu (depth 0, seq 2, size 1)``),
  for the other events: ``push``,
  ``pop``, ``dependency_decrement``, ``buffer_accumulate``, ``not_ready_*``,
  ``graph_task_created``, ``completion``, ``wakeup``, ``reentrant_handoff``, ...;
* **counters** ("C"): each ReadyQueue's length (``push``/``pop`` ``size``) and each
  GraphTask's ``outstanding_tasks`` (``push``, ``outstanding_decrement``,
  ``completion``);
* **flow arrows** ("s" -> "f", ``bp: "e"``): each reentrant hand-off, from the
  ``reentrant_handoff`` event on the parent's thread to the first ``pop`` of the
  new GraphTask's task on the thread that runs it, and each wake-up task, from the
  ``wakeup`` event to the owner's ``pop`` of the dummy task.

Events carry no wall-clock time.  The timestamp of an event is its ``seq``,
read as microseconds: the picture shows *logical* time (one event = 1 µs), and a
slice's duration is the number of events it spans.  ``metadata["clock"]`` says so.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from autograd_tui.engine.events import Event
from autograd_tui.files import CannotWrite, write_bytes
from autograd_tui.history.recordings import TraceError
from autograd_tui.words import event_words, node_label

PID = 1
PROCESS_NAME = "autograd engine"
CLOCK_NOTE = ("logical: ts is the event's seq number shown as microseconds (1 µs = one "
              "engine event); durations count events, not wall-clock time")

# Sort rank at equal ts: slices first (so instants and flows at the same ts nest in
# them), then instants, counters, and flows last (they bind to what is already open).
PHASE_ORDER = {"M": -1, "X": 0, "B": 0, "i": 1, "C": 2, "s": 3, "f": 3}


class _Slice:
    __slots__ = ("cat", "key", "name", "ts", "args")

    def __init__(self, cat: str, key: Any, name: str, ts: int, args: dict[str, Any]) -> None:
        self.cat, self.key, self.name, self.ts, self.args = cat, key, name, ts, args


class _Builder:
    def __init__(self, pid: int = PID, first_flow: int = 0) -> None:
        self.pid = pid
        self.out: list[dict[str, Any]] = []
        self.tids: dict[str, int] = {}
        self.names: dict[int, str] = {}
        self.stacks: dict[int, list[_Slice]] = {}
        self.flow_ids = first_flow  # flow ids are global to a file: one run's follow another's
        # GraphTask id -> (flow id, name) of a reentrant hand-off waiting for its first pop
        self.handoffs: dict[int, tuple[int, str]] = {}
        # (GraphTask id, queue) -> [flow id] of wake-up tasks waiting for their dummy pop
        self.wakeups: dict[tuple[int | None, str | None], list[int]] = {}
        # tid -> (task slice, GraphTask id, end ts): a task slice that ended at its
        # outstanding_decrement but stays open for the completion / wake-up that follow
        self.ending: dict[int, tuple[_Slice, int | None, int]] = {}
        self.counts = {"slices": 0, "instants": 0, "counters": 0, "flows": 0,
                       "reentrant_flows": 0, "wakeup_flows": 0, "unfinished_slices": 0}
        self.last_ts = 0

    # --- helpers ----------------------------------------------------------------------------
    def tid(self, thread: str) -> int:
        t = self.tids.get(thread)
        if t is None:
            t = self.tids[thread] = len(self.tids) + 1
            self.stacks[t] = []
        return t

    def instant(self, e: Event, tid: int, name: str, args: dict[str, Any]) -> None:
        self.counts["instants"] += 1
        self.out.append({"ph": "i", "s": "t", "name": name, "cat": e.kind, "pid": self.pid,
                         "tid": tid, "ts": e.seq, "args": args})

    def counter(self, name: str, cat: str, tid: int, ts: int, key: str, value: int) -> None:
        self.counts["counters"] += 1
        self.out.append({"ph": "C", "name": name, "cat": cat, "pid": self.pid, "tid": tid,
                         "ts": ts, "args": {key: value}})

    def flow(self, ph: str, fid: int, name: str, cat: str, tid: int, ts: int) -> None:
        ev: dict[str, Any] = {"ph": ph, "id": fid, "name": name, "cat": cat, "pid": self.pid,
                              "tid": tid, "ts": ts}
        if ph == "f":
            ev["bp"] = "e"
        self.out.append(ev)

    def open(self, tid: int, cat: str, key: Any, name: str, ts: int,
             args: dict[str, Any]) -> None:
        self.stacks[tid].append(_Slice(cat, key, name, ts, args))

    def _emit_slice(self, tid: int, s: _Slice, end: int, unfinished: bool) -> None:
        if unfinished:
            s.args["unfinished"] = True
            self.counts["unfinished_slices"] += 1
        self.counts["slices"] += 1
        self.out.append({"ph": "X", "name": s.name, "cat": s.cat, "pid": self.pid, "tid": tid,
                         "ts": s.ts, "dur": max(end - s.ts, 0), "args": s.args})

    def close(self, tid: int, cat: str, key: Any, ts: int) -> _Slice | None:
        """Close the innermost open ``cat`` slice with ``key`` (and anything opened inside
        it and left open, marked unfinished).  None if there is no such slice."""
        stack = self.stacks[tid]
        for i in range(len(stack) - 1, -1, -1):
            if stack[i].cat == cat and stack[i].key == key:
                break
        else:
            return None
        while len(stack) > i + 1:
            self._emit_slice(tid, stack.pop(), ts, True)
        s = stack.pop()
        self._emit_slice(tid, s, ts, False)
        return s

    def end_task(self, tid: int) -> None:
        s, _, end = self.ending.pop(tid)
        if self.close(tid, "task", s.key, end) is not None:
            s.args["end_seq"] = end

    def close_all(self, tid: int, ts: int) -> None:
        if tid in self.ending:
            self.end_task(tid)
        stack = self.stacks[tid]
        while stack:
            self._emit_slice(tid, stack.pop(), ts, True)

    # --- one event --------------------------------------------------------------------------
    def add(self, e: Event) -> None:
        tid = self.tid(e.thread)
        d = e.data
        k = e.kind
        ts = e.seq
        ending = self.ending.get(tid)
        if ending is not None:
            s, egt, _ = ending
            if e.graph_task == egt and egt is not None and (
                    k in ("completion", "wakeup") or (k == "push" and d.get("dummy"))):
                self.ending[tid] = (s, egt, ts)  # thread_main's same iteration: extend
            else:
                self.end_task(tid)
        self.last_ts = max(self.last_ts, ts)
        gt = e.graph_task
        base: dict[str, Any] = {"seq": e.seq, "graph_task": gt, "node": e.node}
        if e.queue is not None:
            base["queue"] = e.queue

        if k == "dependencies_computed":
            for n in d.get("nodes", ()):
                self.names[n["id"]] = n["name"]
            self.instant(e, tid, event_words(e, self.names),
                         {**base, "nodes": len(d.get("nodes", ())),
                          "dependencies": d.get("dependencies", [])[:64],
                          "min_topo_nr": d.get("min_topo_nr")})
        elif k == "node_start":
            name = d.get("name") or "node"
            if e.node is not None:
                self.names[e.node] = name
            self.open(tid, "node", e.node, node_label(name, e.node), ts,
                      {**base, "depth": d.get("depth"), "inputs": d.get("inputs")})
        elif k == "node_end":
            s = self.close(tid, "node", e.node, ts)
            if s is not None:
                s.args["outputs"] = d.get("outputs")
                if d.get("leaf_grad") is not None:
                    s.args["leaf_grad"] = d["leaf_grad"]
                s.args["end_seq"] = e.seq
        elif k == "error":
            s = self.close(tid, "node", e.node, ts) if e.node is not None else None
            if s is not None:
                s.args["error"] = event_words(e, self.names)
                s.args["end_seq"] = e.seq
            self.instant(e, tid, event_words(e, self.names), {**base, **d})
        elif k == "push":
            self.instant(e, tid, event_words(e, self.names),
                         {**base, **{f: d.get(f) for f in
                                     ("depth", "seq", "dummy", "shutdown", "size",
                                      "outstanding")}})
            self.counter(f"ReadyQueue {e.queue}", "queue", tid, ts, "size", d.get("size", 0))
            if gt is not None and not d.get("shutdown"):
                self.counter(f"GraphTask {gt} outstanding_tasks", "graph_task", tid, ts,
                             "outstanding_tasks", d.get("outstanding", 0))
        elif k == "pop":
            shutdown, expired, dummy = d.get("shutdown"), d.get("expired"), d.get("dummy")
            self.instant(e, tid, event_words(e, self.names),
                         {**base, "dummy": dummy, "shutdown": shutdown, "size": d.get("size"),
                          "expired": expired})
            self.counter(f"ReadyQueue {e.queue}", "queue", tid, ts, "size", d.get("size", 0))
            if not shutdown and not expired:
                task = ("wake-up task" if e.node is None
                        else f"task {node_label(self.names.get(e.node), e.node)}")
                self.open(tid, "task", (gt, e.node), task, ts,
                          {**base, "dummy": dummy})
            if shutdown:
                return
            if dummy:
                pending = self.wakeups.get((gt, e.queue))
                if pending:
                    self.flow("f", pending.pop(0), "wake-up task", "wakeup", tid, ts)
            elif gt in self.handoffs:
                fid, name = self.handoffs.pop(gt)  # type: ignore[arg-type]
                self.flow("f", fid, name, "reentrant", tid, ts)
        elif k == "outstanding_decrement":
            stack = self.stacks[tid]
            if stack and stack[-1].cat == "task" and stack[-1].key == (gt, e.node):
                self.ending[tid] = (stack[-1], gt, ts)  # closed by the next event
            else:
                s = self.close(tid, "task", (gt, e.node), ts)
                if s is not None:
                    s.args["end_seq"] = e.seq
            if gt is not None:
                self.counter(f"GraphTask {gt} outstanding_tasks", "graph_task", tid, ts,
                             "outstanding_tasks", d.get("outstanding", 0))
        elif k == "thread_wait":
            self.open(tid, "wait", None, event_words(e, self.names), ts, {**base, **d})
        elif k == "thread_wake":
            s = self.close(tid, "wait", None, ts)
            if s is not None:
                s.args["end_seq"] = e.seq
        elif k == "thread_exit":
            self.close_all(tid, ts)
            self.instant(e, tid, event_words(e, self.names), base)
        elif k == "reentrant_handoff":
            mode = d.get("mode")
            self.instant(e, tid, event_words(e, self.names), {**base, **d})
            if gt is not None:
                self.flow_ids += 1
                name = f"reentrant {mode} hand-off"
                self.flow("s", self.flow_ids, name, "reentrant", tid, ts)
                self.handoffs[gt] = (self.flow_ids, name)
                self.counts["flows"] += 1
                self.counts["reentrant_flows"] += 1
        elif k == "wakeup":
            owner = d.get("owner", e.queue)
            self.instant(e, tid, event_words(e, self.names), {**base, **d})
            self.flow_ids += 1
            self.flow("s", self.flow_ids, "wake-up task", "wakeup", tid, ts)
            self.wakeups.setdefault((gt, owner), []).append(self.flow_ids)
            self.counts["flows"] += 1
            self.counts["wakeup_flows"] += 1
        elif k == "completion":
            self.instant(e, tid, event_words(e, self.names), {**base, **d})
            if gt is not None and "outstanding" in d:
                self.counter(f"GraphTask {gt} outstanding_tasks", "graph_task", tid, ts,
                             "outstanding_tasks", d["outstanding"])
        else:
            self.instant(e, tid, event_words(e, self.names), {**base, **d})

    def finish(self) -> None:
        for tid in list(self.ending):
            self.end_task(tid)
        end = self.last_ts + 1
        for tid in list(self.stacks):
            self.close_all(tid, end)
        # flows whose end never came (a truncated run, or a pop reported before the
        # hand-off): drop their start, which no viewer could bind
        lost_handoffs = {fid for fid, _ in self.handoffs.values()}
        lost_wakeups = {fid for fids in self.wakeups.values() for fid in fids}
        lost = lost_handoffs | lost_wakeups
        if lost:
            self.out = [ev for ev in self.out if not (ev["ph"] == "s" and ev["id"] in lost)]
            self.counts["reentrant_flows"] -= len(lost_handoffs)
            self.counts["wakeup_flows"] -= len(lost_wakeups)
            self.counts["flows"] -= len(lost)


def to_chrome_trace(events: Iterable[Event], header: dict[str, Any] | None = None
                    ) -> dict[str, Any]:
    """The events as a Trace Event Format object (see the module docstring)."""
    b, evs = build_run(events, PID, 0)
    return {"traceEvents": process_meta(b, PID, PROCESS_NAME) + body_of(b), "displayTimeUnit": "ms",
            "metadata": run_metadata(b, evs, header)}


def build_run(events: Iterable[Event], pid: int, first_flow: int) -> tuple[_Builder, list[Event]]:
    evs = sorted(events, key=lambda e: e.seq)
    b = _Builder(pid, first_flow)
    for e in evs:
        b.add(e)
    b.finish()
    return b, evs


def body_of(b: _Builder) -> list[dict[str, Any]]:
    return sorted(b.out, key=lambda ev: (ev["ts"], PHASE_ORDER[ev["ph"]], -ev.get("dur", 0)))


def process_meta(b: _Builder, pid: int, name: str) -> list[dict[str, Any]]:
    """The process's and its threads' names (metadata events)."""
    meta: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0,
         "args": {"name": name}},
    ]
    for thread, tid in b.tids.items():
        meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "ts": 0,
                     "args": {"name": thread}})
        meta.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "ts": 0,
                     "args": {"sort_index": tid}})
    return meta


def run_metadata(b: _Builder, evs: list[Event], header: dict[str, Any] | None
              ) -> dict[str, Any]:
    h = header or {}
    metadata: dict[str, Any] = {
        "source": "autograd-tui",
        "clock": CLOCK_NOTE,
        "events": len(evs),
        "first_seq": evs[0].seq if evs else None,
        "last_seq": evs[-1].seq if evs else None,
        "threads": dict(b.tids),
        **b.counts,
    }
    for key in ("format", "version", "program", "scenario", "engine", "schedule", "tensors",
                "distributed"):
        if key in h:
            metadata["recording_" + key if key in ("format", "version") else key] = h[key]
    return metadata


def write_trace_object(path: str | os.PathLike[str], trace: dict[str, Any]) -> int:
    """Write a trace object (``to_chrome_trace``'s, ``merge_chrome_traces``') to ``path``
    (gzip if it ends in ``.gz``), atomically; the number of bytes written.  Raises
    ``TraceError`` with one clear message if it cannot write."""
    p = Path(path)
    if p.is_dir():
        raise TraceError(f"{p}: cannot write: it is a directory")
    try:
        data = json.dumps(trace, separators=(",", ":"), allow_nan=False).encode()
    except ValueError as e:
        raise TraceError(f"{p}: cannot write: {e}") from None
    if p.name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    try:
        write_bytes(p, data)
    except CannotWrite as e:
        raise TraceError(str(e)) from None
    return len(data)


def write_chrome_trace(path: str | os.PathLike[str], events: Iterable[Event],
                       header: dict[str, Any] | None = None) -> int:
    """Write ``to_chrome_trace(events, header)`` to ``path`` (gzip if it ends in ``.gz``),
    atomically: on failure any existing file is left as it was.  Returns the number of
    bytes written.  Raises ``TraceError`` with one clear message if it cannot write."""
    return write_trace_object(path, to_chrome_trace(events, header))
