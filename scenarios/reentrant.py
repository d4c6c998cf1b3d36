"""A Function whose backward calls backward: a nested thread_main on the same queue."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param

NAME = "reentrant"
TITLE = "Reentrant backward: a backward inside a backward"
SUMMARY = "a backward that calls backward: a nested GraphTask on the same thread and queue"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "x0": Param(0.5, "first element of x"),
    "x1": Param(-1.0, "second element of x"),
}
NOTES = """\
# Reentrant backward

```
class XExp(Function):            # f(x) = x·e^x
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x.exp()
    def backward(ctx, g):        # f'(x), found by a backward of its own
        (x,) = ctx.saved_tensors
        with engine.enable_grad():
            y = x.detach().requires_grad_()
            (y * y.exp()).sum().backward()      # <- reentrant
        return g * y.grad

side = (v * 3).tanh()            # built first: lower sequence numbers
out = XExp.apply(x).sum() + side.sum()
out.backward()
```

A backward that calls `backward()` (or `grad()`) is a **reentrant** backward.
The thread running `XExpBackward` is in the middle of a node; it cannot just
block until the inner backward is done, because the inner backward's tasks go
to the queue that this very thread serves.  So it *runs them itself*:
`execute_with_graph_task` sees the thread is already a worker
(`worker_device != NO_DEVICE`) and calls `thread_main` again, nested, until
the inner GraphTask completes.

**What to watch.**
1. GraphTask 1 (depth 0) runs `AddBackward0` and both `SumBackward0` nodes;
   then `XExpBackward` pops before the side branch's `TanhBackward0` (built
   first: a lower sequence number), which waits in the queue.
2. Inside `XExpBackward`: `graph_task_created` for **GraphTask 2** with
   `reentrant_depth: 1`, then `reentrant_handoff` with `mode: nested` and
   `current_depth: 0`.  The same thread (`cpu (owner)`) now runs a nested
   `thread_main` on the **same** CPU queue.
3. The queue holds both GraphTasks' tasks: the parent's `TanhBackward0`
   (depth 0) and the inner root (depth 1).  `push` events' `order` field puts
   depth 1 first: a nested loop runs its own work first.
4. GraphTask 2 completes (`completion` for GraphTask 2), the nested
   `thread_main` returns, `XExpBackward` returns `g · (1 + x)·e^x`, and
   GraphTask 1 carries on with x's `AccumulateGrad` and then the side branch.
5. All of GraphTask 2's events come between `XExpBackward`'s `node_start` and
   its `node_end`: the nesting lives on the owner's call stack.

**Ask a student:** the inner backward's `AccumulateGrad` writes `y.grad`.
Why is it safe to read `y.grad` right after the inner `backward()` returns,
even though the engine is still in the middle of the outer backward?

**Source:** `Engine::execute_with_graph_task` (the reentrant branch:
`current_depth`, `total_depth`, nested `thread_main`), `Engine::thread_main`,
"Note [Reentrant backwards]" in `torch/csrc/autograd/engine.cpp`;
`CompareNodeTaskTime` (`getReentrantDepth`) in `engine.h`.
"""


def _xexp(mod: Any) -> Any:
    class XExp(mod.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x.exp()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with mod.enable_grad():
                y = x.detach().requires_grad_()
                (y * y.exp()).sum().backward()
            return g * y.grad

    return XExp


def _run(mod: Any, x0: float, x1: float, **kw: Any) -> dict[str, Any]:
    v = mod.tensor([0.2, -0.4], requires_grad=True, **kw)
    x = mod.tensor([x0, x1], requires_grad=True, **kw)
    side = (v * 3).tanh()
    out = _xexp(mod).apply(x).sum() + side.sum()
    out.backward()
    return {"x": x.grad, "v": v.grad}


def program(x0: float, x1: float) -> dict[str, engine.Tensor]:
    return _run(engine, x0, x1)


def torch_program(torch: Any, x0: float, x1: float) -> dict[str, Any]:
    return _run(torch, x0, x1, dtype=torch.float64)
