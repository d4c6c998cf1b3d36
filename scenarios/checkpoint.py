"""Reentrant activation checkpointing: recompute the forward inside backward."""

from __future__ import annotations

from typing import Any

import numpy as np

from autograd_tui import engine
from autograd_tui.scenarios import Param

NAME = "checkpoint"
TITLE = "Activation checkpointing (the reentrant variant)"
SUMMARY = "checkpointed blocks keep no graph; backward recomputes them and nests a backward"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "use_checkpoint": Param(True, "checkpoint the two blocks (false: an ordinary forward)"),
    "seed": Param(0, "seed of the data and weights (np.random.default_rng)"),
}
NOTES = """\
# Activation checkpointing, the reentrant way

```
class Checkpoint(Function):               # like torch.utils.checkpoint, use_reentrant=True
    def forward(ctx, run_function, *args):
        ctx.run_function = run_function
        ctx.save_for_backward(*args)      # keep only the block's inputs
        return run_function(*args)        # a Function's forward runs under no_grad
    def backward(ctx, *grads):
        inputs = [t.detach().requires_grad_() for t in ctx.saved_tensors]
        with engine.enable_grad():
            outputs = ctx.run_function(*inputs)         # recompute the forward, with a graph
        engine.autograd.backward(outputs, grads)        # <- a reentrant backward
        return (None, *[t.grad for t in inputs])

h0 = linear(x, W0, b0).tanh()
h1 = Checkpoint.apply(block1, h0)         # block: linear -> relu -> linear -> tanh
h2 = Checkpoint.apply(block2, h1)
loss = (h2 * h2).mean()
```

A block's forward runs inside a Function's `forward`, so without grad: it
saves no activations and records no nodes.  The backward graph between `h0`
and `h2` is just two `CheckpointBackward` nodes.  When the backward reaches one,
it recomputes the block with a graph and runs a **nested backward** through it:
memory for time.

**What to watch.**
1. `dependencies_computed` of GraphTask 1: only a handful of nodes:
   `MeanBackward0`, `MulBackward0`, two `CheckpointBackward` (the second has 2
   dependencies: `h2 * h2`), the first layer's `TanhBackward0` and
   `LinearBackward0`, and W0's and b0's `AccumulateGrad`.  The blocks' weights
   are not in it at all.
2. The second block's `CheckpointBackward` runs: `node_start`, then (inside
   it, no events: just maths) the recomputed forward, then
   `graph_task_created` for GraphTask 2 (`reentrant_depth: 1`) with the
   recomputed block's nodes, and `reentrant_handoff`, `mode: nested`.
3. GraphTask 2 accumulates straight into the block's weights (`AccumulateGrad`
   of W3, b3, W4, b4 at depth 1).  The detached input is a leaf of GraphTask
   2 as well: its own `AccumulateGrad` fills `inputs[0].grad`, which the
   Function then returns as the block's input gradient.
4. The same for the first block (GraphTask 3), then the first layer.
5. Run with `use_checkpoint=false`: one GraphTask, every node in it, and the
   same gradients.

**Ask a student:** a checkpointed block's forward runs twice.  If the block
used dropout, what would go wrong, and what does `torch.utils.checkpoint`
save to prevent it?

**Source:** `CheckpointFunction` in `torch/utils/checkpoint.py`
(`use_reentrant=True`); `Engine::execute_with_graph_task` (the reentrant branch)
in `torch/csrc/autograd/engine.cpp`.  The deadlocks reported with checkpointing
in 2019 are the `deadlock-lock-steal` scenario.
"""


def _checkpoint_function(mod: Any) -> Any:
    class Checkpoint(mod.autograd.Function):
        @staticmethod
        def forward(ctx, run_function, *args):
            ctx.run_function = run_function
            ctx.save_for_backward(*args)
            return run_function(*args)

        @staticmethod
        def backward(ctx, *grads):
            inputs = [t.detach().requires_grad_(t.requires_grad) for t in ctx.saved_tensors]
            with mod.enable_grad():
                outputs = ctx.run_function(*inputs)
            if not isinstance(outputs, tuple):
                outputs = (outputs,)
            mod.autograd.backward(outputs, grads)
            return (None, *[t.grad for t in inputs])

    return Checkpoint


def _weights(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def layer(n_out: int, n_in: int) -> tuple[np.ndarray, np.ndarray]:
        return (rng.standard_normal((n_out, n_in)) / np.sqrt(n_in),
                rng.standard_normal(n_out) * 0.1)

    w: dict[str, np.ndarray] = {"x": rng.standard_normal((4, 8))}
    for i in range(5):
        w[f"W{i}"], w[f"b{i}"] = layer(8, 8)
    return w


def _run(mod: Any, linear: Any, checkpoint: Any, use_checkpoint: bool, seed: int,
         **kw: Any) -> dict[str, Any]:
    data = _weights(seed)
    x = mod.tensor(data.pop("x"), **kw)
    p = {k: mod.tensor(v, requires_grad=True, **kw) for k, v in data.items()}

    def block1(h):
        return linear(linear(h, p["W1"], p["b1"]).relu(), p["W2"], p["b2"]).tanh()

    def block2(h):
        return linear(linear(h, p["W3"], p["b3"]).relu(), p["W4"], p["b4"]).tanh()

    h0 = linear(x, p["W0"], p["b0"]).tanh()
    if use_checkpoint:
        h2 = checkpoint(block2, checkpoint(block1, h0))
    else:
        h2 = block2(block1(h0))
    (h2 * h2).mean().backward()
    return {k: t.grad for k, t in p.items()}


def program(use_checkpoint: bool, seed: int) -> dict[str, engine.Tensor]:
    return _run(engine, engine.functional.linear, _checkpoint_function(engine).apply,
                use_checkpoint, seed)


def torch_program(torch: Any, use_checkpoint: bool, seed: int) -> dict[str, Any]:
    import torch.utils.checkpoint

    def checkpoint(fn: Any, h: Any) -> Any:
        return torch.utils.checkpoint.checkpoint(fn, h, use_reentrant=True)

    return _run(torch, torch.nn.functional.linear, checkpoint, use_checkpoint, seed,
                dtype=torch.float64)
