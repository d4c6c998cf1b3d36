"""The list view's column widths and order for a big graph, computed without a row per
node: they are those of the rows themselves."""

from __future__ import annotations

import pytest

from autograd_tui import scenarios
from autograd_tui.app import render
from autograd_tui.engine.graph import UINT64_MAX
from autograd_tui.history.state import EngineState
from autograd_tui.session.run import Run
from autograd_tui.words import seq_text

pytestmark = pytest.mark.timeout(120)


def _final(name: str) -> EngineState:
    with Run(scenarios.get(name)) as run:
        run.run()
        return run.history.head.copy()


def _widths_of_rows(state: EngineState) -> list[int]:
    """The widths as they were made before: a string per node."""
    nodes = state.nodes.values()
    return [max(2, max(len(str(n)) for n in state.nodes)),
            2 + max(len(x.name) for x in nodes),
            max(6, max(len(x.device) for x in nodes)), len("not reached"),
            max(4, max((len(str(v)) for v in state.dependencies.values()), default=1)),
            max(3, max(len(seq_text(x.seq)) for x in nodes)),
            max(5, max((len(w) for w in (*state.heaps, *state.threads)), default=0))]


@pytest.mark.parametrize("name", ["multi-device", "reentrant", "mlp"])
def test_widths_and_order_are_those_of_the_rows(name: str) -> None:
    state = _final(name)
    assert render.list_widths(state) == _widths_of_rows(state)
    rows = render.list_rows(state)
    widths = render.list_widths(state)
    for r in rows:  # every cell fits (the state column is its longest word)
        assert all(len(c) <= w for c, w in zip(r, widths) if c != "not reached")
    info = state.nodes
    assert render.list_rows(state) == [render.list_row(state, n) for n in sorted(
        info, key=lambda n: (-info[n].topo, -info[n].seq, n))]


def test_widths_with_unusual_sequence_numbers_and_names() -> None:
    state = _final("multi-device")
    ids = list(state.nodes)
    seqs = [UINT64_MAX, -123456, 10**12, 7]
    for n, seq in zip(ids, seqs):
        state.nodes[n] = state.nodes[n]._replace(seq=seq)
    state.nodes[ids[-1]] = state.nodes[ids[-1]]._replace(name="X" * 40, device="cuda:12")
    state.nodes[10**9] = state.nodes[ids[0]]._replace(seq=3)  # a long id
    want = _widths_of_rows(state)
    assert render.list_widths(state) == want
    assert want[5] == len("10" + "0" * 11) and want[1] == 42 and want[0] == 10
    assert render.list_widths(EngineState()) == [2, 2, 6, 11, 4, 3, 5]
