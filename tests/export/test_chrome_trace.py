"""The Chrome Trace Event Format export: structure, tracks, counters and flow arrows."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from typing import Any

import graphs
import pytest

from autograd_tui import engine, scenarios
from autograd_tui.control import Controller
from autograd_tui.engine.events import Event, make_event
from autograd_tui.export.chrome_trace import PID, PROCESS_NAME, to_chrome_trace, write_chrome_trace
from autograd_tui.history import recordings as trace
from autograd_tui.session.run import Run
from autograd_tui.words import event_words, node_label, node_names

pytestmark = pytest.mark.timeout(120)

PHASES = {"X", "B", "E", "i", "I", "C", "s", "t", "f", "M"}


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def validate(t: dict[str, Any]) -> dict[str, Any]:
    """Check ``t`` against the Trace Event Format (JSON object format); return the flows
    by id and the slices by tid for further checks."""
    assert set(t) >= {"traceEvents", "displayTimeUnit", "metadata"}
    assert t["displayTimeUnit"] in ("ms", "ns")
    assert isinstance(t["metadata"], dict) and "logical" in t["metadata"]["clock"]
    evs = t["traceEvents"]
    assert isinstance(evs, list) and evs
    named_threads: set[tuple[int, int]] = set()
    named_processes: set[int] = set()
    used: set[tuple[int, int]] = set()
    open_be: dict[int, list[str]] = defaultdict(list)
    slices: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    instants: dict[int, set[float]] = defaultdict(set)
    flows: dict[Any, dict[str, dict[str, Any]]] = defaultdict(dict)
    for ev in evs:
        ph = ev.get("ph")
        assert ph in PHASES, ev
        assert isinstance(ev.get("name"), str) and ev["name"], ev
        assert isinstance(ev.get("pid"), int) and not isinstance(ev["pid"], bool), ev
        assert isinstance(ev.get("tid"), int) and not isinstance(ev["tid"], bool), ev
        assert _num(ev.get("ts")) and ev["ts"] >= 0, ev
        if "args" in ev:
            assert isinstance(ev["args"], dict), ev
        if ph == "M":
            assert ev["name"] in ("process_name", "thread_name", "thread_sort_index",
                                  "process_sort_index"), ev
            if ev["name"] == "thread_name":
                assert isinstance(ev["args"]["name"], str) and ev["args"]["name"]
                named_threads.add((ev["pid"], ev["tid"]))
            elif ev["name"] == "process_name":
                named_processes.add(ev["pid"])
            continue
        used.add((ev["pid"], ev["tid"]))
        if ph == "X":
            assert _num(ev.get("dur")) and ev["dur"] >= 0, ev
            slices[ev["tid"]].append((ev["ts"], ev["ts"] + ev["dur"], ev["name"]))
        elif ph == "B":
            open_be[ev["tid"]].append(ev["name"])
        elif ph == "E":
            assert open_be[ev["tid"]], f"E without B on tid {ev['tid']}: {ev}"
            open_be[ev["tid"]].pop()
        elif ph in ("i", "I"):
            assert ev.get("s", "t") in ("t", "p", "g"), ev
            instants[ev["tid"]].add(ev["ts"])
        elif ph == "C":
            assert isinstance(ev.get("args"), dict) and ev["args"], ev
            assert all(_num(v) for v in ev["args"].values()), ev
        elif ph in ("s", "t", "f"):
            assert "id" in ev and isinstance(ev.get("cat"), str), ev
            if ph == "f":
                assert ev.get("bp") == "e", ev
            assert ph not in flows[ev["id"]], f"flow {ev['id']} has two {ph!r} events"
            flows[ev["id"]][ph] = ev
    assert not any(open_be.values()), f"unbalanced B/E: {dict(open_be)}"
    assert used <= named_threads, f"tracks without thread_name: {used - named_threads}"
    assert {pid for pid, _ in used} <= named_processes
    # slices on one track nest: no partial overlap
    for tid, ss in slices.items():
        stack: list[tuple[float, float, str]] = []
        for s in sorted(ss, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1][1] <= s[0] and not stack[-1][1] == s[0] == stack[-1][0]:
                stack.pop()
            if stack:
                assert s[1] <= stack[-1][1], f"tid {tid}: {s} overlaps {stack[-1]}"
            stack.append(s)
    # every flow has a start and an end with the same id, cat and name, in time order,
    # each inside a slice of its track (bp "e": the enclosing slice) and at an instant
    for fid, ends in flows.items():
        assert set(ends) == {"s", "f"}, f"flow {fid}: {sorted(ends)}"
        s, f = ends["s"], ends["f"]
        assert (s["cat"], s["name"]) == (f["cat"], f["name"]), (s, f)
        assert s["ts"] <= f["ts"], (s, f)
        for ev in (s, f):
            bound = ev["ts"] in instants[ev["tid"]] and any(
                a <= ev["ts"] < b for a, b, _ in slices[ev["tid"]])
            assert bound, f"flow {fid} {ev['ph']} binds to nothing: {ev}"
    # JSON round trip, without NaN or Infinity
    assert json.loads(json.dumps(t, allow_nan=False)) == t
    return {"flows": flows, "slices": slices}


def thread_names(t: dict[str, Any]) -> dict[int, str]:
    return {ev["tid"]: ev["args"]["name"] for ev in t["traceEvents"]
            if ev["ph"] == "M" and ev["name"] == "thread_name"}


def run_controlled(program, **engine_opts) -> list[Event]:
    ctl = Controller(engine.Engine(**engine_opts), policy="random", seed=0)
    events: list[Event] = []
    ctl.subscribe(events.append)
    try:
        ctl.start(program)
        result = ctl.run()
        assert result.status == "finished", result
        assert ctl.program_error is None, ctl.program_error
    finally:
        assert ctl.close()
    return sorted(events, key=lambda e: e.seq)


# --- a basic run ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def linear_relu() -> tuple[list[Event], dict[str, Any]]:
    run = Run(scenarios.get("linear-relu"), policy="random", seed=0)
    try:
        assert run.run().status == "finished"
        return list(run.events), run.header()
    finally:
        assert run.close()


def test_linear_relu_structure(linear_relu):
    events, header = linear_relu
    t = to_chrome_trace(events, header)
    validate(t)
    evs = t["traceEvents"]
    assert t["displayTimeUnit"] == "ms"
    assert t["metadata"]["scenario"]["name"] == "linear-relu"
    assert t["metadata"]["events"] == len(events)
    assert [ev["args"]["name"] for ev in evs if ev["name"] == "process_name"] == [PROCESS_NAME]
    assert all(ev["pid"] == PID for ev in evs)
    assert set(thread_names(t).values()) == {e.thread for e in events}
    # one node slice per node execution, named as words.py names the node, spanning
    # start..end
    nodes = [ev for ev in evs if ev["ph"] == "X" and ev["cat"] == "node"]
    starts = [e for e in events if e.kind == "node_start"]
    ends = {e.node: e for e in events if e.kind == "node_end"}
    assert sorted((ev["ts"], ev["name"]) for ev in nodes) == \
        sorted((e.seq, node_label(e.data["name"], e.node)) for e in starts)
    for ev in nodes:
        a = ev["args"]
        assert ev["ts"] + ev["dur"] == ends[a["node"]].seq
        assert {"graph_task", "node", "inputs", "outputs"} <= set(a)
    # instants for push / pop / dependency_decrement / buffer_accumulate, at ts = seq
    instants = {ev["ts"]: ev for ev in evs if ev["ph"] == "i"}
    for e in events:
        if e.kind in ("push", "pop", "dependency_decrement", "buffer_accumulate"):
            assert instants[e.seq]["cat"] == e.kind
            assert instants[e.seq]["s"] == "t"
    relu_push = next(e for e in events if e.kind == "push" and e.node is not None
                     and instants[e.seq]["name"].startswith("push ReluBackward0"))
    assert instants[relu_push.seq]["name"] == event_words(relu_push, node_names(events))
    assert instants[relu_push.seq]["name"].startswith(f"push ReluBackward0#{relu_push.node} -> cpu")
    # counters follow the queue length and outstanding_tasks exactly
    q = [(ev["ts"], ev["args"]["size"]) for ev in evs
         if ev["ph"] == "C" and ev["name"] == "ReadyQueue cpu"]
    assert q == [(e.seq, e.data["size"]) for e in events if e.kind in ("push", "pop")]
    out = [(ev["ts"], ev["args"]["outstanding_tasks"]) for ev in evs
           if ev["ph"] == "C" and ev["name"] == "GraphTask 1 outstanding_tasks"]
    want = [(e.seq, e.data["outstanding"]) for e in events
            if e.kind in ("push", "outstanding_decrement", "completion")]
    assert out == want and out[-1][1] == 0
    # no reentrancy, no other thread: no arrows
    assert t["metadata"]["flows"] == 0
    assert not [ev for ev in evs if ev["ph"] in ("s", "f")]


def test_events_in_any_order_give_the_same_trace(linear_relu):
    events, header = linear_relu
    assert to_chrome_trace(list(reversed(events)), header) == to_chrome_trace(events, header)


def test_a_loaded_recording_exports(linear_relu, tmp_path):
    events, header = linear_relu
    p = tmp_path / "r.jsonl.gz"
    trace.save(p, header, events, {"schedule": ""})
    rec = trace.load(p)
    assert to_chrome_trace(rec.events, rec.header) == to_chrome_trace(events, header)


def test_truncated_run_closes_its_slices(linear_relu):
    events, _ = linear_relu
    cut = next(i for i, e in enumerate(events) if e.kind == "node_start") + 1
    t = to_chrome_trace(events[:cut])
    validate(t)
    open_ = [ev for ev in t["traceEvents"] if ev["ph"] == "X" and ev["args"].get("unfinished")]
    assert {ev["cat"] for ev in open_} == {"node", "task"}
    assert to_chrome_trace([])["traceEvents"][0]["name"] == "process_name"


# --- reentrant backward through the pool ----------------------------------------------------
def test_reentrant_pool_handoffs_are_arrows():
    events = run_controlled(graphs.deep_reentrant, max_recursion_depth=2)
    handoffs = [e for e in events if e.kind == "reentrant_handoff"]
    modes = Counter(e.data["mode"] for e in handoffs)
    assert modes["pool"] >= 2 and modes["nested"] >= 2, modes
    t = to_chrome_trace(events)
    v = validate(t)
    names = thread_names(t)
    assert {"cpu (owner)", "reentrant-pool-1"} <= set(names.values())
    flows = [f for f in v["flows"].values() if f["s"]["cat"] == "reentrant"]
    assert len(flows) == len(handoffs) == t["metadata"]["reentrant_flows"]
    pool = [f for f in flows if f["s"]["name"] == "reentrant pool hand-off"]
    assert len(pool) == modes["pool"]
    first_pop = {}
    for e in events:
        if e.kind == "pop":
            first_pop.setdefault(e.graph_task, e)
    for h in handoffs:
        f = next(f for f in flows if f["s"]["ts"] == h.seq)
        pop = first_pop[h.graph_task]
        assert names[f["s"]["tid"]] == h.thread
        assert (f["f"]["ts"], names[f["f"]["tid"]]) == (pop.seq, pop.thread)
        if h.data["mode"] == "pool":
            assert names[f["f"]["tid"]].startswith("reentrant-pool-")
            assert f["f"]["tid"] != f["s"]["tid"]
        else:
            assert f["f"]["tid"] == f["s"]["tid"]
    # the parent waits on the pool GraphTask's future: a wait slice on its track
    waits = [ev for ev in t["traceEvents"] if ev["ph"] == "X" and ev["cat"] == "wait"
             and ev["name"].startswith("wait on future")]
    assert len(waits) == modes["pool"]
    # every node ran inside its task on one track
    node_slices = sum(1 for ev in t["traceEvents"] if ev["ph"] == "X" and ev["cat"] == "node")
    assert node_slices == sum(1 for e in events if e.kind == "node_start")


def test_wakeup_task_is_an_arrow_to_the_owner():
    events = run_controlled(graphs.device_last)
    wakeups = [e for e in events if e.kind == "wakeup"]
    assert len(wakeups) == 1
    t = to_chrome_trace(events)
    v = validate(t)
    names = thread_names(t)
    (f,) = [f for f in v["flows"].values() if f["s"]["cat"] == "wakeup"]
    dummy_pop = next(e for e in events if e.kind == "pop" and e.data["dummy"])
    assert (names[f["s"]["tid"]], f["s"]["ts"]) == (wakeups[0].thread, wakeups[0].seq)
    assert (names[f["f"]["tid"]], f["f"]["ts"]) == ("cpu (owner)", dummy_pop.seq)
    assert {"cuda:0", "cuda:1"} <= set(names.values())
    assert {ev["name"] for ev in t["traceEvents"] if ev["ph"] == "C"} >= {
        "ReadyQueue cpu", "ReadyQueue cuda:0", "ReadyQueue cuda:1"}


def test_errors_end_the_node_slice():
    class Boom(engine.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("boom")

    def program():
        x = engine.tensor([1.0], requires_grad=True)
        try:
            Boom.apply(x * 2).sum().backward()
        except RuntimeError:
            pass

    events = run_controlled(program)
    err = next(e for e in events if e.kind == "error")
    t = to_chrome_trace(events)
    validate(t)
    (s,) = [ev for ev in t["traceEvents"] if ev["ph"] == "X" and ev["cat"] == "node"
            and ev["args"]["node"] == err.node]
    assert s["ts"] + s["dur"] == err.seq and "boom" in s["args"]["error"]


# --- writing --------------------------------------------------------------------------------
def test_write_plain_and_gzip(linear_relu, tmp_path):
    events, header = linear_relu
    want = to_chrome_trace(events, header)
    p = tmp_path / "t.json"
    n = write_chrome_trace(p, events, header)
    assert n == p.stat().st_size and json.loads(p.read_bytes()) == want
    g = tmp_path / "t.json.gz"
    write_chrome_trace(g, events, header)
    assert json.loads(gzip.decompress(g.read_bytes())) == want
    assert sorted(x.name for x in tmp_path.iterdir()) == ["t.json", "t.json.gz"]


def test_write_errors_are_clear_and_lose_nothing(linear_relu, tmp_path):
    events, header = linear_relu
    with pytest.raises(trace.TraceError, match="folder .* does not exist") as err:
        write_chrome_trace(tmp_path / "no" / "such" / "t.json", events, header)
    assert "\n" not in str(err.value)
    with pytest.raises(trace.TraceError, match="it is a directory"):
        write_chrome_trace(tmp_path, events, header)
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(trace.TraceError, match="cannot write"):
        write_chrome_trace(a_file / "t.json", events, header)
    target = tmp_path / "keep.json"
    target.write_bytes(b"precious")
    bad = make_event(10**6, "hook", "t", None, None, None,
                {"hook_kind": "pre", "modified": False, "name": float("nan")})
    with pytest.raises(trace.TraceError, match="cannot write"):
        write_chrome_trace(target, events + [bad], header)
    assert target.read_bytes() == b"precious"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["file", "keep.json"]


# --- the format's documentation ----------------------------------------------------------------
def test_trace_format_doc_lists_every_kind_and_field():
    """docs/trace-format.md lists the data fields of every kind, as in SCHEMA."""
    from pathlib import Path

    from autograd_tui.engine.events import SCHEMA

    text = (Path(__file__).resolve().parents[2] / "docs" / "trace-format.md").read_text(
        encoding="utf-8")
    sections = text.split("\n#### `")[1:]
    documented = {}
    for sec in sections:
        kind, _, body = sec.partition("`")
        body = body.split("\n## ")[0]
        documented[kind] = {
            cells[0].strip("` "): cells[1].strip("` ").replace("\\|", "|")
            for line in body.splitlines() if line.startswith("| `")
            for cells in [[c for c in line.replace("\\|", "\0").split("|")[1:-1]]]
            for cells in [[c.replace("\0", "\\|") for c in cells]]
        }
    assert set(documented) == set(SCHEMA)
    for kind, fields in SCHEMA.items():
        assert documented[kind] == {f: t for f, (t, _) in fields.items()}, kind
    assert f"`{trace.FORMAT}`" in text and f"version {trace.VERSION}" in text


# --- every built-in scenario ------------------------------------------------------------------
@pytest.mark.parametrize("name", scenarios.names())
def test_every_scenario_exports_a_valid_trace(name):
    run = Run(scenarios.get(name), policy="random", seed=0)
    try:
        result = run.run()
        assert result.status in ("finished", "deadlock"), result
        events, header = list(run.events), run.header()
    finally:
        assert run.close()
    t = to_chrome_trace(events, header)
    v = validate(t)
    assert set(thread_names(t).values()) == {e.thread for e in events}
    kinds = Counter(e.kind for e in events)
    node_slices = sum(1 for ev in t["traceEvents"] if ev["ph"] == "X" and ev["cat"] == "node")
    assert node_slices == kinds["node_start"]
    assert t["metadata"]["reentrant_flows"] <= kinds["reentrant_handoff"]
    assert t["metadata"]["wakeup_flows"] <= kinds["wakeup"]
    assert len(v["flows"]) == t["metadata"]["flows"]


def test_reentrant_deep_scenario_hands_off_to_the_pool():
    scenario = scenarios.get("reentrant-deep")
    run = Run(scenario, {"depth": 130}, policy="random", seed=0,
              engine_overrides={"max_recursion_depth": 60})
    try:
        assert run.run().status == "finished"
        events = list(run.events)
    finally:
        assert run.close()
    pool = [e for e in events if e.kind == "reentrant_handoff" and e.data["mode"] == "pool"]
    assert len(pool) >= 2
    t = to_chrome_trace(events, run.header())
    v = validate(t)
    names = thread_names(t)
    arrows = [f for f in v["flows"].values() if f["s"]["name"] == "reentrant pool hand-off"]
    assert len(arrows) == len(pool)
    assert all(names[f["f"]["tid"]].startswith("reentrant-pool-") for f in arrows)
