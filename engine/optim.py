"""``torch.optim.SGD``, small: so that a student's training loop runs unchanged.

Mirrors ``torch/optim/sgd.py`` (``_single_tensor_sgd``) for what a first course uses:
``lr``, ``momentum``, ``dampening``, ``weight_decay``, ``nesterov``, ``maximize``;
``step()`` under ``no_grad`` updates each parameter in place (the same leaf, its version
bumped), ``zero_grad(set_to_none=True)`` as PyTorch's default.

Departures: one parameter group, no ``closure`` and no ``state_dict`` (the engine has no
checkpointing of optimizers to teach).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .grad_mode import no_grad
from .tensor import Tensor


class SGD:
    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False,
                 *, maximize: bool = False) -> None:
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        self.params = list(params)
        if not self.params:
            raise ValueError("optimizer got an empty parameter list")
        self.defaults: dict[str, Any] = dict(
            lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
            nesterov=nesterov, maximize=maximize)
        self._momentum_buffer: dict[int, Tensor] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.zero_()

    def step(self) -> None:
        d = self.defaults
        with no_grad():
            for i, p in enumerate(self.params):
                if p.grad is None:
                    continue
                g = p.grad if not d["maximize"] else -p.grad
                if d["weight_decay"] != 0:
                    g = g + d["weight_decay"] * p
                if d["momentum"] != 0:
                    buf = self._momentum_buffer.get(i)
                    if buf is None:
                        buf = self._momentum_buffer[i] = g.clone()
                    else:
                        buf.mul_(d["momentum"]).add_(g, alpha=1 - d["dampening"])
                    g = g + d["momentum"] * buf if d["nesterov"] else buf
                p.add_(g, alpha=-d["lr"])
