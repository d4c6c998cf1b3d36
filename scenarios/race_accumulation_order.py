"""A fan-in across three threads: the float sum in one InputBuffer depends on arrival order."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param

NAME = "race-accumulation-order"
TITLE = "Race: a fan-in across devices whose float sum depends on the order of arrival"
SUMMARY = "x's gradient is 0.1 + 0.2 + 0.3, added in the order the three threads deliver it"
THREADS = ("cpu (owner)", "cuda:0", "cuda:1")
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "c0": Param(0.1, "the CPU branch's factor: its gradient for x"),
    "c1": Param(0.2, "the cuda:0 branch's factor"),
    "c2": Param(0.3, "the cuda:1 branch's factor"),
}
NOTES = """\
# Race: the order of a floating-point sum

```
x = tensor(1.0, requires_grad=True)                       # on the CPU
y0 = x * 0.1                                              # CPU
y1 = (x.to("cuda:0") * 0.2).to("cpu")                     # the cuda:0 thread
y2 = (x.to("cuda:1") * 0.3).to("cpu")                     # the cuda:1 thread
(y0 + y1 + y2).backward()
```

`x` is used three times, and its three gradients (0.1, 0.2 and 0.3) come from
three different threads: the owner runs `MulBackward0` of the CPU branch, the
cuda:0 and cuda:1 threads each run their branch and send the result back with
`ToCopyBackward0`.  All three meet in **one InputBuffer slot**, the input of x's
`AccumulateGrad`: the first to arrive is stored (`buffer_accumulate`, `mode:
first`), the next two are added (`mode: add`), **in the order the threads get
there**.

Floating-point addition is commutative but not associative:
`(0.1 + 0.2) + 0.3 = 0.6000000000000001` while `(0.1 + 0.3) + 0.2 = 0.6`.  So
`x.grad` is 0.6 or 0.6000000000000001 depending on which thread delivers last:
the same program, the same inputs, two results, both "correct" to 16 digits.
In PyTorch the same happens with real GPUs (and inside one kernel with atomic
adds); it is why training runs are not bit-reproducible unless you ask for
deterministic algorithms.

Such differences hide from testing because tests compare with a tolerance
(rightly), and because a test machine tends to run the same interleaving every
time: the result looks deterministic until a different machine, load or driver
changes the timing.

**What to watch.**
1. The three `buffer_accumulate` events of x's `AccumulateGrad`: their
   `from_node` and `mode` say who arrived first, and the `value` after each add.
2. Run `autograd-tui explore race-accumulation-order`: the schedules fall into
   two classes of completed runs with bit-different gradients; the explorer shows
   one schedule of each side by side.
3. Replay both (`--policy schedule:STRING`) and compare `x.grad` in the
   gradients pane.

**Ask a student:** with two gradients instead of three, can the order change the
result?  (Is `a + b == b + a` exact in floating point?)  And how would you make
the sum independent of the order of arrival?

**Source:** `InputBuffer::add` and `accumulate` in
`torch/csrc/autograd/input_buffer.cpp`; `Engine::evaluate_function` in
`engine.cpp`, which adds into the `not_ready` buffer under the GraphTask's mutex
on whichever thread produced the gradient.
"""


def _run(mod: Any, c0: float, c1: float, c2: float, dev0: str, dev1: str,
         **kw: Any) -> dict[str, Any]:
    x = mod.tensor(1.0, requires_grad=True, **kw)
    y0 = x * c0
    y1 = (x.to(dev0) * c1).to("cpu")
    y2 = (x.to(dev1) * c2).to("cpu")
    (y0 + y1 + y2).backward()
    return {"x": x.grad}


def program(c0: float, c1: float, c2: float) -> dict[str, engine.Tensor]:
    return _run(engine, c0, c1, c2, "cuda:0", "cuda:1")


def torch_program(torch: Any, c0: float, c1: float, c2: float) -> dict[str, Any]:
    return _run(torch, c0, c1, c2, "cpu", "cpu", dtype=torch.float64)
