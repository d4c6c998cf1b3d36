"""bench_engine's graph shapes are what the benchmark says they are.

``chain``, ``wide`` and ``random`` programs build the node count they promise, the same
graph in our engine and in PyTorch, with the same leaf gradients; a chain keeps the
ready queue at a task or two and the wide graph fills it with one tail per branch; the
graphs are freed on a deep-stack thread that does not outlive the call.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import pytest
import torch

from autograd_tui import engine

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from bench import baseline_2017, bench_engine  # noqa: E402  (the repository's root, above)

pytestmark = pytest.mark.usefixtures("no_thread_left")


def _max_queue(loss: engine.Tensor) -> int:
    """The longest the ready queue gets in one backward of ``loss`` (its push events)."""
    sizes: list[int] = []

    def observe(event: Any) -> None:
        if event.kind == "push":
            sizes.append(event.size)

    with engine.Engine() as eng, engine.use_engine(eng):
        eng.add_observer(observe)
        loss.backward(retain_graph=True)
    return max(sizes)


@pytest.mark.parametrize("shape", bench_engine.SHAPES)
def test_shape_builds_the_same_graph_in_both(shape: str) -> None:
    program = bench_engine.make_program(600, shape=shape)
    assert 560 <= program.n_nodes <= 600
    loss, leaves = bench_engine.build_ours(program)
    tloss, tleaves = bench_engine.build_torch(program, torch)
    assert bench_engine.count_nodes(loss.grad_fn, lambda n: n.next_edges()) == program.n_nodes
    assert bench_engine.count_nodes(tloss.grad_fn, lambda n: n.next_functions) == \
        program.n_nodes
    with engine.Engine() as eng, engine.use_engine(eng):
        loss.backward(retain_graph=True)
    tloss.backward()
    assert baseline_2017.assert_same_grads(
        [t.grad for t in leaves], [engine.tensor(t.grad.numpy()) for t in tleaves]) < 1e-12
    graphs = [loss, leaves, tloss, tleaves]
    del loss, leaves, tloss, tleaves
    bench_engine.free_deep(graphs)
    assert graphs == []


def test_chain_is_narrow_and_wide_is_wide() -> None:
    chain, _ = bench_engine.build_ours(bench_engine.make_program(500, shape="chain"))
    wide_program = bench_engine.make_program(500, shape="wide")
    wide, _ = bench_engine.build_ours(wide_program)
    assert _max_queue(chain) <= 2
    branches = len(wide_program.leaves)
    assert _max_queue(wide) >= branches - 1  # every branch's tail waits in the queue


def test_free_deep_frees_on_its_own_thread() -> None:
    freed_on: list[str] = []

    class Marker:
        def __del__(self) -> None:
            freed_on.append(threading.current_thread().name)

    graphs: list[Any] = [Marker()]
    bench_engine.free_deep(graphs)
    assert freed_on == ["bench free"]
