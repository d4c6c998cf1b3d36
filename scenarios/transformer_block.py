"""One transformer block (causal self-attention + MLP) from 2-D matmuls: a few hundred nodes."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from autograd_tui import engine
from autograd_tui.scenarios import Param, ScenarioError

NAME = "transformer-block"
TITLE = "A transformer block: a few hundred nodes"
SUMMARY = "causal attention (seq 6, d_model 16, 2 heads) + MLP, per head with 2-D matmuls"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {
    "batch": Param(4, "number of sequences (each adds about 60 nodes)"),
    "seed": Param(0, "seed of inputs, targets and weights (np.random.default_rng)"),
}
SEQ, D_MODEL, HEADS, D_FF = 6, 16, 2, 32
NOTES = """\
# A transformer block

One post-norm block (attention, residual, norm, MLP, residual, norm) on a
batch of sequences of 6 tokens, d_model 16, 2 heads of 8, d_ff 32, with an MSE
loss against random targets.  The engine has only 1-D and 2-D `matmul`, so:

```
Q, K, V = X @ Wq, X @ Wk, X @ Wv                   # the whole batch at once: (B·6) x 16
for each sequence b:                               # rows b·6 … b·6+5
    Qb, Kb, Vb, Xb = Q[rows], K[rows], V[rows], X[rows]
    attn = 0
    for each head h:                               # columns h·8 … h·8+7
        s = Qb[:, h] @ Kb[:, h].t() / sqrt(8) + causal_mask
        e = (s - s.max(1)).exp()                   # the max is a constant
        p = e / e.sum(1, keepdim=True)             # softmax from exp / sum / div
        attn = attn + (p @ Vb[:, h]) @ Wo[h]       # = concat(heads) @ Wo
    y = norm(Xb + attn, g1, be1)                   # norm: mean / pow, as LayerNorm
    y = norm(y + linear(relu(linear(y, W1, c1)), W2, c2), g2, be2)
    loss += ((y - target_b) ** 2).mean() / B
```

**What to watch.**
1. `dependencies_computed`: with the default batch of 4, 253 nodes.  Look
   for the big fan-ins: `MmBackward0` of `X @ Wq` has one dependency per
   sequence (the row slices `Q[rows]`); each `Q[rows]`'s `SliceBackward0` has
   one per head; X's `AccumulateGrad` has 3 + B (three projections and B
   residual slices); each `Wo[h]` slice, and each MLP and norm weight, has B.
2. `ExpBackward0` of every softmax has 2 dependencies: `e` is used by the
   numerator and by the sum.  The `not_ready` map shows a buffer for each
   softmax's `ExpBackward0` while its `SumBackward1` has not run yet.
3. Order: the last sequence was built last, so its nodes have the highest
   sequence numbers and its whole backward runs first; sequence 0 runs last.
   Meanwhile the shared nodes (the projections, `Wo[h]`'s slices, the weights'
   `AccumulateGrad`) sit in `not_ready`, collecting one gradient per sequence.
   Watch the `not_ready` map grow and shrink: that is the backward's memory.
4. The causal mask is a constant: the second edge of its `AddBackward0` is
   empty (`None`), and the masked scores get exactly 0 gradient through `exp`.
5. Everything runs on the owner thread: with a single device, the engine's
   parallelism is zero, however wide the graph.

**Ask a student:** `MmBackward0` of `X @ Wq` runs once, after all B·2 head
slices of Q have delivered.  What would it cost if the engine instead ran it
once per incoming gradient?

**Source:** `Engine::compute_dependencies`, `Engine::evaluate_function` (the
`not_ready_` map) in `torch/csrc/autograd/engine.cpp`; `InputBuffer::add`; the
`mm`, `slice`, `exp`, `div` formulas in `tools/autograd/derivatives.yaml`.
"""


def _data(batch: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def mat(n_in: int, n_out: int) -> np.ndarray:
        return rng.standard_normal((n_in, n_out)) / math.sqrt(n_in)

    d = {"X": rng.standard_normal((batch * SEQ, D_MODEL)),
         "target": rng.standard_normal((batch * SEQ, D_MODEL))}
    for k in ("Wq", "Wk", "Wv", "Wo"):
        d[k] = mat(D_MODEL, D_MODEL)
    d["W1"], d["c1"] = mat(D_MODEL, D_FF).T.copy(), rng.standard_normal(D_FF) * 0.02
    d["W2"], d["c2"] = mat(D_FF, D_MODEL).T.copy(), rng.standard_normal(D_MODEL) * 0.02
    for k in ("g1", "g2"):
        d[k] = 1.0 + 0.1 * rng.standard_normal(D_MODEL)
    for k in ("be1", "be2"):
        d[k] = 0.1 * rng.standard_normal(D_MODEL)
    return d


def _run(mod: Any, linear: Any, batch: int, seed: int, **kw: Any) -> dict[str, Any]:
    if batch < 1:
        raise ScenarioError(f"{NAME}: parameter 'batch' must be at least 1, not {batch}")
    d = _data(batch, seed)
    target = d.pop("target")
    p = {k: mod.tensor(v, requires_grad=True, **kw) for k, v in d.items()}
    dh = D_MODEL // HEADS
    mask = mod.tensor(np.triu(np.full((SEQ, SEQ), -1e9), k=1), **kw)

    def norm(y: Any, g: Any, b: Any) -> Any:
        mu = y.mean(1, keepdim=True)
        c = y - mu
        var = (c ** 2).mean(1, keepdim=True)
        return c * (var + 1e-5) ** -0.5 * g + b

    X = p["X"]
    Q, K, V = X @ p["Wq"], X @ p["Wk"], X @ p["Wv"]
    Wo = [p["Wo"][h * dh:(h + 1) * dh] for h in range(HEADS)]
    loss = None
    for b in range(batch):
        rows = slice(b * SEQ, (b + 1) * SEQ)
        Qb, Kb, Vb = Q[rows], K[rows], V[rows]
        attn = None
        for h in range(HEADS):
            cols = slice(h * dh, (h + 1) * dh)
            s = Qb[:, cols] @ Kb[:, cols].t() / math.sqrt(dh) + mask
            shift = mod.tensor(s.detach().cpu().numpy().max(1, keepdims=True), **kw)
            e = (s - shift).exp()
            head = (e / e.sum(1, keepdim=True)) @ Vb[:, cols] @ Wo[h]
            attn = head if attn is None else attn + head
        y = norm(X[rows] + attn, p["g1"], p["be1"])
        ff = linear(linear(y, p["W1"], p["c1"]).relu(), p["W2"], p["c2"])
        y = norm(y + ff, p["g2"], p["be2"])
        term = ((y - mod.tensor(target[rows], **kw)) ** 2).mean() / batch
        loss = term if loss is None else loss + term
    loss.backward()
    return {f"{k}.grad": t.grad for k, t in p.items()}


def program(batch: int, seed: int) -> dict[str, engine.Tensor]:
    return _run(engine, engine.functional.linear, batch, seed)


def torch_program(torch: Any, batch: int, seed: int) -> dict[str, Any]:
    return _run(torch, torch.nn.functional.linear, batch, seed, dtype=torch.float64)
