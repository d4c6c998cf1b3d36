"""A long chain: exactly one ready task at a time."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param, ScenarioError

NAME = "chain"
TITLE = "A long chain: one ready task at a time"
SUMMARY = "n links of multiply-then-tanh: the ready queue never holds more than one task"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "n": Param(30, "number of links (each link is a multiply and a tanh: 2n + 1 nodes)"),
    "x": Param(0.3, "the leaf's value"),
    "scale": Param(1.1, "the constant each link multiplies by"),
}
NOTES = """\
# A long chain: one ready task at a time

`y = x; for i in range(n): y = (y * scale).tanh()`, then `y.backward()`.

Every node has exactly one input edge and one output edge, so the backward is a
straight line: `TanhBackward0 → MulBackward0 → TanhBackward0 → … → AccumulateGrad`.

**What to watch.**
1. `dependencies_computed`: every node has exactly **1** dependency.
2. The ready queue: each `push` has `size 1` and each `pop` leaves `size 0`.
   A node's single dependency reaches 0 as soon as its parent runs, so it is
   pushed at once; nothing ever waits in `not_ready`.
3. `outstanding_decrement` goes 1 → 1 → 1 … → 0: one task is finished and one
   pushed per step.  The GraphTask completes after the leaf's `AccumulateGrad`.
4. With n = 30 the whole backward is 2n + 1 = 61 tasks on one thread (a
   single root needs no `GraphRoot`: the root's own node is queued first).
   Step with `n` set to 3 first, then run the default to the end.

Note that the multiplication by a constant has **one** next edge: the constant
does not require grad, so its edge is empty (`next_functions` shows `None`).

**Ask a student:** the engine runs each CPU backward on the thread that called
`backward()`.  Would more threads make *this* graph faster?  What kind of graph
would they help?

**Source:** `Engine::thread_main` (the pop / `evaluate_function` /
`outstanding_tasks_` loop) and `Engine::evaluate_function` in
`torch/csrc/autograd/engine.cpp`.
"""


def program(n: int, x: float, scale: float) -> dict[str, engine.Tensor]:
    if n < 1:
        raise ScenarioError(f"{NAME}: parameter 'n' must be at least 1, not {n}")
    leaf = engine.tensor(x, requires_grad=True)
    y = leaf
    for _ in range(n):
        y = (y * scale).tanh()
    y.backward()
    return {"x": leaf.grad}


def torch_program(torch: Any, n: int, x: float, scale: float) -> dict[str, Any]:
    leaf = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    y = leaf
    for _ in range(n):
        y = (y * scale).tanh()
    y.backward()
    return {"x": leaf.grad}
