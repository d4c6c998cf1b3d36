"""One vocabulary: every view words an event through ``autograd_tui/words.py``.

For each event kind of ``engine.events.SCHEMA``, the text printer, the app's event log, the
Chrome trace and Graphviz's ``event_text`` say what ``words.event_words`` says; a thread's
wait reads alike in its event, in the controller's thread description and in the fold's
thread state (``words.wait_words``)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from autograd_tui import scenarios
from autograd_tui.app import render
from autograd_tui.app.widgets.event_log import log_row
from autograd_tui.engine.events import SCHEMA, Event, make_event
from autograd_tui.export.chrome_trace import to_chrome_trace
from autograd_tui.export.labels import event_text
from autograd_tui.export.text import print_trace
from autograd_tui.history import History
from autograd_tui.session.run import Run
from autograd_tui.words import (
    event_line,
    event_words,
    format_event,
    node_label,
    node_names,
    wait_words,
)

pytestmark = pytest.mark.timeout(120)

#: scenarios that, between them, emit every kind but thread_exit (no built-in scenario
#: ends an engine thread before the engine closes)
SCENARIOS = ("linear-relu", "anomaly-nan", "checkpoint", "deadlock-lock-steal",
             "deadlock-no-wakeup", "deadlock-wait-on-device", "double-backward",
             "inplace-version", "multi-device")

#: kinds the Chrome trace draws as a slice's end or a counter, not a name of their own
CHROME_UNNAMED = {"node_end", "thread_wake", "outstanding_decrement"}


@pytest.fixture(scope="module")
def runs() -> list[list[Event]]:
    out = []
    for name in SCENARIOS:
        with Run(scenarios.get(name)) as run:
            run.run()
            out.append(list(run.events))
    last = out[-1]
    tail = last[-1].seq + 1  # a thread ending, after the run's last event
    out[-1] = last + [make_event(tail, "thread_exit", last[-1].thread)]
    out.append(ddp_events())
    return out


def ddp_events() -> list[Event]:
    """A DDP backward's kinds (two processes, gloo: tests/engine/test_torch_ddp.py runs
    one), made with the fields that run gives."""
    t, b = "cpu (owner)", {"rank": 1, "bucket": 0}
    made = [("ddp_bucket_assigned", {**b, "params": ["0.weight", "0.bias"]}),
            ("ddp_bucket_ready", {**b, "params": ["0.weight", "0.bias"]}),
            ("ddp_allreduce_start", {**b, "hook": "allreduce_hook"}),
            ("ddp_allreduce_end", b), ("ddp_finalize", {"rank": 1, "buckets": 1}),
            ("ddp_bucket_never_ready", {**b, "params": ["0.weight", "0.bias"],
                                        "missing": ["0.bias"], "find_unused": False,
                                        "static_graph": False})]
    return [make_event(i, kind, t, data=data) for i, (kind, data) in enumerate(made, 1)]


def _samples(runs: list[list[Event]]) -> dict[str, tuple[Event, list[Event]]]:
    """kind -> (its first event, the run it is in)."""
    got: dict[str, tuple[Event, list[Event]]] = {}
    for events in runs:
        for e in events:
            got.setdefault(e.kind, (e, events))
    return got


def test_the_runs_emit_every_kind(runs: list[list[Event]]) -> None:
    assert set(_samples(runs)) == set(SCHEMA)


@pytest.mark.parametrize("kind", sorted(SCHEMA))
def test_every_view_words_the_event_as_words_py_does(kind: str, runs: list[list[Event]]
                                                     ) -> None:
    e, events = _samples(runs)[kind]
    names = node_names(events)
    words = event_words(e, names)
    assert words and words == event_words(e, names)
    # the text printer: the line format_event makes, which ends with the event's words
    out = io.StringIO()
    print_trace(events, Console(file=out, highlight=False, soft_wrap=True, no_color=True))
    line = out.getvalue().splitlines()[events.index(e)]
    assert line == format_event(e, names) and line.endswith(words)
    # the app's event log: its number, then event_line (thread, GraphTask, the words)
    row = log_row(e, names)
    assert row[0][0] == str(e.seq) and row[1][0] == event_line(e, names)
    assert row[1][0].endswith(words)
    # Graphviz's title line for the state after the event
    if kind != "thread_exit":  # a made event: no run's state to fold it into
        h = History(events)
        k = events.index(e) + 1
        state = h.state_at(k)
        state_names = {i: info.name for i, info in state.nodes.items()}
        assert event_text(state).endswith(event_words(e, state_names).strip())
    # the Chrome trace: an instant (or a slice it opens) named by the same words
    trace = to_chrome_trace(events)["traceEvents"]
    at = [ev for ev in trace if ev["ts"] == e.seq and ev["ph"] in ("i", "X")]
    if kind == "node_start":  # the node's slice: the node as words.py names it
        assert node_label(e.data["name"], e.node) in [ev["name"] for ev in at]
    elif kind not in CHROME_UNNAMED:
        assert words in [ev["name"] for ev in at]


def _waits(events: list[Event]) -> dict[str, Event]:
    """Thread -> its thread_wait, for the threads still waiting at the end."""
    waiting: dict[str, Event] = {}
    for e in events:
        if e.kind == "thread_wait":
            waiting[e.thread] = e
        elif e.kind == "thread_wake":
            waiting.pop(e.thread, None)
    return waiting


@pytest.mark.parametrize("scenario", ["deadlock-lock-steal", "deadlock-wait-on-device",
                                      "deadlock-reentrant-block"])
def test_a_wait_reads_alike_in_the_event_the_controller_and_the_fold(scenario: str) -> None:
    with Run(scenarios.get(scenario)) as run:
        assert run.run().status == "deadlock"
        events = list(run.events)
        live: dict[str, Any] = run.controller.thread_states()
        state = run.history.latest()
    waiting = _waits(events)
    assert waiting
    for thread, e in waiting.items():
        d = e.data
        said = wait_words(d["on"], d["target"], d["holder"])
        assert event_words(e) == f"wait on {said}"
        assert live[thread].detail == f"waiting on {said}"  # the controller's description
        assert live[thread].waiting_on == wait_words(d["on"], d["target"])
        fold = dict((r[0], r[1]) for r in render.threads_rows(state, {}))
        assert fold[thread] == f"waiting on {said}"  # the fold's (a recording's panes)


def test_monkeypatched_words_change_the_printed_views(monkeypatch: Any,
                                                      runs: list[list[Event]]) -> None:
    """The text printer and the app's log have no wording of their own: change words.py's
    and they change."""
    import autograd_tui.words as words

    events = runs[0]
    monkeypatch.setattr(words, "event_words", lambda e, names=None: f"<{e.kind}>")
    out = io.StringIO()
    print_trace(events, Console(file=out, highlight=False, soft_wrap=True, no_color=True))
    lines = out.getvalue().splitlines()
    assert [line.rsplit(" ", 1)[-1] for line in lines] == [f"<{e.kind}>" for e in events]
    assert all(log_row(e, {})[1][0].endswith(f"<{e.kind}>") for e in events)
