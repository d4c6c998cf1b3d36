"""history/navigation.py: the moves over a node, to a module's end, out of a GraphTask and
back, on a finished run's history and on a live one that has not got there yet (the move's
predicate handed to the engine through ``Session.run_until_breakpoint(until=...)``)."""

from __future__ import annotations

import pytest

from autograd_tui import scenarios
from autograd_tui.history import navigation as nav
from autograd_tui.session import Breakpoint, Session
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(120)


def test_over_a_node_and_back_is_symmetric_and_steps_over_a_reentrant_backward() -> None:
    with Run(scenarios.get("reentrant")) as run:
        run.run()
        s = Session.from_run(run)
        evs = s.events()
        ends = [i for i, e in enumerate(evs, 1) if e.kind == "node_end" and e.graph_task == 1]
        k, got = 0, []
        while (m := nav.over_node(s, k)).k is not None:
            got.append(m.k)
            k = m.k
        assert got == ends  # GraphTask 1's nodes, one each: never inside GraphTask 2
        assert m.until is not None and m.what == "the end of the next node"
        for end in reversed(ends):  # N from each node's end: that node's start
            start = nav.back_node(s, end)
            assert start is not None and evs[start - 1].kind == "node_start"
            assert (evs[start - 1].node, evs[start - 1].graph_task) == (
                evs[end - 1].node, evs[end - 1].graph_task)
            assert nav.over_node(s, start).k == end  # and n from there: its end again
        assert nav.back_node(s, 1) is None


def test_out_of_a_graph_task_and_back_and_no_module_in_a_graph_without_node_meta() -> None:
    with Run(scenarios.get("reentrant")) as run:
        run.run()
        s = Session.from_run(run)
        evs = s.events()
        inner = next(i for i, e in enumerate(evs, 1) if e.kind == "node_start"
                     and e.graph_task == 2)
        m = nav.out_of_task(s, inner)
        assert m.k is not None and (evs[m.k - 1].kind, evs[m.k - 1].graph_task) == (
            "completion", 2)
        m = nav.out_of_task(s, m.k)  # from there: the outer GraphTask's completion
        assert m.k == len(evs) and evs[-1].kind == "completion"
        created = nav.back_task(s, inner)
        assert created is not None and (evs[created - 1].kind, evs[created - 1].graph_task) \
            == ("graph_task_created", 2)
        outer = nav.back_task(s, created)  # again: the GraphTask that made it
        assert outer is not None and evs[outer - 1].graph_task == 1 and outer < created
        m = nav.finish_module(s, inner)
        assert (m.k, m.until) == (None, None) and "has none" in m.what
        assert nav.back_module(s, inner) is None


def test_a_live_run_runs_the_engine_to_where_a_move_ends() -> None:
    with Run(scenarios.get("torch-attention")) as run:
        s = Session.from_run(run)
        s.breakpoints = [Breakpoint(kind="node_start", node="blocks.0.mlp.fc2")]
        assert s.run_until_breakpoint().status == "breakpoint"
        s.breakpoints = []
        k = s.count()
        m = nav.finish_module(s, k)
        assert m.k is None and m.until is not None and m.what == "the end of blocks.0.mlp.fc2"
        r = s.run_until_breakpoint(until=m.until)
        assert r.status == "reached" and r.events[-1].kind == "node_end"
        state = s.state_at(s.count())
        fc2 = [n for n, x in state.node_meta.items() if x.get("module") == "blocks.0.mlp.fc2"]
        assert fc2 and all(state.node_states[n].state == "done" for n in fc2)
        assert s.event(s.count() - 1) is r.events[-1]
        # the history now has it: the same move from k ends there
        assert nav.finish_module(s, k).k == s.count()
        run.run()
