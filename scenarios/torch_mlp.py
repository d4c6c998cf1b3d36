"""A real PyTorch MLP: three nn.Linear layers, tanh, an MSE loss."""

from autograd_tui.scenarios._torch import REQUIRES, program_of  # noqa: F401

NAME = "torch-mlp"
TITLE = "A PyTorch MLP on our engine"
SUMMARY = "nn.Sequential(Linear, Tanh, Linear, Tanh, Linear) in float64: PyTorch's nodes"
THREADS = ("cpu (owner)",)
NOTES = """
### A real PyTorch MLP

```
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))
loss = F.mse_loss(model(x), y)            # float64, batch of 5
```

Every node here is PyTorch's own (`AddmmBackward0`, `TanhBackward0`, `TBackward0`,
`MseLossBackward0`, `AccumulateGrad`), with PyTorch's sequence numbers; our engine
schedules them and PyTorch computes each one (`engine/torch_bridge/`).

**What to watch.**
1. `dependencies_computed` lists PyTorch's names; each node's details show the
   `nn.Module` that made it (`0`, `2`, `4`: the Sequential's indices) and its saved tensors.
2. Each `AddmmBackward0` has three edges: the bias's `AccumulateGrad`, the input's node
   and `TBackward0` (the weight is used transposed).  The bias and weight leaves run as
   soon as they are ready: `AccumulateGrad`'s sequence number is the maximum.

**Ask a student:** why does `TBackward0` exist at all, and what does it cost?

**Source:** `Engine::compute_dependencies` and `CompareNodeTaskTime` in
`torch/csrc/autograd/engine.cpp` and `engine.h`; `autograd-tui check-order
scenarios/torch_mlp.py` compares this order with PyTorch's own engine.
"""


def main():
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(),
                          nn.Linear(8, 2)).double()
    x = torch.randn(5, 4, dtype=torch.float64)
    y = torch.randn(5, 2, dtype=torch.float64)
    return nn.functional.mse_loss(model(x), y)


program = program_of(main)
