"""retain_graph: saved tensors are released after backward; a second backward fails."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param

NAME = "retain-graph"
TITLE = "retain_graph: freed saved tensors and the second backward"
SUMMARY = "backward frees saved tensors; a second backward raises unless retain_graph"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "retain": Param(False, "pass retain_graph=True to the first backward"),
}
NOTES = """\
# retain_graph: the second backward

```
out = ((x * w).exp() + 1).sum()
out.backward()                 # retain_graph defaults to create_graph = False
try:
    out.backward()             # the same graph again
except RuntimeError as e:      # "Trying to backward through the graph a second time ..."
    ...
```

Many backward nodes keep tensors from the forward: `MulBackward0` keeps both
factors, `ExpBackward0` keeps its result.  Those *saved tensors* hold memory
(for a real network, most of it).  Unless asked to keep the graph, the engine
frees them as soon as each node has run: `evaluate_function` calls
`fn.release_variables()` when `keep_graph` is false.

**What to watch.**
1. First backward: `graph_task_created` has `keep_graph: false`.  Right after
   each node's maths (before its `node_end`) the engine releases its saved
   tensors; afterwards the node's `saved_tensor_summaries()` says `(released)`.
2. The gradients of the first backward are kept (`x`, `w`).
3. Second backward: a new GraphTask on the **same** nodes.  `SumBackward0` and
   the `+ 1` node (`AddBackward0`) save no tensors and run fine;
   `ExpBackward0` tries to unpack its freed result and raises: an `error`
   event, "Trying to backward through the graph a second time (or directly
   access saved tensors after they have already been freed). …".  The
   GraphTask completes with that error, and `backward()` re-raises it in the
   program, which catches it (`second_backward_raised` = 1).
4. Run with `retain=true`: the first GraphTask has `keep_graph: true`, nothing
   is released, the second backward succeeds and the gradients **accumulate**
   (`x after second backward` = 2 × the first).

**Ask a student:** the error comes from `ExpBackward0`, not from the root.
Which nodes of a graph can be run a second time without `retain_graph`, and
why does PyTorch not check up front?

**Source:** `Engine::evaluate_function` (`if (!graph_task->keep_graph_)
fn.release_variables();`) in `torch/csrc/autograd/engine.cpp`;
`SavedVariable::unpack` and its `ERR_BACKWARD_TWICE` message in
`torch/csrc/autograd/saved_variable.cpp`.
"""


def _run(mod: Any, retain: bool, **kw: Any) -> dict[str, Any]:
    x = mod.tensor([0.5, 2.0], requires_grad=True, **kw)
    w = mod.tensor([-1.0, 0.25], requires_grad=True, **kw)
    out = ((x * w).exp() + 1).sum()
    out.backward(retain_graph=retain)
    result = {"x": x.grad.clone(), "w": w.grad.clone()}
    raised = 0.0
    try:
        out.backward()
    except RuntimeError as e:
        if "second time" not in str(e):
            raise
        raised = 1.0
    result["second_backward_raised"] = mod.tensor(raised, **kw)
    if not raised:
        result["x after second backward"] = x.grad
        result["w after second backward"] = w.grad
    return result


def program(retain: bool) -> dict[str, engine.Tensor]:
    return _run(engine, retain)


def torch_program(torch: Any, retain: bool) -> dict[str, Any]:
    return _run(torch, retain, dtype=torch.float64)
