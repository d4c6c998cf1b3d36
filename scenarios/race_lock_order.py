"""Two backward functions on two device threads take two user locks in opposite orders."""

from __future__ import annotations

import threading
from typing import Any

from autograd_tui import engine
from autograd_tui.engine.sync import TrackedLock
from autograd_tui.scenarios import Param

NAME = "race-lock-order"
TITLE = "Race: two device threads take two user locks in opposite orders"
SUMMARY = "completes under most schedules; `autograd-tui explore` finds the ones that deadlock"
THREADS = ("cpu (owner)", "cuda:0", "cuda:1")
EXPECT = "complete"  # under round-robin; some interleavings deadlock (docs/explore.md)
ENGINE: dict[str, Any] = {}
PARAMS = {
    "x": Param(1.0, "the leaf both branches start from"),
}
NOTES = """\
# Race: a lock-order inversion between two device threads

```
stats, params = TrackedLock("stats"), TrackedLock("params")

class ScaleOn0(Function):                    # runs on the cuda:0 thread
    def backward(ctx, g):
        with params:                         # second lock: params
            return g * 2

class ScaleOn1(Function):                    # runs on the cuda:1 thread
    def backward(ctx, g):
        with stats:                          # second lock: stats
            return g * 3

a = ScaleOn0.apply(x.to("cuda:0"))
b = ScaleOn1.apply(x.to("cuda:1").exp())     # one node more on this branch
# a pre-hook takes the node's first lock, a post-hook releases it:
a.grad_fn.register_prehook(take(stats));  a.grad_fn.register_hook(release(stats))
b.grad_fn.register_prehook(take(params)); b.grad_fn.register_hook(release(params))
(a.to("cpu") + b.to("cpu")).backward()
```

Two user locks, taken in **opposite orders** by two backward functions that run
on two different device threads: cuda:0 takes `stats` (in its pre-hook) and then
`params` (in its backward); cuda:1 takes `params` and then `stats`.  This is the
textbook lock-order inversion, and it **only sometimes** deadlocks: only when
each thread has taken its first lock and neither has taken its second.  The
window is one step wide: between the pre-hook's `hook` event and the backward.

Under the default round-robin schedule (and almost any other) the two windows
do not overlap, because cuda:1's branch has one node more (`ExpBackward0`) and
reaches its lock later: the run **completes**, with the right gradient.  That is
why such bugs hide from testing: every test run passes, and the deadlock waits
for the one interleaving in which both threads stop at the wrong moment (in a
real program: a slow GPU, a page fault, a busy machine).

**What to watch.**
1. Run it with `autograd-tui run race-lock-order`: it completes.  Look at the
   `hook` events (`pre`) of `ScaleOn0Backward` and `ScaleOn1Backward`: each
   marks a thread holding its first lock.
2. Run `autograd-tui explore race-lock-order`: the explorer enumerates the
   interleavings with few preemptions and finds schedules in which both
   pre-hooks run before either backward.  It prints the command that replays one,
   `autograd-tui run race-lock-order --policy schedule:STRING`.
3. Replayed, the run stops at a deadlock: `thread cuda:0 → lock params → thread
   cuda:1 → lock stats → thread cuda:0`.
4. **The fix:** take the locks in one global order (`stats` before `params`) on
   every thread, or hold one lock for both.  No schedule of the fixed program
   deadlocks: the explorer then covers every schedule up to its bound and finds none.

**Ask a student:** the deadlock needs a preemption in a window one step wide.
How many preemptions does the shortest deadlocking schedule have?  Why does a
search that bounds preemptions (CHESS) find bugs like this one so quickly?

**Source:** the device threads and their queues are `Engine::thread_init` and
`Engine::ready_queue` in `torch/csrc/autograd/engine.cpp`; the hooks run in
`call_pre_hooks` / `call_function_post_hooks` (`engine.cpp`).  The locks are
user code: PyTorch cannot see them, and neither can its tests.
"""


def _run(mod: Any, x: float, stats: Any, params: Any, dev0: str, dev1: str,
         **kw: Any) -> dict[str, Any]:
    class ScaleOn0(mod.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            with params:
                return g * 2

    class ScaleOn1(mod.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 3

        @staticmethod
        def backward(ctx, g):
            with stats:
                return g * 3

    def take(lock: Any) -> Any:
        def take_lock(grad_outputs: Any) -> None:
            lock.acquire()
        return take_lock

    def release(lock: Any) -> Any:
        def release_lock(grad_inputs: Any, grad_outputs: Any) -> None:
            lock.release()
        return release_lock

    leaf = mod.tensor(x, requires_grad=True, **kw)
    a = ScaleOn0.apply(leaf.to(dev0))
    b = ScaleOn1.apply(leaf.to(dev1).exp())
    a.grad_fn.register_prehook(take(stats))
    a.grad_fn.register_hook(release(stats))
    b.grad_fn.register_prehook(take(params))
    b.grad_fn.register_hook(release(params))
    (a.to("cpu") + b.to("cpu")).backward()
    return {"x": leaf.grad}


def program(x: float) -> dict[str, engine.Tensor]:
    return _run(engine, x, TrackedLock("stats"), TrackedLock("params"), "cuda:0", "cuda:1")


def torch_program(torch: Any, x: float) -> dict[str, Any]:
    return _run(torch, x, threading.Lock(), threading.Lock(), "cpu", "cpu",
                dtype=torch.float64)
