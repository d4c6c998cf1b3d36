"""Custom autograd functions: ``Function`` with ``ctx``.

Mirrors ``torch/autograd/function.py`` and ``python_function.cpp``
(``THPFunction_apply``): ``forward`` runs without grad; each differentiable
output gets the Function's backward node as ``grad_fn``; the node's
``next_edges`` are those of the Tensor arguments; ``backward`` receives one
gradient per output (``None`` materialised as zeros, PyTorch's default) and
must return one gradient per forward argument.  A ``backward`` may itself call
``backward()`` or ``grad()``: that is a reentrant backward.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import grad_mode
from .graph import Node, collect_next_edges
from .tensor import Tensor


class FunctionCtx:
    def __init__(self) -> None:
        self.needs_input_grad: tuple[bool, ...] = ()
        self._to_save: tuple[Tensor | None, ...] = ()
        self._node: BackwardCFunction | None = None
        self.materialize_grads = True
        self._non_differentiable: set[int] = set()

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        self._to_save = tensors

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        if self._node is not None:
            return self._node.saved().get("saved", ())
        return self._to_save

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        self._non_differentiable |= {id(t) for t in tensors}

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value


class BackwardCFunction(Node):
    """The node of a custom Function; its name is ``<Function>Backward``."""

    _function_cls: type[Function]

    def __init__(self, function_cls: type[Function], ctx: FunctionCtx) -> None:
        super().__init__()
        self._function_cls = function_cls
        self.ctx = ctx
        self._tensor_positions: list[int] = []
        self._num_args = 0

    def name(self) -> str:
        return f"{self._function_cls.__name__}Backward"

    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        ctx = self.ctx
        if ctx.materialize_grads:
            grads = [
                g if g is not None else Tensor(np.zeros(m.shape, dtype=m.dtype), device=m.device)
                for g, m in zip(grads, self._input_metadata)
            ]
        result = self._function_cls.backward(ctx, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        num = self._num_args
        if len(result) != num:
            if len(result) > num and all(r is None for r in result[num:]):
                result = result[:num]
            else:
                raise RuntimeError(
                    f"function {self.name()} returned an incorrect number of gradients "
                    f"(expected {num}, got {len(result)})"
                )
        out: list[Tensor | None] = []
        for pos in self._tensor_positions:
            g = result[pos]
            if g is not None and not isinstance(g, Tensor):
                raise TypeError(
                    f"function {self.name()} returned a gradient different than None at "
                    f"position {pos + 1}, but the corresponding forward input was not a "
                    "Variable"
                )
            out.append(g)
        return out


class FunctionMeta(type):
    def __init__(cls, name: str, bases: tuple[type, ...], attrs: dict[str, Any]) -> None:
        super().__init__(name, bases, attrs)


class Function(metaclass=FunctionMeta):
    """Subclass with ``@staticmethod forward(ctx, ...)`` and ``backward(ctx, *grads)``."""

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function."
        )

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs: Any) -> Any:
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD."
        )

    @classmethod
    def apply(cls, *args: Any) -> Any:
        ctx = FunctionCtx()
        tensor_positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        is_executable = grad_mode.is_grad_enabled() and any(ctx.needs_input_grad)
        node = None
        if is_executable:
            node = BackwardCFunction(cls, ctx)
            node.set_next_edges(collect_next_edges(*[args[i] for i in tensor_positions]))
            node._tensor_positions = tensor_positions
            node._num_args = len(args)
        with grad_mode.no_grad():
            raw = cls.forward(ctx, *args)
        single = not isinstance(raw, tuple)
        outputs = (raw,) if single else raw
        if node is None:
            return raw
        wrapped = []
        inputs_by_id = {id(a) for a in args if isinstance(a, Tensor)}
        for i, out in enumerate(outputs):
            if not isinstance(out, Tensor):
                wrapped.append(out)
                continue
            if id(out) in inputs_by_id:
                out = Tensor(out.data, device=out.device)  # an input returned as-is: new view
            node.add_input_metadata(out.shape, out.dtype, out.device)
            if id(raw if single else outputs[i]) in ctx._non_differentiable or \
                    out.dtype.kind not in "fc":
                wrapped.append(out)
                continue
            out.grad_fn = node
            out.output_nr = i
            wrapped.append(out)
        node.save(saved=tuple(ctx._to_save))
        ctx._node = node
        return wrapped[0] if single else tuple(wrapped)


def once_differentiable(fn: Any) -> Any:
    """Accepted for compatibility: the wrapped backward runs without grad."""

    def wrapper(ctx: FunctionCtx, *args: Any) -> Any:
        with grad_mode.no_grad():
            return fn(ctx, *args)

    return wrapper
