"""Before the reentrant engine: a backward inside a backward blocks its own thread."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param

NAME = "deadlock-reentrant-block"
TITLE = "Deadlock: a backward inside a backward, before the reentrant engine"
SUMMARY = "reentrant='block': a nested backward waits on a queue only its thread serves"
THREADS = ("cpu (owner)",)
EXPECT = "deadlock"
ENGINE: dict[str, Any] = {"reentrant": "block"}
PARAMS = {
    "x0": Param(3.0, "first element of x"),
    "x1": Param(4.0, "second element of x"),
}
NOTES = """\
# Deadlock: a backward inside a backward (PyTorch issue 1776)

The program is the example from pytorch/pytorch#1776, "Call backward of
function in backpropagation" (June 2017), in today's `Function` style:

```
class ExampleFct(Function):
    def forward(ctx, data_in):
        ctx.save_for_backward(data_in)
        return data_in ** 2
    def backward(ctx, grad_output):
        (data_in,) = ctx.saved_tensors
        x_in_back = tensor([2.0], requires_grad=True)
        with enable_grad():
            y = x_in_back ** 2
        y.backward(tensor([1.0]))             # "unreachable" in 2017
        return grad_output * 2 * data_in

x = tensor([[3., 4.]], requires_grad=True)
ExampleFct.apply(x).backward(tensor([[1., 1.]]))
```

The report: the code "leads to an endless loop".  The answer: "This is a known
behavior: it is not possible to call `autograd.backward` or `autograd.grad`
inside the `backward` of a Function.  It will hang."  The engine of the time
ran each device's work on that device's worker thread, and a thread that
started a backward blocked until the GraphTask was done.  A node's backward
that calls `backward()` is running *on* the worker thread, so it blocked the
one thread that could run the nested GraphTask's tasks.

This scenario runs with the engine option **`reentrant="block"`**, which
re-creates that design: a nested `execute` pushes the nested root to the
caller's own queue and waits on the future.

**What to watch.**
1. GraphTask 1 runs `ExampleFctBackward`; inside it `graph_task_created` for
   GraphTask 2 (`reentrant_depth: 1`), the push of its root (`PowBackward0`)
   to queue `cpu`, and `reentrant_handoff` with **`mode: block`**.
2. The owner's `thread_wait` on `future GraphTask 2`.  Nothing else can move:
   the controller reports a `deadlock` with the cycle
   `thread cpu (owner) → future GraphTask 2 → queue cpu → thread cpu (owner)`:
   the owner waits on GraphTask 2; GraphTask 2's next task sits in queue `cpu`;
   queue `cpu` is served only by the owner.
3. Now run it with the real design: `--engine reentrant=nested` (the
   default).  The same call becomes a nested `thread_main` on the owner
   (`reentrant_handoff`, `mode: nested`) and the program completes.

**The fix** (the reentrant engine, early 2018, written up as "Note [Reentrant
backwards]" in `engine.cpp` by pytorch/pytorch#6191): a worker thread that
calls backward does not block; "instead of blocking, just get back to work on
whatever task queue you should have been working on previously", running a
nested `thread_main` until the nested GraphTask completes
(`Engine::execute_with_graph_task`).

**Ask a student:** the nested `thread_main` pops from the *same* queue as the
outer one.  What stops it from running the outer GraphTask's tasks?  (See
`reentrant-priority` and `deadlock-lock-steal`.)

**Source:** `Engine::execute_with_graph_task` (the reentrant branch) and
`Engine::thread_main` in `torch/csrc/autograd/engine.cpp`; pytorch/pytorch#1776.
"""


def _example_fct(mod: Any, inner: list[Any], **kw: Any) -> Any:
    class ExampleFct(mod.autograd.Function):
        @staticmethod
        def forward(ctx, data_in):
            ctx.save_for_backward(data_in)
            return data_in ** 2

        @staticmethod
        def backward(ctx, grad_output):
            (data_in,) = ctx.saved_tensors
            x_in_back = mod.tensor([2.0], requires_grad=True, **kw)
            with mod.enable_grad():
                y = x_in_back ** 2
            y.backward(mod.tensor([1.0], **kw))
            inner.append(x_in_back.grad)
            return grad_output * 2 * data_in

    return ExampleFct


def _run(mod: Any, x0: float, x1: float, **kw: Any) -> dict[str, Any]:
    inner: list[Any] = []
    x = mod.tensor([[x0, x1]], requires_grad=True, **kw)
    _example_fct(mod, inner, **kw).apply(x).backward(mod.tensor([[1.0, 1.0]], **kw))
    return {"x": x.grad, "x_in_back": inner[0]}


def program(x0: float, x1: float) -> dict[str, engine.Tensor]:
    return _run(engine, x0, x1)


def torch_program(torch: Any, x0: float, x1: float) -> dict[str, Any]:
    return _run(torch, x0, x1, dtype=torch.float64)
