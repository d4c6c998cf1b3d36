"""The seeds' worked example: Linear1 feeds ReLU and Linear2; their sum is indexed."""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param

NAME = "linear-relu"
TITLE = "Linear → ReLU and Linear → Add: the worked example"
SUMMARY = "Linear1 feeds ReLU and Linear2, summed; Linear1's buffer waits in not_ready"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "x": Param(1.0, "the input value"),
    "w1": Param(0.5, "Linear1's weight"),
    "b1": Param(0.1, "Linear1's bias"),
    "w2": Param(-0.3, "Linear2's weight"),
    "b2": Param(0.2, "Linear2's bias"),
}
#: which forward op made each node (by sequence_nr), and the leaves its inputs are: the
#: graph pane's boxes say ``LinearBackward0 (Linear1)``, ``AccumulateGrad (linear1.weight)``
FORWARD = {
    0: ("Linear1", "input", "linear1.weight", "linear1.bias"),
    1: "ReLU",
    2: ("Linear2", "", "linear2.weight", "linear2.bias"),
}
NOTES = """\
# The worked example

`x = linear1(input); z = relu(x); y = linear2(x); out = (z + y)[0]`, then
`out.backward()` — the example the 2017 `run_backward` notes trace step by step
(seed 004), run by today's engine.

**What to watch.**
1. `dependencies_computed`: Linear1 (`LinearBackward0`, the one with the lower
   sequence number) has **2** dependencies: ReLU and Linear2 both use its output.
2. After `AddBackward0` runs, ReLU and Linear2 are both ready.  Linear2 was
   created later, so it has the higher `sequence_nr` and pops first.
3. Linear2 hands Linear1 its first gradient: Linear1's dependency count drops to
   1, so its InputBuffer goes into **not_ready** (`not_ready_insert`).
4. The AccumulateGrads of Linear2's weight and bias have the maximal sequence
   number: they pop before ReLU.
5. ReLU delivers the second gradient: it is **added** into Linear1's buffer, the
   count reaches 0, the buffer leaves not_ready and Linear1 is pushed.

**Ask a student:** why doesn't Linear1 run right after Linear2?  What would go
wrong if it did?

**Source:** `Engine::evaluate_function` in `torch/csrc/autograd/engine.cpp`
(the `not_ready_` branch), `CompareNodeTaskTime` in `engine.h`.
"""


def program(x: float, w1: float, b1: float, w2: float, b2: float) -> dict[str, engine.Tensor]:
    F = engine.functional
    inp = engine.tensor([[x]], requires_grad=True)
    lin1_w = engine.tensor([[w1]], requires_grad=True)
    lin1_b = engine.tensor([b1], requires_grad=True)
    lin2_w = engine.tensor([[w2]], requires_grad=True)
    lin2_b = engine.tensor([b2], requires_grad=True)
    h = F.linear(inp, lin1_w, lin1_b)
    out = (h.relu() + F.linear(h, lin2_w, lin2_b))[0].sum()
    out.backward()
    return {"input": inp.grad, "linear1.weight": lin1_w.grad, "linear1.bias": lin1_b.grad,
            "linear2.weight": lin2_w.grad, "linear2.bias": lin2_b.grad}


def torch_program(torch: Any, x: float, w1: float, b1: float, w2: float,
                  b2: float) -> dict[str, Any]:
    F = torch.nn.functional
    kw = {"dtype": torch.float64, "requires_grad": True}
    inp = torch.tensor([[x]], **kw)
    lin1_w, lin1_b = torch.tensor([[w1]], **kw), torch.tensor([b1], **kw)
    lin2_w, lin2_b = torch.tensor([[w2]], **kw), torch.tensor([b2], **kw)
    h = F.linear(inp, lin1_w, lin1_b)
    out = (h.relu() + F.linear(h, lin2_w, lin2_b))[0].sum()
    out.backward()
    return {"input": inp.grad, "linear1.weight": lin1_w.grad, "linear1.bias": lin1_b.grad,
            "linear2.weight": lin2_w.grad, "linear2.bias": lin2_b.grad}
