"""The one event query (autograd_tui/control/query.py): its parser, its rule for names, and
that a breakpoint, an app jump and the CLI's ``--stop-at`` given the same text stop at the
same events."""

from __future__ import annotations

import re
from typing import Any

import pytest

from autograd_tui import scenarios
from autograd_tui.app.playback import find_event
from autograd_tui.commands import main
from autograd_tui.control import breakpoint_on
from autograd_tui.control.query import EventQuery, QueryError, parse_query
from autograd_tui.engine.events import Event
from autograd_tui.session import Breakpoint, Session
from autograd_tui.session.run import Run
from autograd_tui.words import format_event, node_names

pytestmark = pytest.mark.timeout(120)

NAMES = {4: "ReluBackward0", 5: "LinearBackward0", 6: "LinearBackward0"}


# --- the parser ---------------------------------------------------------------------------------
def test_parse_reads_kinds_nodes_and_fields() -> None:
    q = parse_query("push", NAMES)
    assert q.kind == "push" and q.node is None and q.text == "push"
    assert parse_query("PUSH").kind == "push" and parse_query("kind=Pop").kind == "pop"
    assert parse_query("#5")._id == 5 and parse_query("5")._id == 5
    assert parse_query("LinearBackward0#6", NAMES)._id == 6
    q = parse_query("node_start relubackward0", NAMES)
    assert (q.kind, q.node, q.by_name) == ("node_start", "relubackward0", True)
    q = parse_query("dependency_decrement queue=cpu thread=cuda:1 gt=2 node=push nonfinite")
    assert (q.queue, q.thread, q.graph_task, q.node, q.nonfinite) == (
        "cpu", "cuda:1", 2, "push", True)
    assert parse_query("gt=GT3").graph_task == 3
    # a name no node of the graph so far has: a jump (names given) refuses it, a
    # breakpoint (its nodes may come later) takes it
    assert parse_query("NoSuchBackward0").node == "NoSuchBackward0"
    for bad in ("", "  ", "frobnicate", "push pop", "#5 #6", "Relu", "colour=red", "gt=x",
                "queue=", "kind=no_such_kind"):
        with pytest.raises(QueryError):
            parse_query(bad, NAMES)


def test_a_breakpoint_is_the_query_of_its_fields() -> None:
    assert Breakpoint is EventQuery
    b = Breakpoint(kind="Not_Ready_Insert", node="ReluBackward0", nonfinite=True)
    assert b.kind == "not_ready_insert"
    assert b.describe() == "first non-finite gradient kind=not_ready_insert node=ReluBackward0"
    assert Breakpoint().describe() == "any event"
    with pytest.raises(QueryError, match="unknown event kind 'nope'"):
        Breakpoint(kind="nope")


# --- the rule for names: case-insensitive, exact --------------------------------------------------
def _events(name: str, **params: Any) -> list[Event]:
    with Run(scenarios.get(name), params) as run:
        assert run.run().status == "finished"
        return list(run.events)


def test_names_match_in_any_case_and_exactly() -> None:
    events = _events("linear-relu")
    names = node_names(events)
    relu = [n for n, name in names.items() if name == "ReluBackward0"]
    want = [e.seq for e in events if e.node in relu]
    assert want
    for text in ("ReluBackward0", "relubackward0", "RELUBACKWARD0", "node=reluBackward0"):
        m = parse_query(text).matcher()  # no names given: learnt from the events
        assert [e.seq for e in events if m(e)] == want, text
    assert not any(map(parse_query("Relu").matcher(), events))  # no substring
    assert not any(map(parse_query("ReluBackward").matcher(), events))
    # queues and threads: the same rule
    m = parse_query("push queue=CPU thread=CPU").matcher()
    assert not any(map(m, events))  # the thread is "cpu (owner)", not "cpu"
    m = EventQuery(kind="push", queue="CPU", thread="CPU (Owner)").matcher()
    assert [e.seq for e in events if m(e)] == [e.seq for e in events if e.kind == "push"
                                              and e.queue == "cpu"
                                              and e.thread == "cpu (owner)"]


def test_breakpoint_on_is_the_query() -> None:
    events = _events("linear-relu")
    names = node_names(events)
    for kw in ({"kind": "node_start", "node": "relubackward0"}, {"node": 4},
               {"kind": "push", "queue": "cpu"}, {"graph_task": 1, "kind": "completion"}):
        got = [e.seq for e in events if breakpoint_on(**kw, names=names)(e)]
        assert got == [e.seq for e in events if EventQuery(**kw).matcher(names)(e)]
        assert got, kw


# --- one text, three users: a breakpoint, an app jump, --stop-at ----------------------------------
QUERIES = [
    ("linear-relu", "node_start ReluBackward0"),
    ("linear-relu", "node_start relubackward0"),
    ("linear-relu", "LINEARBACKWARD0"),
    ("linear-relu", "dependency_decrement linearbackward0#6"),
    ("linear-relu", "push queue=CPU"),
    ("linear-relu", "buffer_accumulate accumulategrad"),
    ("multi-device", "dependency_decrement thread=CUDA:1"),
    ("multi-device", "pop queue=cuda:0"),
    ("anomaly-nan", "nonfinite"),
    ("torch-attention", "node_start blocks.0.attn"),  # a module and the modules inside it
    ("torch-attention", "blocks.0.mlp.fc1.weight"),  # a parameter: its AccumulateGrad
    ("torch-attention", "node_end module=blocks.0.ln1"),
]


