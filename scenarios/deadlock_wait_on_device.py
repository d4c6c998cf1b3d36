"""A user backward waits on a signal that a node on cuda:0 sets, but that node needs its output."""

from __future__ import annotations

import threading
from typing import Any

from autograd_tui import engine
from autograd_tui.engine.sync import Signal
from autograd_tui.scenarios import Param, ScenarioError

NAME = "deadlock-wait-on-device"
TITLE = "Deadlock: a backward that waits on another engine thread"
SUMMARY = "a CPU node waits for cuda:0, which needs that node's output first"
THREADS = ("cpu (owner)", "cuda:0")
EXPECT = "deadlock"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "fixed": Param(False, "let an independent cuda:0 node set the signal (the program then "
                          "completes)"),
}
NOTES = """\
# Deadlock: a backward that waits on another engine thread

```
sig = Signal("cuda:0 has run MulBackward0", set_by="cuda:0")
class WaitsForDevice(Function):
    def backward(ctx, g):
        sig.wait()                       # wait until cuda:0 has done its part
        return g

x = tensor([1., 2.], device="cuda:0", requires_grad=True)
a = x * 3                                # cuda:0
main = WaitsForDevice.apply(a.to("cpu")).sum()
c = x * 5                                # cuda:0, independent of the CPU node
side = c.to("cpu").sum()
a.grad_fn.register_prehook(lambda grads: sig.set())     # fixed=true: c.grad_fn
(main + side).backward()
```

(`Signal` is a `threading.Event` the controller can see; `set_by` tells it
which thread is expected to set it.)

No engine option is involved: this deadlocks in PyTorch too.  The signal is
set by a pre-hook of `a`'s `MulBackward0` on cuda:0, but that node cannot run
before it has its input gradient, and that gradient comes *from* the waiting
node.  The engine runs each device's nodes on one thread, in dependency order;
a node that blocks on work downstream of itself blocks forever.

**What to watch.**
1. The owner runs `AddBackward0`, the `side` branch's CPU nodes (its
   `ToCopyBackward0` pushes `c`'s `MulBackward0` to queue `cuda:0`, which
   starts the cuda:0 thread), then `WaitsForDeviceBackward`, which waits:
   `thread_wait` on `signal cuda:0 has run MulBackward0`.
2. cuda:0 runs `c`'s `MulBackward0` (no signal: the hook is on `a`'s node),
   and x's `AccumulateGrad` buffer goes into `not_ready`: it still waits for
   `a`'s share.  cuda:0 then waits on its empty queue.
3. The controller reports the cycle `thread cpu (owner) → signal … → thread
   cuda:0 → queue cuda:0 → thread cpu (owner)`: the owner waits on a signal
   only cuda:0 sets; cuda:0 waits on a queue only the owner, blocked inside a
   node, could feed.
4. Run with `fixed=true`: the signal is set by `c`'s `MulBackward0`, which
   depends on nothing the CPU node holds.  Whichever thread gets there first,
   the program completes; cuda:0 runs the last node (x's `AccumulateGrad`)
   and wakes the owner.

**There is no engine fix.**  Order device work by the graph's dependencies
(or, on real GPUs, with CUDA streams and events), never with host-side waits
inside a backward.  The engine cannot tell which of a node's waits are safe.

**Ask a student:** a user thread *outside* the engine sets the signal instead
(say, a data loader).  Is the program safe now?  What if that thread calls
`backward()` itself?

**Source:** `Engine::thread_main`, `Engine::ready_queue` (one queue and one
thread per device) in `torch/csrc/autograd/engine.cpp`.
"""


def _run(mod: Any, fixed: bool, sig: Any, wait: Any, dev: str, **kw: Any) -> dict[str, Any]:
    class WaitsForDevice(mod.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1

        @staticmethod
        def backward(ctx, g):
            wait()
            return g

    x = mod.tensor([1.0, 2.0], requires_grad=True, device=dev, **kw)
    a = x * 3
    main = WaitsForDevice.apply(a.to("cpu")).sum()
    c = x * 5
    side = c.to("cpu").sum()
    (c if fixed else a).grad_fn.register_prehook(lambda grads: sig.set())
    (main + side).backward()
    return {"x": x.grad}


def program(fixed: bool) -> dict[str, engine.Tensor]:
    sig = Signal("cuda:0 has run MulBackward0", set_by="cuda:0")
    return _run(engine, fixed, sig, sig.wait, "cuda:0")


def torch_program(torch: Any, fixed: bool) -> dict[str, Any]:
    if not fixed:
        raise ScenarioError(f"{NAME}: deadlocks in PyTorch too; run it with fixed=true")
    sig = threading.Event()

    def wait() -> None:
        if not sig.wait(timeout=10):
            raise RuntimeError("the signal was never set")

    return _run(torch, fixed, sig, wait, "cpu", dtype=torch.float64)
