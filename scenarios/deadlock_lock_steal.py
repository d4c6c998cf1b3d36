"""Without the depth rule, a nested backward runs its parent's task, which wants a held lock."""

from __future__ import annotations

import threading
from typing import Any

from autograd_tui import engine
from autograd_tui.engine.sync import TrackedLock
from autograd_tui.scenarios import Param

NAME = "deadlock-lock-steal"
TITLE = "Deadlock: a nested backward steals its parent's task (issues 18566/18568)"
SUMMARY = "depth_priority=False: a nested backward runs its parent's task, which wants the lock"
THREADS = ("cpu (owner)",)
EXPECT = "deadlock"
ENGINE: dict[str, Any] = {"depth_priority": False}
PARAMS = {
    "x": Param(1.0, "the leaf both custom Functions use"),
}
NOTES = """\
# Deadlock: a lock held across a nested backward

```
lock = TrackedLock("user lock")          # a threading.Lock the controller can see
inner = (p * 3).sum()                    # built first: the lowest sequence numbers

class TakesLock(Function):               # B
    def backward(ctx, g):
        with lock:
            return g

class HoldsLockAcrossBackward(Function): # A: built last, runs first
    def backward(ctx, g):
        with lock, enable_grad():
            inner.backward()             # a nested backward, lock held
        return g

b = TakesLock.apply(x)
a = HoldsLockAcrossBackward.apply(x)
(a + b).backward()
```

Activation checkpointing made this pattern common in 2019: a checkpointed
block runs a nested backward from inside its node, and user code around it
(here, a lock) can still be held.  `AddBackward0` makes A and B ready; A has
the higher sequence number, runs, takes the lock and starts the nested
backward of `inner`, on the same thread and the same CPU queue, **where B is
already waiting**.

This scenario runs with the engine option **`depth_priority=False`**: the
ReadyQueue orders by sequence number only.  `inner`'s nodes were built before
B, so B (depth 0) now pops *before* them, inside A's nested `thread_main`, on
the thread that holds the lock.

**What to watch.**
1. GraphTask 1: `HoldsLockAcrossBackwardBackward` starts; `graph_task_created`
   for GraphTask 2 (depth 1), `reentrant_handoff`, `mode: nested`.
2. The `push` of `inner`'s root: its `order` field puts
   `TakesLockBackward` [depth 0] **first**, ahead of GraphTask 2's task
   [depth 1].
3. `pop` and `node_start` of `TakesLockBackward`, of GraphTask 1, inside the
   nested loop; then the owner's `thread_wait` on `lock user lock`, held by
   ... the owner.  The controller reports the cycle
   `thread cpu (owner) → lock user lock → thread cpu (owner)`.
4. Run with `--engine depth_priority=true` (the default): GraphTask 2's tasks
   (depth 1) pop first, `inner`'s backward completes, A releases the lock, and
   only then does B run.

**History.**  Deadlocks like this one were reported with checkpointing in 2019
(pytorch/pytorch issue 18566 and pull request 18568).  #18568, "Make
checkpointing evaluate only the related tasks", proposed that no other
autograd task on the same worker should run until the nested backward's tasks
are done; in its review albanD gave an example of a lock held across a nested
backward.  **The fix** that PyTorch has today is
the first rule of `CompareNodeTaskTime`: a task of a deeper reentrant
GraphTask pops first (`getReentrantDepth()`), and the sequence number only
breaks ties within a depth (pytorch/pytorch#22397, "Prioritize reentrant tasks
and execute them recursively until close to limit").

**Ask a student:** the depth rule only orders *one* queue.  In albanD's
example the nested backward's work moves to a GPU (`grad_output.cuda()`).  What
does the CPU thread's nested `thread_main` pop while the GPU thread has the
nested work?  Does the depth rule help then?

**Source:** `CompareNodeTaskTime` in `torch/csrc/autograd/engine.h`;
`Engine::thread_main` and `Engine::execute_with_graph_task` in `engine.cpp`;
pytorch/pytorch#18568 and #22397.
"""


def _run(mod: Any, x: float, lock: Any, **kw: Any) -> dict[str, Any]:
    p = mod.tensor(2.0, requires_grad=True, **kw)
    inner = (p * 3).sum()

    class TakesLock(mod.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1

        @staticmethod
        def backward(ctx, g):
            with lock:
                return g

    class HoldsLockAcrossBackward(mod.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1

        @staticmethod
        def backward(ctx, g):
            with lock, mod.enable_grad():
                inner.backward()
            return g

    leaf = mod.tensor(x, requires_grad=True, **kw)
    b = TakesLock.apply(leaf)
    a = HoldsLockAcrossBackward.apply(leaf)
    (a + b).backward()
    return {"x": leaf.grad, "p": p.grad}


def program(x: float) -> dict[str, engine.Tensor]:
    return _run(engine, x, TrackedLock("user lock"))


def torch_program(torch: Any, x: float) -> dict[str, Any]:
    return _run(torch, x, threading.Lock(), dtype=torch.float64)
