"""Fan-in: one tensor used n times; n gradients accumulate in one InputBuffer slot."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param, ScenarioError

NAME = "fan-in"
TITLE = "Fan-in: n gradients into one InputBuffer slot"
SUMMARY = "h = x.exp() used n times: one InputBuffer slot, written once, added n-1 times"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "n": Param(5, "how many times h = x.exp() is used"),
    "x0": Param(0.5, "first element of the leaf x"),
    "x1": Param(-0.25, "second element of the leaf x"),
}
NOTES = """\
# Fan-in: n gradients, one slot

`h = x.exp()`, then `out = (h*1 + h*2 + … + h*n).sum()`.

`h` is one tensor used `n` times.  In the backward graph `ExpBackward0` has one
*input slot* (it has one output in the forward) but `n` incoming edges, one from
each `MulBackward0`.  Its gradient is the **sum** of what the `n` multiplies send,
and the engine builds that sum in the node's `InputBuffer`, slot 0.

**What to watch.**
1. `dependencies_computed`: `ExpBackward0` has **n** dependencies; each
   `AddBackward0`, each `MulBackward0` and x's `AccumulateGrad` has 1.
2. The first multiply to run (`h * n`, the last one built) sends its gradient:
   `buffer_accumulate` on `ExpBackward0`, slot 0, mode **first** (value n), and
   `not_ready_insert` (its count is still n − 1).
3. Each later multiply: `dependency_decrement` (remaining n − 2, n − 3, …) and
   `buffer_accumulate`, slot 0, mode **add**: the value in the slot grows.
4. The n-th gradient brings the count to 0: `not_ready_remove`, then `push`.
   `ExpBackward0` runs **once**, on the sum (1 + 2 + … + n) · 1.
5. Watch the order: the Add chain is unrolled from the last `+` backwards, and at
   each step the queue holds an `AddBackward0` and a `MulBackward0`; the one with
   the higher `sequence_nr` pops first.

Result: `x.grad = e^x · n(n + 1)/2`.

**Ask a student:** the buffer *adds* gradients as they arrive.  PyTorch's
`InputBuffer::add` sometimes adds in place and sometimes makes a new tensor;
why must it be careful about adding in place into the first gradient it got?

**Source:** `Engine::evaluate_function` (the `not_ready_` map) in
`torch/csrc/autograd/engine.cpp`; `InputBuffer::add` and `accumulate` in
`torch/csrc/autograd/input_buffer.cpp`.
"""


def program(n: int, x0: float, x1: float) -> dict[str, engine.Tensor]:
    if n < 1:
        raise ScenarioError(f"{NAME}: parameter 'n' must be at least 1, not {n}")
    x = engine.tensor([x0, x1], requires_grad=True)
    h = x.exp()
    total = h * 1.0
    for k in range(2, n + 1):
        total = total + h * float(k)
    total.sum().backward()
    return {"x": x.grad}


def torch_program(torch: Any, n: int, x0: float, x1: float) -> dict[str, Any]:
    x = torch.tensor([x0, x1], dtype=torch.float64, requires_grad=True)
    h = x.exp()
    total = h * 1.0
    for k in range(2, n + 1):
        total = total + h * float(k)
    total.sum().backward()
    return {"x": x.grad}
