"""A custom torch.autograd.Function and torch.utils.checkpoint (reentrant): a nested backward."""

from autograd_tui.scenarios._torch import REQUIRES, program_of  # noqa: F401

NAME = "torch-checkpoint"
TITLE = "PyTorch: a custom Function and a checkpointed block"
SUMMARY = "Scale.apply(x, 2.0) (a custom Function) and checkpoint(use_reentrant=True)"
THREADS = ("cpu (owner)",)
NOTES = """
### A custom Function and reentrant checkpointing, from PyTorch

```
class Scale(torch.autograd.Function):        # forward(ctx, x, k) = x * k; k is a float
h = Scale.apply(lin1(x), 2.0)
h = checkpoint(block, h, use_reentrant=True) # block = Linear + tanh, recomputed in backward
loss = lin2(h).pow(2).mean()
```

**What to watch.**
1. `ScaleBackward` is a Python node: its backward returns two gradients (one for `k`,
   a float: `None`); only the tensor's goes on (PyTorch's `PyNode::apply`).
2. `CheckpointFunctionBackward` recomputes `block`'s forward and calls
   `torch.autograd.backward` from inside the node: on our engine that is a reentrant
   backward (GraphTask 2, `reentrant_handoff` mode `nested`) whose nodes run before
   the outer graph goes on.

**Ask a student:** the checkpointed block's weights get their gradients inside GraphTask 2.
Why must the outer GraphTask wait for it?

**Source:** `Engine::execute_with_graph_task` (the reentrant branch) in
`torch/csrc/autograd/engine.cpp`; `PyNode::apply` in `python_function.cpp`;
`CheckpointFunction` in `torch/utils/checkpoint.py`.
"""


def main():
    import torch
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    torch.manual_seed(0)
    lin1, lin2 = nn.Linear(4, 6).double(), nn.Linear(6, 1).double()
    block = nn.Sequential(nn.Linear(6, 6), nn.Tanh()).double()
    x = torch.randn(3, 4, dtype=torch.float64)
    h = Scale.apply(lin1(x), 2.0)
    h = checkpoint(block, h, use_reentrant=True)
    return lin2(h).pow(2).mean()


program = program_of(main)
