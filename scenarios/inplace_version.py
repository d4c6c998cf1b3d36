"""An in-place op changes a tensor a node saved: the version counter catches it."""

from __future__ import annotations

import gc
from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param

NAME = "inplace-version"
TITLE = "In place on a saved tensor: the version counter"
SUMMARY = "e = x.exp(); e.add_(1): ExpBackward0's saved result changed, backward raises"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "inplace": Param(True, "modify e in place (False: e = e + 1, a new tensor, which works)"),
}
NOTES = """\
# In place on a saved tensor: the version counter

```
x = tensor([0.5, -1.0, 2.0], requires_grad=True)
e = x.exp()          # ExpBackward0 saves its result e, at e's version 0
e.add_(1.0)          # in place: e's values change, e._version becomes 1,
                     # e.grad_fn becomes AddBackward0 (next edge: ExpBackward0)
try:
    e.sum().backward()       # GraphTask 1 fails in ExpBackward0
except RuntimeError:
    ...
e = x.exp().clone()  # the fix: modify a copy, not the saved tensor
e.add_(1.0)
e.sum().backward()           # GraphTask 2 completes
```

**What to watch.**
1. Every tensor has a version counter (`_version`).  An in-place op (`add_`,
   `mul_`, `zero_`, `copy_`, ...) bumps it; an out-of-place op makes a new
   tensor at version 0.  When an op saves a tensor for its backward, the node
   remembers the version the tensor had then.
2. `exp`'s gradient is `grad * result`: `ExpBackward0` saves its *output* `e`.
   `e.add_(1.0)` then overwrites those values, so the saved result is no longer
   `exp(x)`.  The node cannot know the old values: it only sees that `e` is now
   at version 1, not 0.  Select `ExpBackward0` in GraphTask 1: its details list
   the saved tensor with both versions ("saved at version 0, now version 1").
3. `SumBackward0` and `AddBackward0` run normally (neither saved anything).
   When `ExpBackward0` runs, it unpacks its saved tensors first
   (`SavedVariable::unpack`), finds the version changed and raises: the `error`
   event, then the GraphTask completes with the error, as in `error-in-node`.
   The message is PyTorch's: "one of the variables needed for gradient
   computation has been modified by an inplace operation: [torch.DoubleTensor
   [3]], which is output 0 of Exp, is at version 1; expected version 0 instead."
4. GraphTask 2 modifies a `clone()`: the saved result keeps its version and
   the backward completes; `x.grad` is `exp(x)`.
5. Had `x` itself been modified (`x.add_(1)`), the op would have been refused
   at once: "a leaf Variable that requires grad is being used in an in-place
   operation."  With `inplace=False` the program writes `e = e + 1`: a new
   tensor, nothing saved is touched, and the first backward succeeds too.

**Ask a student:** `relu` saves its *result* as well.  Would `y = x.relu();
y.mul_(2)` fail in backward?  And `y = x.sigmoid(); z = y * 3; y.add_(1)` (the
multiply by a constant saves nothing of `y`)?

**Source:** `VariableVersion` (`c10/core/TensorImpl.h`), `SavedVariable::save`
and `SavedVariable::unpack` (the version check and its message) in
`torch/csrc/autograd/saved_variable.cpp`; `check_inplace` (the leaf error) in
`torch/csrc/autograd/VariableTypeUtils.h`; `rebase_history` in
`torch/csrc/autograd/variable.cpp`; the error's way out through
`Engine::thread_main` (`thread_on_exception`) and `GraphTask::set_exception` in
`torch/csrc/autograd/engine.cpp`.
"""


def _run(mod: Any, inplace: bool, **kw: Any) -> dict[str, Any]:
    x = mod.tensor([0.5, -1.0, 2.0], requires_grad=True, **kw)
    raised = 0.0
    try:
        e = x.exp()
        if inplace:
            e.add_(1.0)
        else:
            e = e + 1.0
        e.sum().backward()
    except RuntimeError as err:
        if "modified by an inplace operation" not in str(err):
            raise
        raised = 1.0
    failed_x_grad = 0.0 if x.grad is None else 1.0
    x.grad = None
    gc.collect()  # the failed GraphTask goes now, as PyTorch frees it (see error-in-node)
    e = x.exp().clone()
    e.add_(1.0)
    e.sum().backward()
    return {"first_backward_raised": mod.tensor(raised, **kw),
            "x.grad set by the first backward": mod.tensor(failed_x_grad, **kw),
            "x": x.grad}


def program(inplace: bool) -> dict[str, engine.Tensor]:
    return _run(engine, inplace)


def torch_program(torch: Any, inplace: bool) -> dict[str, Any]:
    return _run(torch, inplace, dtype=torch.float64)
