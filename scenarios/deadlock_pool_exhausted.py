"""A reentrant pool that may not grow: a pool thread waits on work only the pool could do."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param, ScenarioError
from autograd_tui.scenarios.reentrant_deep import _reentrant

NAME = "deadlock-pool-exhausted"
TITLE = "Deadlock: an exhausted reentrant thread pool"
SUMMARY = "pool of 1 thread, depth limit 2: the pool thread waits on its own hand-off"
THREADS = ("cpu (owner)", "reentrant-pool-1")
EXPECT = "deadlock"
ENGINE: dict[str, Any] = {"reentrant_pool_size": 1, "max_recursion_depth": 2}
PARAMS = {
    "depth": Param(8, "how many nested backwards the chain makes"),
}
NOTES = """\
# Deadlock: an exhausted reentrant pool

```
class Reentrant(Function):     # backward: unless ctx.x < 0, Reentrant.apply(ctx.x).sum().backward()
Reentrant.apply(tensor(8.0)).sum().backward()       # 8 nested backwards
```

Nested `thread_main` calls stack up on one thread, so the engine allows only
`max_recursion_depth` of them per thread (`MAX_DEPTH = 60` in PyTorch, kept
below ThreadSanitizer's limit of 65 locks held at once).  Past it,
`execute_with_graph_task` hands the nested GraphTask to the **reentrant thread
pool** and the calling thread blocks on its future (see `reentrant-deep`).
A pool thread that reaches the limit itself hands off again and blocks: every
hand-off needs a *new* thread, because every thread before it is blocked.

This scenario runs with **`max_recursion_depth=2`** (so the hand-offs come
early) and **`reentrant_pool_size=1`**: at most one pool thread.

**What to watch.**
1. The owner nests levels 1 and 2 (`reentrant_handoff`, `mode: nested`), then
   hands level 3 to the pool (`mode: pool`) and waits on its future
   (`thread_wait` on `future GraphTask 4`).
2. `reentrant-pool-1` starts, takes GraphTask 4, nests two more levels, and
   hands level 6 (GraphTask 7) to the pool: `add_thread_pool_task` wants a
   new thread (no worker is idle) but the pool is full.  The pool thread
   waits on GraphTask 7's future.
3. GraphTask 7's root sits in the owner's CPU queue (a pool thread adopts its
   parent's queue), and no thread serves it: the owner and the only pool
   thread are both blocked inside nodes.  The controller reports the cycle
   `thread cpu (owner) → future GraphTask 4 → thread reentrant-pool-1 →
   future GraphTask 7 → queue cpu → …`, explained hop by hop.
4. Run with `--engine reentrant_pool_size=none` (PyTorch's design): a second
   pool thread takes GraphTask 7 and the chain completes.

**The fix**: PyTorch's pool is unbounded.
`add_thread_pool_task` starts a new thread whenever the queued GraphTasks
outnumber the idle workers (`num_workers_ <= graphtasks_queue_.size()`), so a
hand-off is always picked up, even when every pool thread is blocked on a
nested future.  Threads are cheap next to a hang; a chain 10 000 deep would
still need 10 000 / 60 threads.

**Ask a student:** why can't the blocked pool thread just run GraphTask 7
itself, nested, like the owner did for levels 1 and 2?

**Source:** `Engine::execute_with_graph_task` (the `max_recursion_depth_`
branch), `Engine::add_thread_pool_task`, `Engine::reentrant_thread_init`,
`ThreadPoolShared` in `torch/csrc/autograd/engine.cpp`; `MAX_DEPTH` in
`engine.h`.
"""


def _run(mod: Any, depth: int, **kw: Any) -> dict[str, Any]:
    if depth < 0:
        raise ScenarioError(f"{NAME}: parameter 'depth' must be >= 0, not {depth}")
    v = mod.tensor(float(depth), requires_grad=True, **kw)
    _reentrant(mod, **kw).apply(v).sum().backward()  # the chain of reentrant-deep
    return {"v": v.grad}


def program(depth: int) -> dict[str, engine.Tensor]:
    return _run(engine, depth)


def torch_program(torch: Any, depth: int) -> dict[str, Any]:
    return _run(torch, depth, dtype=torch.float64)
