"""Backward from several outputs at once: the GraphRoot node."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param

NAME = "multi-root"
TITLE = "Several roots: backward([a, b], [ga, gb]) and GraphRoot"
SUMMARY = "two outputs, two gradients: the engine adds a GraphRoot node that feeds both"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "ga_scale": Param(1.0, "scale of the gradient given for a (ga = ga_scale * [1, 0.5])"),
    "gb_scale": Param(1.0, "scale of the gradient given for b (gb = gb_scale * [-1, 2])"),
}
NOTES = """\
# Several roots: GraphRoot

```
a = x.exp() * w          b = (x * w).tanh()
engine.autograd.backward([a, b], [ga, gb])
```

`a` and `b` are not scalars, so each needs a gradient to start from (`ga`,
`gb`: the "vector" of the vector-Jacobian product).  Both share the leaves `x`
and `w`.

With **one** root, `Engine::execute` queues the root's own node directly
(`skip_dummy_node`).  With **two or more**, it makes a `GraphRoot` node whose
`next_edges` are the roots' gradient edges and whose `apply` just returns the
given gradients, one per edge.  The whole backward then starts from one task.

**What to watch.**
1. `graph_task_created`: `roots` lists two node ids (`MulBackward0` of `a`,
   `TanhBackward0` of `b`); `graph_root` is a third id: the `GraphRoot`.
2. `dependencies_computed` starts its walk from `GraphRoot`.  It has no
   dependencies itself; `x`'s and `w`'s `AccumulateGrad` nodes each have **2**
   (both outputs use both leaves).
3. The first `push`/`pop`/`node_start` is `GraphRoot`.  Its `node_end` outputs
   are exactly `ga` and `gb`, which go to the two roots' buffers.
4. Then the two sub-graphs interleave by sequence number; the leaves'
   gradients from `a` and from `b` meet in the `AccumulateGrad` buffers
   (`buffer_accumulate` mode `add`).

**Ask a student:** `backward([a, b], [ga, gb])` gives the same `.grad` as
`(a * ga).sum() + (b * gb).sum()` followed by `.backward()`.  What is different
about the graph the engine runs?

**Source:** `Engine::execute` (`skip_dummy_node`, `GraphRoot`) in
`torch/csrc/autograd/engine.cpp`; `GraphRoot` in
`torch/csrc/autograd/functions/basic_ops.h`; `_make_grads` and `backward` in
`torch/autograd/__init__.py`.
"""


def _run(mod: Any, ga_scale: float, gb_scale: float, **kw: Any) -> dict[str, Any]:
    x = mod.tensor([1.0, 2.0], requires_grad=True, **kw)
    w = mod.tensor([0.5, -0.25], requires_grad=True, **kw)
    a = x.exp() * w
    b = (x * w).tanh()
    ga = mod.tensor([1.0, 0.5], **kw) * ga_scale
    gb = mod.tensor([-1.0, 2.0], **kw) * gb_scale
    mod.autograd.backward([a, b], [ga, gb])
    return {"x": x.grad, "w": w.grad}


def program(ga_scale: float, gb_scale: float) -> dict[str, engine.Tensor]:
    return _run(engine, ga_scale, gb_scale)


def torch_program(torch: Any, ga_scale: float, gb_scale: float) -> dict[str, Any]:
    return _run(torch, ga_scale, gb_scale, dtype=torch.float64)