def _breakpoint_hits(scenario: str, text: str) -> tuple[list[int], list[str]]:
    """Every event a breakpoint with ``text`` stops at (``c`` again and again), and the
    run's event lines."""
    with Run(scenarios.get(scenario)) as run:
        s = Session.from_run(run)
        s.breakpoints = [parse_query(text)]
        hits: list[int] = []
        while (r := s.run_until_breakpoint()).status == "breakpoint":
            hits.append(r.events[-1].seq)
        names = node_names(run.events)
        return hits, [format_event(e, names) for e in run.events]


def _jump_hits(session: Session, text: str) -> list[int]:
    """Every event the app's jump (``/`` then ``]``) shows, as ``ReplayView`` does it."""
    names = node_names(session.events(0, session.count()))
    meta = session.state_at(session.count()).node_meta
    q = parse_query(text, names, meta)
    hits, at = [], 0
    while (k := find_event(session, q, at, True, names=names, meta=meta)) is not None:
        hits.append(k)
        at = k
    return hits


@pytest.mark.parametrize("scenario,text", QUERIES)
def test_a_breakpoint_a_jump_and_stop_at_match_the_same_events(scenario: str, text: str,
                                                                 capsys: Any) -> None:
    hits, lines = _breakpoint_hits(scenario, text)
    assert hits, f"{text!r} matches nothing in {scenario}: a test of nothing"
    # the app's jump, on the same run's history (a second, identical run: round-robin)
    with Run(scenarios.get(scenario)) as run:
        run.run()
        assert [format_event(e, node_names(run.events)) for e in run.events] == lines
        jumps = _jump_hits(Session.from_run(run), text)
    assert jumps == hits
    # the CLI stops at the first: its trace ends with that event's line
    code = main(["run", scenario, "--headless", "--stop-at", text])
    out = capsys.readouterr().out.splitlines()
    assert code == (4 if text == "nonfinite" else 0)
    trace = [line for line in out if re.match(r"\s+\d+ ", line)]
    assert trace == lines[:hits[0]]
    if text != "nonfinite":
        assert f"stopped at event {hits[0]}, the first that {text!r} matches" in out


def test_stop_at_refuses_a_query_it_cannot_read(capsys: Any) -> None:
    assert main(["run", "linear-relu", "--headless", "--stop-at", "push pop"]) == 2
    assert "--stop-at: one event kind at a time (push or pop)" in capsys.readouterr().err


# --- a PyTorch graph: module paths and parameter names -----------------------------------------
def test_module_paths_and_parameter_names_match_by_whole_parts() -> None:
    events = _events("torch-attention")
    meta = {e.node: e.data for e in events if e.kind == "node_meta"}
    names = node_names(events)
    attn = {n for n, m in meta.items()
            if m["module"] and (m["module"] + ".").startswith("blocks.0.attn.")}
    assert {meta[n]["module"] for n in attn} == {"blocks.0.attn", "blocks.0.attn.proj",
                                                 "blocks.0.attn.qkv"}
    want = [e.seq for e in events if e.node in attn and e.kind != "node_meta"]
    assert want
    for text in ("blocks.0.attn", "BLOCKS.0.Attn", "module=blocks.0.attn"):
        m = parse_query(text, names, meta).matcher()  # the graph knows it: a jump takes it
        assert [e.seq for e in events if m(e)] == want, text
    # learnt from the node_meta events, or given (a breakpoint set mid-run)
    late = [e for e in events if e.kind not in ("node_meta", "dependencies_computed")]
    m = parse_query("blocks.0.attn").matcher(names, meta)
    assert [e.seq for e in late if m(e)] == want
    weight = [n for n, x in meta.items() if x["tensor"] == "blocks.0.attn.qkv.weight"]
    assert len(weight) == 1 and names[weight[0]] == "AccumulateGrad"
    for text in ("blocks.0.attn.qkv.weight", "param=blocks.0.attn.qkv.weight"):
        m = parse_query(text).matcher()
        assert {e.node for e in events if m(e)} == set(weight)
    # a parameter's name inside a module: the module's own path matches it too
    m = parse_query("blocks.0.attn.qkv").matcher()
    assert set(weight) <= {e.node for e in events if m(e)}
    # whole parts only, and only paths of this graph
    for bad in ("blocks.0.att", "blocks.00", "locks.0.attn", "module=blocks.1",
                "param=blocks.0.attn.qkv.w"):
        with pytest.raises(QueryError):
            parse_query(bad, names, meta)
    assert not any(map(parse_query("blocks.0.att").matcher(), events))
    # node_meta itself only when asked for: the description of the graph, at its making
    m = parse_query("kind=node_meta blocks.0.ln1").matcher()
    got = [e.node for e in events if m(e)]
    assert got and set(got) == {n for n, x in meta.items() if x["module"] == "blocks.0.ln1"}
    assert Breakpoint(module="Blocks.0.LN1").describe() == "module=blocks.0.ln1"
