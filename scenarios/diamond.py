"""A diamond: exp feeds two multiplies that are added (dependency counting)."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param

NAME = "diamond"
TITLE = "Diamond: one exp, two multiplies, one add"
SUMMARY = "ExpBackward0 has two dependencies: its InputBuffer waits in not_ready for both"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "x0": Param(0.5, "first element of the leaf x"),
    "x1": Param(-1.0, "second element of the leaf x"),
    "k": Param(2.0, "the constant of the first multiply (e * k)"),
}
NOTES = """\
# Diamond: dependency counting and accumulation

```
x ──► exp ──► e ──► e * k ─────┐
│              └──► e * x ──► + ──► sum
└─────────────────────┘
```

`e = x.exp()` is used twice, so in the backward graph `ExpBackward0` has **two**
edges coming into it (from the two `MulBackward0` nodes).  The leaf `x` is used
twice as well (by `exp` and by `e * x`): its `AccumulateGrad` also has two.

**What to watch.**
1. `dependencies_computed`: `ExpBackward0` → 2, `AccumulateGrad` (x) → 2, every
   other node → 1.  `compute_dependencies` counts *edges*, not nodes.
2. `AddBackward0` runs and makes both multiplies ready at once.  `e * x` was
   created later, so its node has the higher `sequence_nr` and pops first.
3. `e * x`'s node sends one gradient to `ExpBackward0` (`dependency_decrement`,
   remaining 1): a new InputBuffer is made, gets its first value
   (`buffer_accumulate`, mode `first`) and goes into `not_ready`
   (`not_ready_insert`).  It also sends one to `AccumulateGrad` (x), which goes
   into `not_ready` too.
4. `e * k`'s node delivers the second gradient to `ExpBackward0`: mode `add`,
   remaining 0, `not_ready_remove`, `push`.  Only now can `ExpBackward0` run.
5. `ExpBackward0` delivers the last gradient to x's buffer (mode `add`), and the
   leaf's `AccumulateGrad` runs once, with the summed gradient.

Result: `x.grad = e·k + e·x + e = e^x (k + x + 1)`.

**Ask a student:** why must `ExpBackward0` wait for *both* gradients instead of
running twice, once per gradient?  (Hint: what would it do to the work below
it, and to x's `AccumulateGrad`?)

**Source:** `Engine::compute_dependencies` and `Engine::evaluate_function` (the
`not_ready_` branch) in `torch/csrc/autograd/engine.cpp`; `InputBuffer::add` in
`input_buffer.cpp`.
"""


def program(x0: float, x1: float, k: float) -> dict[str, engine.Tensor]:
    x = engine.tensor([x0, x1], requires_grad=True)
    e = x.exp()
    ((e * k) + (e * x)).sum().backward()
    return {"x": x.grad}


def torch_program(torch: Any, x0: float, x1: float, k: float) -> dict[str, Any]:
    x = torch.tensor([x0, x1], dtype=torch.float64, requires_grad=True)
    e = x.exp()
    ((e * k) + (e * x)).sum().backward()
    return {"x": x.grad}
