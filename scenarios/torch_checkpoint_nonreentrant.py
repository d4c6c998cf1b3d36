"""torch.utils.checkpoint both ways on one model: reentrant beside non-reentrant."""

from autograd_tui.scenarios._torch import REQUIRES, program_of  # noqa: F401

NAME = "torch-checkpoint-nonreentrant"
TITLE = "PyTorch: checkpoint with and without reentrancy, side by side"
SUMMARY = "two checkpointed blocks: use_reentrant=True (a nested GraphTask), False (unpack hooks)"
THREADS = ("cpu (owner)",)
NOTES = """
### Two ways to checkpoint, on one model

```
h = lin1(x)
h = checkpoint(block1, h, use_reentrant=True)    # Linear + tanh
h = checkpoint(block2, h, use_reentrant=False)   # Linear + BatchNorm1d + tanh
loss = lin2(h).pow(2).mean()
```

Both blocks keep no activations in the forward pass and run their forward again in the
backward. How they do it is what this lesson shows.

**What to watch.** The backward reaches `block2` first, then `block1`.

1. *Non-reentrant (`block2`).* The forward ran under saved-tensor hooks:
each tensor a node of `block2` saved is a placeholder. `block2`'s nodes are ordinary
nodes of GraphTask 1, in the same ready queue as the rest. When the first of them (here
`TanhBackward0`) reads a saved tensor, the unpack hook asks PyTorch which backward is
running (`torch._C._current_graph_task_id()`, answered by our engine: the bridge's
`queries.py`), re-runs `block2`'s forward once for that GraphTask (a `hook` event,
`recompute`), and hands over the recomputed tensor (`unpack`). The recompute stops as
soon as it has every tensor the forward saved. No new GraphTask, no nested `thread_main`:
the ready queue and `not_ready` go on as if nothing happened. Watch the BatchNorm:
the recompute updates its running statistics a second time, as in PyTorch
(`num_batches_tracked` is 2 after the backward).

2. *Reentrant (`block1`).* `block1` is one node, `CheckpointFunctionBackward`. Its
`apply` re-runs `block1`'s forward with grad enabled and calls `torch.autograd.backward`
from inside the node: a second GraphTask (2), run by a nested `thread_main` on the same
thread (`reentrant_handoff` mode `nested`), with its own dependencies and its own ready
queue entries. GraphTask 1 waits until GraphTask 2 completes; `block1`'s weights get
their gradients inside GraphTask 2.

**Ask a student:** why can the non-reentrant form work with `torch.autograd.grad` and
`inputs=`, where the reentrant form cannot? (Hint: which GraphTask decides what runs?)

**Source:** `_checkpoint_hook`, `_recomputation_hook` and `CheckpointFunction` in
`torch/utils/checkpoint.py`; `SavedVariable::unpack` in `saved_variable.cpp`;
`Engine::execute_with_graph_task` (the reentrant branch) and `get_current_graph_task_id`
in `torch/csrc/autograd/engine.cpp`.
"""


def main():
    import torch
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    lin1, lin2 = nn.Linear(4, 6).double(), nn.Linear(6, 1).double()
    block1 = nn.Sequential(nn.Linear(6, 6), nn.Tanh()).double()
    block2 = nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6), nn.Tanh()).double()
    x = torch.randn(5, 4, dtype=torch.float64)
    h = checkpoint(block1, lin1(x), use_reentrant=True)
    h = checkpoint(block2, h, use_reentrant=False)
    return lin2(h).pow(2).mean()


program = program_of(main)
