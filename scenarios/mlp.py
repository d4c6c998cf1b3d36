"""A small MLP training step: forward, loss, backward, SGD update."""

from __future__ import annotations

from typing import Any

import numpy as np

from autograd_tui import engine
from autograd_tui.scenarios import Param

NAME = "mlp"
TITLE = "An MLP training step (about 50 nodes)"
SUMMARY = "batch 8, 16 -> 32 -> 32 -> 4, relu/tanh, cross-entropy + weight decay, one SGD step"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "lr": Param(0.1, "SGD learning rate"),
    "weight_decay": Param(1e-3, "L2 penalty on every parameter"),
    "dropout": Param(0.1, "dropout probability (fixed masks drawn from the seed)"),
    "label_smoothing": Param(0.1, "label smoothing of the cross-entropy"),
    "seed": Param(0, "seed of data, targets, weights and masks (np.random.default_rng)"),
}
NOTES = """\
# An MLP training step

```
h1 = dropout(relu(linear(x, W1, b1)))            # 8x16 -> 8x32
h2 = h1 + dropout(tanh(linear(h1, W2, b2)))      # 8x32 -> 8x32, residual
logits = linear(h2, W3, b3)                      # 8x32 -> 8x4
z = logits - logits.max(1)  (a constant)         # log-softmax from exp/sum/log
logp = z - z.exp().sum(1, keepdim=True).log()
ce = (1 - ε)·(-(logp * onehot).sum(1)).mean() + ε·(-logp.mean())
loss = ce + λ · sum((p ** 2).sum() for p in params)
loss.backward()
with engine.no_grad():  p_new = p - lr * p.grad  # one SGD step
```

A realistic step from real shapes: batch 8, 16 → 32 → 32 → 4, with dropout,
a residual connection, label smoothing and weight decay, all from the engine's
ops (`engine.functional.linear` is one node with three inputs, as in the
seeds' notes).  The backward graph has 48 nodes.

**What to watch.**
1. `dependencies_computed`: the leaves' `AccumulateGrad` nodes have **2**
   dependencies each (the loss path and the weight-decay path); `h1`'s node
   (`MulBackward0` of the first dropout) has 2 (the residual and the second
   layer); both `SubBackward0` nodes have 2 (`z` feeds `exp` and `logp`;
   `logp` feeds both halves of the smoothed cross-entropy).
2. The weight-decay branch was built last, so its nodes have the highest
   sequence numbers: right after the loss's `AddBackward0` and the `λ ·`
   `MulBackward0`, the six
   `PowBackward0`/`SumBackward0` pairs run and each leaf's `AccumulateGrad`
   buffer goes into `not_ready` with its first gradient (`2λ·p`).  Those
   buffers wait there for the whole cross-entropy backward.
3. `LinearBackward0` outputs three gradients (input, weight, bias); the bias
   gradient is summed over the batch when it is checked against the bias's
   shape (`validate_outputs`).
4. The last layer's leaves complete first, the first layer's last: a
   parameter's gradient is final long before the backward ends (what DDP's
   bucketing exploits).
5. After `completion`, the program's SGD step runs under `no_grad`: no events
   (no graph), and `loss after the step` is lower than `loss before`.

**Ask a student:** the AccumulateGrad buffers of step 2 sit in `not_ready`
for most of the backward.  In PyTorch, what memory does that hold on to, and
would it change if weight decay were applied in the optimizer instead?

**Source:** `Engine::compute_dependencies`, `Engine::evaluate_function` and
`validate_outputs` in `torch/csrc/autograd/engine.cpp`; `AccumulateGrad` in
`functions/accumulate_grad.h`; the formulas in `tools/autograd/derivatives.yaml`.
"""


def _data(seed: int, dropout: float) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def layer(n_out: int, n_in: int) -> tuple[np.ndarray, np.ndarray]:
        return (rng.standard_normal((n_out, n_in)) * np.sqrt(2.0 / n_in),
                rng.standard_normal(n_out) * 0.01)

    d: dict[str, np.ndarray] = {"x": rng.standard_normal((8, 16))}
    d["onehot"] = np.eye(4)[rng.integers(0, 4, size=8)]
    keep = 1.0 - dropout
    d["mask1"] = (rng.random((8, 32)) < keep) / keep
    d["mask2"] = (rng.random((8, 32)) < keep) / keep
    for i, (n_out, n_in) in enumerate([(32, 16), (32, 32), (4, 32)], start=1):
        d[f"W{i}"], d[f"b{i}"] = layer(n_out, n_in)
    return d


def _run(mod: Any, linear: Any, lr: float, weight_decay: float, dropout: float,
         label_smoothing: float, seed: int, **kw: Any) -> dict[str, Any]:
    d = _data(seed, dropout)
    x, onehot = mod.tensor(d["x"], **kw), mod.tensor(d["onehot"], **kw)
    mask1, mask2 = mod.tensor(d["mask1"], **kw), mod.tensor(d["mask2"], **kw)
    names = ["W1", "b1", "W2", "b2", "W3", "b3"]
    params = {k: mod.tensor(d[k], requires_grad=True, **kw) for k in names}
    eps = label_smoothing

    def loss_of(p: dict[str, Any]) -> Any:
        h1 = linear(x, p["W1"], p["b1"]).relu() * mask1
        h2 = h1 + linear(h1, p["W2"], p["b2"]).tanh() * mask2
        logits = linear(h2, p["W3"], p["b3"])
        z = logits - mod.tensor(logits.detach().cpu().numpy().max(1, keepdims=True), **kw)
        logp = z - z.exp().sum(1, keepdim=True).log()
        nll = (-(logp * onehot).sum(1)).mean()
        ce = nll * (1 - eps) + (-logp.mean()) * eps
        return ce + weight_decay * sum((t ** 2).sum() for t in p.values())

    loss = loss_of(params)
    loss.backward()
    out: dict[str, Any] = {f"{k}.grad": t.grad for k, t in params.items()}
    with mod.no_grad():
        updated = {k: t - lr * t.grad for k, t in params.items()}
        out["loss before the step"] = loss.detach()
        out["loss after the step"] = loss_of(updated)
    out.update({f"{k} after the step": t for k, t in updated.items()})
    return out


def program(lr: float, weight_decay: float, dropout: float, label_smoothing: float,
            seed: int) -> dict[str, engine.Tensor]:
    return _run(engine, engine.functional.linear, lr, weight_decay, dropout,
                label_smoothing, seed)


def torch_program(torch: Any, lr: float, weight_decay: float, dropout: float,
                  label_smoothing: float, seed: int) -> dict[str, Any]:
    return _run(torch, torch.nn.functional.linear, lr, weight_decay, dropout,
                label_smoothing, seed, dtype=torch.float64)
