"""An exception inside a node: has_error, skipped tasks, re-raised in the caller."""

from __future__ import annotations

import gc
from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param

NAME = "error-in-node"
TITLE = "An exception inside a node"
SUMMARY = "a custom backward raises: the GraphTask fails, the caller gets the error"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "message": Param("checksum mismatch", "the message of the ValueError the backward raises"),
}
NOTES = """\
# An exception inside a node

```
s = v.exp()                              # built first: lower sequence number
f = Fails.apply(x * 2, True)             # its backward raises ValueError
try:
    (s + f).sum().backward()             # GraphTask 1 fails
except ValueError:
    ...
f = Fails.apply(x * 2, False)            # the same Function, told not to fail
(v.exp() + f).sum().backward()           # GraphTask 2: the engine still works
```

**What to watch.**
1. GraphTask 1: `AddBackward0` makes `ExpBackward0` and `FailsBackward` ready;
   `FailsBackward` has the higher sequence number and pops first.
2. Its backward raises.  `thread_main` catches it (`thread_on_exception`): an
   `error` event, then `completion` with the error.  `set_exception` marks
   `has_error_`, stores the exception in the GraphTask's future and completes
   the future at once, even though `outstanding_tasks` is not 0:
   `ExpBackward0` is still in the queue.
3. The owner's `thread_main` loop sees the future completed and returns;
   `execute` re-raises the exception in the program, which catches it: the
   same `ValueError`, with a note naming the node ("raised in FailsBackward
   during the backward pass", printed with the traceback).  No leaf got a
   gradient.
4. GraphTask 2 runs on the same owner queue, where GraphTask 1's leftover
   `ExpBackward0` task still sits.  GraphTask 1 no longer exists (the task only
   holds a weak reference to it), so the task is *expired*: it sorts first (a
   dead GraphTask counts as infinitely deep), and the first `pop` of the second
   backward takes it, with `expired: true`, and skips it.  (Had GraphTask 1
   still been alive, it would be marked `has_error` and the task would be
   skipped all the same: `node_skipped`, reason `has_error`.)
5. GraphTask 2 completes normally; its gradients are returned.

**Ask a student:** in step 2 PyTorch completes the future *before* the other
tasks have run.  What would go wrong if it waited for `outstanding_tasks` to
reach 0 instead, with another device thread still working on this GraphTask?

**Source:** `Engine::thread_main` (`has_error_` check, `thread_on_exception`),
`GraphTask::set_exception` and `set_exception_without_signal` in
`torch/csrc/autograd/engine.cpp`; `CompareNodeTaskTime` (expired tasks count
as depth `INT_MAX`) in `engine.h`.
"""


def _fails(mod: Any) -> Any:
    class Fails(mod.autograd.Function):
        @staticmethod
        def forward(ctx, x, fail, message):
            ctx.fail = fail
            ctx.message = message
            return x * 3

        @staticmethod
        def backward(ctx, g):
            if ctx.fail:
                raise ValueError(ctx.message)
            return g * 3, None, None

    return Fails


def _run(mod: Any, message: str, **kw: Any) -> dict[str, Any]:
    Fails = _fails(mod)
    v = mod.tensor([0.3, -0.2], requires_grad=True, **kw)
    x = mod.tensor([1.0, 2.0], requires_grad=True, **kw)
    raised = 0.0
    try:
        s = v.exp()
        f = Fails.apply(x * 2, True, message)
        (s + f).sum().backward()
    except ValueError as e:
        if message not in str(e):
            raise
        raised = 1.0
    failed_x_grad = 0.0 if x.grad is None else 1.0
    # PyTorch frees the failed GraphTask as soon as backward() returns.  Ours can be
    # kept alive a little longer by a reference cycle through the exception's
    # traceback; collect it now so that every run shows the same events.
    gc.collect()
    f = Fails.apply(x * 2, False, message)
    (v.exp() + f).sum().backward()
    return {"first_backward_raised": mod.tensor(raised, **kw),
            "x.grad set by the failed backward": mod.tensor(failed_x_grad, **kw),
            "v": v.grad, "x": x.grad}


def program(message: str) -> dict[str, engine.Tensor]:
    return _run(engine, message)


def torch_program(torch: Any, message: str) -> dict[str, Any]:
    return _run(torch, message, dtype=torch.float64)
