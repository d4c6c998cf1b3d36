"""A student's first training loop: linear regression, a few SGD steps, one backward each."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param, ScenarioError

NAME = "training-loop"
TITLE = "A first training loop: SGD on a linear regression, one backward per step"
SUMMARY = "pred = x·w + b, MSE loss, `with no_grad(): w -= lr * w.grad`; the loss goes down"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "steps": Param(3, "how many SGD steps (one backward each)"),
    "lr": Param(0.05, "the learning rate"),
    "w": Param(0.0, "the weight's starting value"),
    "b": Param(0.0, "the bias's starting value"),
}
#: the data: four points on y = 2x + 1, the line the loop should find
XS = (1.0, 2.0, 3.0, 4.0)
YS = (3.0, 5.0, 7.0, 9.0)
#: the five forward ops of a step make five nodes; under ``no_grad`` the update makes none,
#: so step k's nodes have sequence numbers 5k .. 5k + 4 (the first ten steps named)
FORWARD = {5 * k + i: op for k in range(10) for i, op in enumerate(
    [("x·w", "", "w"), ("+ b", "", "b"), ("- y",), ("** 2",), ("mean",)])}
NOTES = """\
# A first training loop

```
w = torch.tensor(0.0, requires_grad=True)       # leaves: the parameters
b = torch.tensor(0.0, requires_grad=True)
for step in range(steps):
    loss = ((x * w + b - y) ** 2).mean()          # a new graph each step
    loss.backward()                               # one GraphTask each step
    with torch.no_grad():
        w -= lr * w.grad                          # in place: w stays the same leaf
        b -= lr * b.grad
    w.grad = None                                 # or w.grad.zero_()
    b.grad = None
```

Four points on `y = 2x + 1`; the loop fits `w` and `b` by gradient descent.
`torch.optim.SGD([w, b], lr=lr)` with `opt.zero_grad(); loss.backward(); opt.step()`
does exactly this (`engine.optim.SGD` too).

**What to watch.**
1. Each step is one backward: one `graph_task_created` ... `completion`.  The
   graph has the same shape each time (`MeanBackward0`, `PowBackward0`,
   `SubBackward0`, `AddBackward0`, `MulBackward0`, two `AccumulateGrad`s), but
   each forward builds a fresh one (new sequence numbers), and `backward()`
   frees it.
2. The two `AccumulateGrad` nodes have the maximal sequence number, so each pops
   as soon as its gradient is ready: `b`'s (from `AddBackward0`) before
   `MulBackward0` runs.
3. After `completion` the update runs under `no_grad`: no nodes, no events.
   `w -= lr * w.grad` is `w.sub_(lr * w.grad)`: the **same** tensor, changed in
   place (its version counter goes up), still a leaf that requires grad, so the
   next step's graph ends in an `AccumulateGrad` for it again.
4. The result lists the loss of every step: it goes down, and it is PyTorch's,
   step by step.

**Why `no_grad`.**  Outside it, `w -= ...` is refused: *a leaf Variable that
requires grad is being used in an in-place operation*.  Autograd would have to
record the update as part of `w`'s history, and `w` would stop being a leaf:
the next backward would send its gradient through every past update.  Inside
it, nothing is recorded: the update is just arithmetic on the values.
Writing `w = w - lr * w.grad` instead (no `-=`) makes a **new** tensor: under
`no_grad` it does not require grad, and the next `backward()` never reaches it.

**Why clear `.grad`.**  `AccumulateGrad` adds into `.grad`: without
`w.grad = None` (or `w.grad.zero_()`), step 2's gradient is added to step 1's.

**Ask a student:** with `w.grad = None` moved to before the update, what does
the update do?  And if the lines clearing `.grad` are removed, from which step
on does the loss go *up* with this learning rate?

**Source:** `AccumulateGrad` in `torch/csrc/autograd/functions/accumulate_grad.h`
(accumulating into `.grad`); `Engine::execute` in `torch/csrc/autograd/engine.cpp`
(one GraphTask per `backward()`); `check_inplace` in
`torch/csrc/autograd/VariableTypeUtils.h` (the leaf error); `torch/optim/sgd.py`.
"""


def _run(mod: Any, steps: int, lr: float, w0: float, b0: float,
         **kw: Any) -> dict[str, Any]:
    x, y = mod.tensor(XS, **kw), mod.tensor(YS, **kw)
    w = mod.tensor(w0, requires_grad=True, **kw)
    b = mod.tensor(b0, requires_grad=True, **kw)
    out: dict[str, Any] = {}
    for step in range(1, steps + 1):
        loss = ((x * w + b - y) ** 2).mean()
        loss.backward()
        with mod.no_grad():
            w -= lr * w.grad
            b -= lr * b.grad
        w.grad = None
        b.grad = None
        out[f"loss at step {step}"] = loss.detach()
    out["w"], out["b"] = w.detach(), b.detach()
    return out


def _check(steps: int) -> None:
    if steps < 1:
        raise ScenarioError(f"{NAME}: parameter 'steps' must be at least 1, not {steps}")


def program(steps: int, lr: float, w: float, b: float) -> dict[str, engine.Tensor]:
    _check(steps)
    return _run(engine, steps, lr, w, b)


def torch_program(torch: Any, steps: int, lr: float, w: float, b: float) -> dict[str, Any]:
    _check(steps)
    return _run(torch, steps, lr, w, b, dtype=torch.float64)
