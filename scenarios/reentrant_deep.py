"""A reentrant chain deeper than the depth limit: hand-offs to the reentrant thread pool."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param, ScenarioError

NAME = "reentrant-deep"
TITLE = "Deeper than MAX_DEPTH: the reentrant thread pool"
SUMMARY = "150 nested backwards: every 60 levels the next goes to a new pool thread"
THREADS = ("cpu (owner)", "reentrant-pool-1", "reentrant-pool-2")
EXPECT = "complete"
ENGINE: dict[str, Any] = {"max_recursion_depth": 60}
PARAMS = {
    "depth": Param(150, "how many nested backwards the chain makes"),
}
NOTES = """\
# Deeper than the depth limit: the reentrant thread pool

```
class Reentrant(Function):     # backward: unless ctx.x < 0, Reentrant.apply(ctx.x).backward()
v = tensor(150.0)
(Reentrant.apply(v) * 2).sum().backward()   # 150 nested backwards, one inside the other
```

Each reentrant backward runs a nested `thread_main` on the calling thread
(see the `reentrant` scenario).  Each nesting adds frames to that thread's
stack; 150 levels of them would overflow a C++ thread's stack in PyTorch (and
strain Python's recursion limit here).  So the engine counts: `current_depth`
is the nesting on *this* thread, and when it reaches `max_recursion_depth`
(`MAX_DEPTH = 60` in PyTorch) the next reentrant backward is not run inline.
It is handed to the **reentrant thread pool**: the calling thread pushes the
GraphTask into the pool's queue (`add_thread_pool_task`, which starts a new
pool thread when no worker is idle) and then blocks on the GraphTask's future.
The pool thread adopts the GraphTask's queue and device, starts again at
`current_depth` 0 (but keeps `total_depth`, so priorities stay right) and runs
`thread_main` for it.

**What to watch.**
1. Levels 1 to 60 (GraphTasks 2 to 61): `reentrant_handoff` with
   `mode: nested` on `cpu (owner)`, `current_depth` 0, 1, …, 59.
2. Level 61 (GraphTask 62): `reentrant_handoff` with `mode: pool` at
   `current_depth` 60.  The owner waits (`thread_wait` on `future GraphTask
   62`), blocked inside a node 60 levels deep, and `reentrant-pool-1` starts
   (`thread_start`, role `pool`) and takes GraphTask 62.
3. `reentrant-pool-1` starts over at `current_depth` 0: it nests levels 62 to
   121, hands level 122 (GraphTask 123) to `reentrant-pool-2` and blocks in
   turn.  `reentrant-pool-2` runs levels 122 to 150.
4. The chain unwinds: each innermost GraphTask completes, its future wakes the
   blocked thread (`thread_wake` on `future …`), and so on back to the owner.
   `reentrant_depth` in `graph_task_created` keeps counting across threads
   (1 … 150): it is `total_depth + 1`, not the per-thread `current_depth`.
5. Try `depth=5` with `--engine max_recursion_depth=0`: every reentrant
   backward goes to the pool, and since every pool thread is itself blocked on
   the next level's future, the pool grows one thread per level
   (`reentrant-pool-1` to `reentrant-pool-5`).

**Ask a student:** the pool thread runs the GraphTask on the *parent's* CPU
queue (`graph_task->cpu_ready_queue_`).  Why not give it a fresh queue?

**Source:** `Engine::execute_with_graph_task` (the `current_depth >=
max_recursion_depth_` branch), `Engine::add_thread_pool_task`,
`Engine::reentrant_thread_init`, `ThreadPoolShared` in
`torch/csrc/autograd/engine.cpp` and `engine.h` (`MAX_DEPTH`).
"""


def _reentrant(mod: Any, **kw: Any) -> Any:
    class Reentrant(mod.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            with mod.enable_grad():
                ctx.x = mod.tensor(float(x.detach()), requires_grad=True, **kw) - 1
            return ctx.x.detach()

        @staticmethod
        def backward(ctx, g):
            if ctx.x < 0:
                return g
            with mod.enable_grad():
                Reentrant.apply(ctx.x).sum().backward()
            return g

    return Reentrant


def _run(mod: Any, depth: int, **kw: Any) -> dict[str, Any]:
    if depth < 0:
        raise ScenarioError(f"{NAME}: parameter 'depth' must be >= 0, not {depth}")
    v = mod.tensor(float(depth), requires_grad=True, **kw)
    (_reentrant(mod, **kw).apply(v) * 2).sum().backward()
    return {"v": v.grad}


def program(depth: int) -> dict[str, engine.Tensor]:
    return _run(engine, depth)


def torch_program(torch: Any, depth: int) -> dict[str, Any]:
    return _run(torch, depth, dtype=torch.float64)
