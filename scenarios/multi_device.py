"""cpu -> cuda:0 -> cuda:1 and back: device threads, their queues, the wake-up task."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param

NAME = "multi-device"
TITLE = "Three devices: device threads, ready queues and the wake-up task"
SUMMARY = "cpu -> cuda:0 -> cuda:1 -> cpu: each node runs on its device's thread"
THREADS = ("cpu (owner)", "cuda:0", "cuda:1")
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "x0": Param(1.0, "first element of the CPU input x"),
    "x1": Param(2.0, "second element of the CPU input x"),
}
NOTES = """\
# Three devices: who runs what

```
x  = tensor([1., 2.])                                      # data: no grad
w0 = tensor([0.5, -0.25], device="cuda:0", requires_grad=True)
w1 = tensor([1.5, 0.75], device="cuda:1", requires_grad=True)
b  = tensor([0.1, 0.2], requires_grad=True)               # a CPU parameter
reg = (b * b).sum()                          # built first: lower sequence numbers
y = (x.to("cuda:0") * w0).exp().to("cuda:1") * w1
loss = y.to("cpu").sum() + reg
loss.backward()
```

(With no GPU, `cuda:N` devices are simulated: NumPy arrays, but the same
threads and queues as on a real GPU.)  This is model parallelism in miniature:
the data goes cpu → cuda:0 → cuda:1 and the loss comes back to the CPU.

The engine keeps **one worker thread and one ReadyQueue per device**.  CPU work
runs on the thread that called `backward()`, on that thread's own CPU queue.  A
node is queued on the device of the gradient it receives (`InputBuffer::device`),
so `MulBackward0` of `* w1` runs on the cuda:1 thread, `ExpBackward0` and
`MulBackward0` of `* w0` on cuda:0, and each `ToCopyBackward0` on the device
its gradient comes from, sending the result across.

**What to watch.**
1. `thread_start` events: the cuda:1 and cuda:0 threads start when the first
   task is pushed to their queue (PyTorch starts them all at the first
   backward).  Each then waits on its own queue (`thread_wait` on
   `queue cuda:N`).
2. `push` events name the queue: `cpu`, `cuda:1`, `cuda:0`.  A push to another
   device's queue wakes that thread (`thread_wake`).
3. Threads run at once: the owner runs the `b * b` branch (built first, so
   lower sequence numbers: it waits until the device chain is under way) while
   the device threads pass the gradient along.  The controller serializes
   them; different seeds give different interleavings, and the same gradients.
4. The owner's CPU queue then runs dry, and the owner sleeps in `pop()`
   (`thread_wait` on `queue cpu`): it still owns the GraphTask, but has
   nothing to do.
5. The last node is w0's `AccumulateGrad` on **cuda:0**.  The GraphTask
   completes on the cuda:0 thread (`completion`), which is not the owner: it
   sends the owner a **dummy task** (`wakeup`, then `push` with `dummy: true` to
   queue `cpu`).  The owner wakes, pops it (`pop`, `dummy: true`), sees the
   GraphTask completed and returns from `backward()`.

**Ask a student:** why does the owner need a task at all?  Couldn't the
finishing thread just set a flag that the owner checks?  (Where is the owner
waiting?)

**Source:** `Engine::thread_init` and `Engine::start_device_threads`,
`Engine::ready_queue` / `ready_queue_by_index`, the wake-up in
`Engine::thread_main` ("send a dummy function task to the owning thread") in
`torch/csrc/autograd/engine.cpp`; `InputBuffer::device` in `input_buffer.cpp`.
"""


def _run(mod: Any, x0: float, x1: float, dev0: str, dev1: str, **kw: Any) -> dict[str, Any]:
    x = mod.tensor([x0, x1], **kw)
    w0 = mod.tensor([0.5, -0.25], requires_grad=True, device=dev0, **kw)
    w1 = mod.tensor([1.5, 0.75], requires_grad=True, device=dev1, **kw)
    b = mod.tensor([0.1, 0.2], requires_grad=True, **kw)
    reg = (b * b).sum()
    y = (x.to(dev0) * w0).exp().to(dev1) * w1
    loss = y.to("cpu").sum() + reg
    loss.backward()
    return {"w0": w0.grad, "w1": w1.grad, "b": b.grad}


def program(x0: float, x1: float) -> dict[str, engine.Tensor]:
    return _run(engine, x0, x1, "cuda:0", "cuda:1")


def torch_program(torch: Any, x0: float, x1: float) -> dict[str, Any]:
    return _run(torch, x0, x1, "cpu", "cpu", dtype=torch.float64)
