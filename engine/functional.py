"""``engine.functional`` (``torch.nn.functional``): ``linear`` (one node with three
inputs), ``relu``, ``sigmoid``, ``tanh``, ``softmax``, ``log_softmax``, ``mse_loss``,
``nll_loss`` and ``cross_entropy``."""

from __future__ import annotations

from .ops import (
    cross_entropy,
    linear,
    log_softmax,
    mse_loss,
    nll_loss,
    relu,
    sigmoid,
    softmax,
    tanh,
)

__all__ = ["cross_entropy", "linear", "log_softmax", "mse_loss", "nll_loss", "relu",
           "sigmoid", "softmax", "tanh"]
