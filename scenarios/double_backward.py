"""create_graph: the backward pass records a graph of its own (grad of grad)."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param

NAME = "double-backward"
TITLE = "create_graph: a backward that builds a graph (grad of grad)"
SUMMARY = "create_graph=True records the backward's maths; grad of it is the 2nd derivative"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "x0": Param(0.5, "first element of x"),
    "x1": Param(-1.0, "second element of x"),
    "x2": Param(2.0, "third element of x"),
}
NOTES = """\
# Double backward: create_graph

```
y = (x.exp() * x).sum()                              # y = Σ x·e^x
(g,) = engine.autograd.grad(y, x, create_graph=True) # g = (1 + x)·e^x, with a grad_fn
(h,) = engine.autograd.grad(g.sum(), x)              # h = (2 + x)·e^x
```

A backward node's maths is made of ordinary tensor operations.  Normally the
engine runs them with grad mode **off**, so they record nothing.  With
`create_graph=True` the GraphTask's `grad_mode` is on: every multiply and add a
backward node does is recorded, and the gradient it returns has a `grad_fn`.
The first backward *builds* the graph of the derivative; the second backward
runs through it.

**What to watch.**
1. GraphTask 1: `graph_task_created` with `create_graph: true` and
   `keep_graph: true` (retain_graph defaults to create_graph: the second pass
   may need the first graph's saved tensors, and here it does).
2. While GraphTask 1 runs, its nodes' maths is recorded: the `MulBackward0` of
   `exp() * x` computes `grad * x` and `grad * e^x`, and `ExpBackward0`
   computes `grad * result`, each a new `MulBackward0`.  Even the InputBuffer's
   sum of x's two incoming gradients is recorded (an `AddBackward0`): that is
   `g.grad_fn`.  None of these new nodes runs now.
3. GraphTask 1 is a `grad()` call: x's `AccumulateGrad` is captured, not run
   (`node_skipped`, reason `captured`); `x.grad` stays None.
4. GraphTask 2 starts from `g.sum()`.  Its `dependencies_computed` lists the
   nodes recorded in step 2, with higher sequence numbers than the forward's,
   **and the forward's own `ExpBackward0`**: `grad * result` used the forward's
   `e^x`, whose `grad_fn` is that node.  So GraphTask 2 runs `ExpBackward0` a
   second time, unpacking its saved result again.  That is why GraphTask 1 had
   to keep the graph.
5. `d2y/dx2` = (2 + x)·e^x.

**Ask a student:** run the first `grad()` with `create_graph=True,
retain_graph=False`.  Which node fails in the second `grad()`, and why that
one?

**Source:** `Engine::execute` (`GraphTask(keep_graph, grad_mode = create_graph,
…)`) and `thread_main` (`at::AutoGradMode grad_mode(local_graph_task->grad_mode_)`)
in `torch/csrc/autograd/engine.cpp`; `torch.autograd.grad` in
`torch/autograd/__init__.py`; the formulas in `tools/autograd/derivatives.yaml`.
"""


def _run(mod: Any, x0: float, x1: float, x2: float, **kw: Any) -> dict[str, Any]:
    x = mod.tensor([x0, x1, x2], requires_grad=True, **kw)
    y = (x.exp() * x).sum()
    (g,) = mod.autograd.grad(y, x, create_graph=True)
    (h,) = mod.autograd.grad(g.sum(), x)
    return {"dy/dx": g, "d2y/dx2": h}


def program(x0: float, x1: float, x2: float) -> dict[str, engine.Tensor]:
    return _run(engine, x0, x1, x2)


def torch_program(torch: Any, x0: float, x1: float, x2: float) -> dict[str, Any]:
    return _run(torch, x0, x1, x2, dtype=torch.float64)
