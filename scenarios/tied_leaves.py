"""Tied leaves: many AccumulateGrads ready at once, all with the maximal sequence number."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param, ScenarioError

NAME = "tied-leaves"
TITLE = "Tied leaves: how equal priorities pop (libstdc++ heap order)"
SUMMARY = "one node makes n AccumulateGrads ready at once; they tie, and pop in heap order"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "n": Param(6, "number of leaves (all ready at the same moment)"),
}
NOTES = """\
# Tied leaves: AccumulateGrad's maximal sequence number

`out = WeightedSum.apply(w0, w1, …, w(n-1))` with `out = Σ (i + 1) · wi`, a custom
Function whose backward returns one gradient per leaf.  When its node runs it
makes **all n** `AccumulateGrad` nodes ready in one go.

Every `AccumulateGrad` has `sequence_nr = UINT64_MAX` (18446744073709551615): a
leaf's gradient should be stored as soon as it is ready, so it beats every other
node.  But here the n tasks have the same depth *and* the same sequence number:
`CompareNodeTaskTime` says none is "earlier" than another.  Which pops first?

PyTorch's ReadyQueue is a `std::priority_queue`, a binary heap run by
libstdc++'s `std::push_heap` / `std::pop_heap`.  Equal elements come out in
whatever order the heap's sift-up and sift-down leave them: not first-in
first-out, not last-in first-out.  Our `ReadyQueue` runs the same algorithm:
Python's `heapq` sifts exactly as libstdc++ does, with `NodeTask.__lt__` the
comparator turned around (a line-by-line port of libstdc++ is kept as the
reference, and the tests pop thousands of tied sequences through both), so the
order matches.

**What to watch.**
1. `WeightedSumBackward` runs, then n pushes in edge order w0, w1, …; each
   `push` event's `order` field shows the whole queue in pop order after it.
2. The `pop` events that follow.  The program records the order the leaves'
   hooks ran in (`accumulate_order`); with n = 6 it is **0, 2, 5, 4, 1, 3**.
   w0 pops first: `push_heap` never moves an element past an equal parent, so
   the first one pushed stays on top.  After that, each `pop_heap` walks the
   hole at the top down to a leaf, always taking the right child when two
   children tie (`__adjust_heap`), then puts the heap's last element there and
   sifts it back up.  n = 7 gives 0, 2, 5, 6, 4, 1, 3, and n = 8 gives
   0, 2, 6, 5, 7, 4, 1, 3: there is no simple rule.
3. The test suite compares `accumulate_order` with real PyTorch's.

**Ask a student:** does the order matter for the gradients?  When *could* it
matter (think of hooks with side effects, or a leaf shared by two graphs)?

**Source:** `CompareNodeTaskTime` and `ReadyQueue` in
`torch/csrc/autograd/engine.h`; `ReadyQueue::push`/`pop` in `engine.cpp`;
`AccumulateGrad` (`UINT64_MAX` sequence number) in
`torch/csrc/autograd/functions/accumulate_grad.h`; libstdc++'s
`bits/stl_heap.h` (`__push_heap`, `__adjust_heap`).
"""


def _weighted_sum(mod: Any) -> Any:
    class WeightedSum(mod.autograd.Function):
        @staticmethod
        def forward(ctx, *leaves):
            ctx.n = len(leaves)
            total = leaves[0] * 1.0
            for i, leaf in enumerate(leaves[1:], start=2):
                total = total + leaf * float(i)
            return total

        @staticmethod
        def backward(ctx, g):
            return tuple(g * float(i + 1) for i in range(ctx.n))

    return WeightedSum


def _run(mod: Any, n: int, **kw: Any) -> dict[str, Any]:
    if n < 1:
        raise ScenarioError(f"{NAME}: parameter 'n' must be at least 1, not {n}")
    order: list[int] = []
    leaves = [mod.tensor(float(i + 1), requires_grad=True, **kw) for i in range(n)]
    for i, leaf in enumerate(leaves):
        leaf.register_hook(lambda g, i=i: order.append(i))
    _weighted_sum(mod).apply(*leaves).backward()
    out = {f"w{i}": leaf.grad for i, leaf in enumerate(leaves)}
    out["accumulate_order"] = mod.tensor([float(i) for i in order], **kw)
    return out


def program(n: int) -> dict[str, engine.Tensor]:
    return _run(engine, n)


def torch_program(torch: Any, n: int) -> dict[str, Any]:
    return _run(torch, n, dtype=torch.float64)
