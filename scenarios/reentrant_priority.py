"""PyTorch's test_reentrant_priority: a reentrant chain 10 deep beside a plain Function."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param, ScenarioError

NAME = "reentrant-priority"
TITLE = "Reentrant priority: depth beats sequence number"
SUMMARY = "a chain of 10 nested backwards runs to the end before the plain MyFunction node"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "start": Param(9, "the Reentrant chain counts down from here: start + 1 nested backwards"),
    "old_graph": Param(False, "the first Reentrant also runs a backward through a graph built "
                              "before MyFunction (lower sequence numbers)"),
}
NOTES = """\
# Reentrant priority (PyTorch's test_reentrant_priority)

```
a = MyFunction.apply(tensor(6.0))      # backward: order.append("MyFunction")
b = Reentrant.apply(tensor(9.0))       # backward: order.append("Reentrant"), and unless
(a * b).backward()                     #   ctx.x < 0, Reentrant.apply(ctx.x).backward()
# order == ["Reentrant"] * 10 + ["MyFunction"]
```

`MulBackward0` makes both custom nodes ready at once.  `ReentrantBackward`
(built later: higher sequence number) pops first, and its backward starts a
nested backward of a fresh `Reentrant` (depth 1), whose backward starts
another (depth 2), … ten deep.  All of it runs on the owner thread, in nested
`thread_main` calls on the owner's CPU queue, where `MyFunctionBackward`
(depth 0) is waiting the whole time.  PyTorch's test asserts that it waits
until the entire chain is done.

**What to watch.**
1. `graph_task_created` with `reentrant_depth` 1, 2, …, 10 and
   `reentrant_handoff` (`mode: nested`) at each level: the owner's call stack
   grows ten `thread_main`s deep.
2. Each `push` event's `order` field: `MyFunctionBackward` [depth 0] stays at
   the **end** of the queue, behind every task of a deeper GraphTask.
3. The ten `completion` events, innermost first; then `MyFunctionBackward`
   runs.  The program returns `order` as 1 (Reentrant) and 0 (MyFunction).

**An honest caveat.**  In this exact graph the sequence numbers alone would
give the same order: every node the nested backwards run was created after
`MyFunctionBackward`.  (Our engine has `--engine depth_priority=false`: try it,
the order does not change.)  Run with **`old_graph=true`** to see the depth
rule decide: the first Reentrant's backward now also runs a backward through
`(p * 2).sum()`, a graph built *before* MyFunction, with lower sequence
numbers.  With the depth rule, `MyFunctionBackward` still waits; with
`depth_priority=false` it jumps into the nested loop and runs *inside* the
first `ReentrantBackward`, second in `order`.  That is harmless here and a
deadlock in the `deadlock-lock-steal` scenario.

**Ask a student:** why must a nested `thread_main` not run its parent's tasks,
even if they are ready and the nested GraphTask has nothing queued yet?

**Source:** `CompareNodeTaskTime` (`getReentrantDepth()` before
`sequence_nr()`) in `torch/csrc/autograd/engine.h`;
`Engine::execute_with_graph_task` and `Engine::thread_main` in `engine.cpp`;
`test_reentrant_priority` in `test/test_autograd.py`.
"""


def _functions(mod: Any, order: list[float], old: Any, **kw: Any) -> tuple[Any, Any]:
    class MyFunction(mod.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, x):
            order.append(0.0)
            return x

    class Reentrant(mod.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            with mod.enable_grad():
                ctx.x = mod.tensor(float(x.detach()), requires_grad=True, **kw)
                ctx.x = ctx.x - 1
            return ctx.x.detach()

        @staticmethod
        def backward(ctx, x):
            order.append(1.0)
            if old:
                with mod.enable_grad():
                    old.pop().backward()
            if ctx.x < 0:
                return x
            with mod.enable_grad():
                Reentrant.apply(ctx.x).backward()
            return x

    return MyFunction, Reentrant


def _run(mod: Any, start: int, old_graph: bool, **kw: Any) -> dict[str, Any]:
    if start < 0:
        raise ScenarioError(f"{NAME}: parameter 'start' must be >= 0, not {start}")
    order: list[float] = []
    p = mod.tensor(1.5, requires_grad=True, **kw)
    old = [(p * 2).sum()] if old_graph else []
    MyFunction, Reentrant = _functions(mod, order, old, **kw)
    u = mod.tensor(6.0, requires_grad=True, **kw)
    v = mod.tensor(float(start), requires_grad=True, **kw)
    a = MyFunction.apply(u)
    b = Reentrant.apply(v)
    (a * b).backward()
    out = {"u": u.grad, "v": v.grad, "order": mod.tensor(order, **kw)}
    if old_graph:
        out["p"] = p.grad
    return out


def program(start: int, old_graph: bool) -> dict[str, engine.Tensor]:
    return _run(engine, start, old_graph)


def torch_program(torch: Any, start: int, old_graph: bool) -> dict[str, Any]:
    return _run(torch, start, old_graph, dtype=torch.float64)
