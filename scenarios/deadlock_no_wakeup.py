"""Without the dummy wake-up task, the owner sleeps forever on its empty queue."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param

NAME = "deadlock-no-wakeup"
TITLE = "Deadlock: the lost wake-up (no dummy task to the owner)"
SUMMARY = "wake_owner=False: the GraphTask completes on cuda:0 and nobody wakes the owner"
THREADS = ("cpu (owner)", "cuda:0", "cuda:1")
EXPECT = "deadlock"
ENGINE: dict[str, Any] = {"wake_owner": False}
PARAMS = {
    "x0": Param(1.0, "first element of the CPU input x"),
    "x1": Param(2.0, "second element of the CPU input x"),
}
NOTES = """\
# Deadlock: the lost wake-up

```
x  = tensor([1., 2.])                                   # data on the CPU
w0 = tensor([0.5, -0.25], device="cuda:0", requires_grad=True)
w1 = tensor([1.5, 0.75], device="cuda:1", requires_grad=True)
y = (x.to("cuda:0") * w0).exp().to("cuda:1") * w1
y.to("cpu").sum().backward()
```

The backward starts on the CPU (the owner runs `SumBackward0` and the last
`ToCopyBackward0`), moves to cuda:1 and ends on cuda:0, where w0's
`AccumulateGrad` is the last node.  Long before that, the owner's CPU queue is
empty and the owner sleeps in `pop()`.  It is waiting for *a task*, not for
the GraphTask to finish: it re-checks "is my GraphTask done?" only after each
task it pops.

This scenario runs with the engine option **`wake_owner=False`**: the thread
that completes the GraphTask does not tell the owner.

**What to watch.**
1. The owner's `thread_wait` on `queue cpu` early on, after it has pushed the
   first task to cuda:1.
2. cuda:1 and then cuda:0 run their nodes; cuda:0 runs w0's `AccumulateGrad`:
   `outstanding_decrement` to 0 and `completion`, **on cuda:0**.  No `wakeup`
   event follows.
3. cuda:0 goes back to waiting on its queue.  Every thread waits on a queue
   and no task is anywhere: the controller reports a `deadlock` of kind
   **lost-wakeup** (there is no cycle): "GraphTask 1 completed on cuda:0, not on
   its owner cpu (owner), and no wake-up task was pushed to the owner's
   queue."
4. Run with the real design (`--engine wake_owner=true`, the default): after
   `completion`, a `wakeup` event and a `push` with `dummy: true` to queue
   `cpu`; the owner wakes, pops the dummy task and returns.  This is the
   `multi-device` scenario's ending.

**The fix**, in `Engine::thread_main` (the comment is PyTorch's): "The current
worker thread finish the graph_task, but the owning thread of the graph_task
might be sleeping on pop() if it does not have work.  So we need to send a
dummy function task to the owning thread just to ensure that it's not
sleeping, so that we can exit the thread_main.  If it has work, it might see
that graph_task->outstanding_tasks_ == 0 before it gets to the task, but it's
a no-op anyway.  NB: This is not necessary if the current thread is the owning
thread."  The dummy task is `NodeTask(graph_task, nullptr, InputBuffer(0))`,
and `CompareNodeTaskTime` puts tasks without a function first.

**Ask a student:** a condition variable on the GraphTask ("done") would also
wake the owner.  Why would that not be enough for an owner that is a *device*
thread running a reentrant backward?  (Where is that thread waiting?)

**Source:** `Engine::thread_main` (the `worker_device != base_owner` branch),
`ReadyQueue::pop`, `CompareNodeTaskTime` in `torch/csrc/autograd/engine.cpp`
and `engine.h`.
"""


def _run(mod: Any, x0: float, x1: float, dev0: str, dev1: str, **kw: Any) -> dict[str, Any]:
    x = mod.tensor([x0, x1], **kw)
    w0 = mod.tensor([0.5, -0.25], requires_grad=True, device=dev0, **kw)
    w1 = mod.tensor([1.5, 0.75], requires_grad=True, device=dev1, **kw)
    y = (x.to(dev0) * w0).exp().to(dev1) * w1
    y.to("cpu").sum().backward()
    return {"w0": w0.grad, "w1": w1.grad}


def program(x0: float, x1: float) -> dict[str, engine.Tensor]:
    return _run(engine, x0, x1, "cuda:0", "cuda:1")


def torch_program(torch: Any, x0: float, x1: float) -> dict[str, Any]:
    return _run(torch, x0, x1, "cpu", "cpu", dtype=torch.float64)
