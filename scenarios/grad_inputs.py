"""autograd.grad(out, inputs): exec_info, captures, pruned and skipped nodes."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param

NAME = "grad-inputs"
TITLE = "grad(out, [h, c]): exec_info, captures and pruning"
SUMMARY = "grad() runs only what leads to its inputs, captures them, prunes the rest"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "with_leaf": Param(False, "also ask for the gradient of the leaf w (no pruning then)"),
}
NOTES = """\
# grad(): only the nodes that lead to the inputs

```
a = x * w;  h = a.tanh()          # h: TanhBackward0, topological_nr 2
b = v * 3;  c = b.exp()           # c: ExpBackward0,  topological_nr 2
out = (h * h + c * h).sum()
dh, dc = engine.autograd.grad(out, [h, c])
```

`grad()` does not touch any `.grad`: it returns the gradients flowing into the
inputs.  The engine gets `outputs`, one edge per input: `(h.grad_fn, 0)` and
`(c.grad_fn, 0)`.

**What to watch.**
1. `dependencies_computed`: `min_topo_nr` is **2**, the smallest
   `topological_nr` among the output edges' nodes.  A node's topological_nr is
   the length of the longest path from it to a leaf, so a node below 2 can
   never reach `h`'s or `c`'s node: `compute_dependencies` does not walk past
   it.  The two `MulBackward0` nodes of `x * w` and `v * 3` (topological_nr 1)
   are counted but pruned: the leaves' `AccumulateGrad` nodes below them are
   never even counted.  `TanhBackward0` has **3** dependencies (`h` is used
   three times).
2. `exec_info` (`GraphTask::init_to_execute`): `needed` holds the nodes on a
   path from the root to an input (`SumBackward0`, `AddBackward0`, both
   `MulBackward0` of the last line); `captures` says "take the gradient in
   input slot 0 of `TanhBackward0` into result 0, and of `ExpBackward0` into
   result 1".
3. When `TanhBackward0` and `ExpBackward0` become ready they are popped, but
   `evaluate_function` only runs their tensor pre-hooks, stores the captured
   gradient (a `hook` event of kind `capture`) and stops: `node_skipped`,
   reason `captured`.  They are not needed: nothing below them is asked for.
4. The result: `dh = 2h + c`, `dc = h`.  `x.grad`, `w.grad`, `v.grad` stay None.
5. Now run with `with_leaf=true`: `grad(out, [h, c, w])`.  The leaf's
   `AccumulateGrad` has topological_nr 0, so `min_topo_nr` is 0 and nothing is
   pruned; `TanhBackward0` and `x * w`'s `MulBackward0` become *needed* (they
   lead to `w`), and w's `AccumulateGrad` is captured, never run: `w.grad` stays
   None.  x's `AccumulateGrad` is not needed either, so it is never queued:
   when its dependency reaches 0, `evaluate_function` sees that it should not
   execute and drops it (`node_skipped`, reason `not_needed`).

**Ask a student:** why is a capture taken from the node's *input* buffer, and
not from its output?  Which hooks still run on a captured node?

**Source:** `Engine::execute` and `compute_min_topological_nr`,
`Engine::compute_dependencies` (the `min_topo_nr` check),
`GraphTask::init_to_execute`, and the `exec_info_` branch of
`Engine::evaluate_function` in `torch/csrc/autograd/engine.cpp`;
`GraphTask::ExecInfo` and `Capture` in `graph_task.h`.
"""


def _run(mod: Any, with_leaf: bool, **kw: Any) -> dict[str, Any]:
    x = mod.tensor([0.5, -1.0], requires_grad=True, **kw)
    w = mod.tensor([2.0, 0.25], requires_grad=True, **kw)
    v = mod.tensor([0.1, 0.3], requires_grad=True, **kw)
    h = (x * w).tanh()
    c = (v * 3.0).exp()
    out = (h * h + c * h).sum()
    inputs = [h, c, w] if with_leaf else [h, c]
    grads = mod.autograd.grad(out, inputs)
    result = {"d_out/d_h": grads[0], "d_out/d_c": grads[1]}
    if with_leaf:
        result["d_out/d_w"] = grads[2]
    return result


def program(with_leaf: bool) -> dict[str, engine.Tensor]:
    return _run(engine, with_leaf)


def torch_program(torch: Any, with_leaf: bool) -> dict[str, Any]:
    return _run(torch, with_leaf, dtype=torch.float64)
