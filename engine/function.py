"""Custom autograd functions: ``Function`` with ``ctx``.

Mirrors ``torch/autograd/function.py`` and ``python_function.cpp``
(``THPFunction_apply``): ``forward`` runs without grad; each differentiable
output gets the Function's backward node as ``grad_fn``; the node's
``next_edges`` are those of the Tensor arguments; ``backward`` receives one
gradient per output (``None`` materialised as zeros, PyTorch's default, made
on the output's device by its array module) and
must return one gradient per forward argument.  A ``backward`` may itself call
``backward()`` or ``grad()``: that is a reentrant backward.
"""

from __future__ import annotations

from typing import Any

from . import device as _dev
from . import grad_mode
from .graph import Node, collect_next_edges
from .tensor import Tensor


class FunctionCtx:
    """What ``forward``/``backward`` get as ``ctx``.  As in PyTorch, when the call
    records a graph the ctx *is* the backward node (``y.grad_fn.k`` reads what
    ``forward`` stored in ``ctx.k``)."""

    def __init__(self) -> None:
        self.needs_input_grad: tuple[bool, ...] = ()
        self.to_save: tuple[Tensor | None, ...] = ()
        self.materialize_grads = True
        self._non_differentiable: set[int] = set()

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        self.to_save = tensors

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        return self.to_save

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        self._non_differentiable |= {id(t) for t in tensors}

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value


class BackwardCFunction(Node, FunctionCtx):
    """The node of a custom Function, and its ``ctx``; its name is ``<Function>Backward``."""

    _function_cls: type[Function]

    def __init__(self, function_cls: type[Function]) -> None:
        Node.__init__(self)
        FunctionCtx.__init__(self)
        self._function_cls = function_cls
        self._tensor_positions: list[int] = []
        self._num_args = 0
        self._recorded = False  # the saved tensors have moved into the node

    @property
    def ctx(self) -> BackwardCFunction:
        return self

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        if self._recorded:
            return self.saved().get("saved", ())
        return self.to_save

    def name(self) -> str:
        return f"{self._function_cls.__name__}Backward"

    def apply(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        if self.materialize_grads:
            grads = [
                g if g is not None else Tensor(_dev.zeros(m.shape, m.dtype, m.device),
                                               device=m.device)
                for g, m in zip(grads, self._input_metadata)
            ]
        result = self._function_cls.backward(self, *grads)
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
        tensor_positions = set(self._tensor_positions)
        for pos, g in enumerate(result):
            if pos not in tensor_positions and g is not None:
                raise RuntimeError(
                    f"function {self.name()} returned a gradient different than None at "
                    f"position {pos + 1}, but the corresponding forward input was not a "
                    "Variable"
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
        # As in THPFunction_apply, the ctx (the future node) always exists and takes a
        # sequence number, whether or not a graph is recorded.
        node = BackwardCFunction(cls)
        tensor_positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        node.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        is_executable = grad_mode.is_grad_enabled() and any(node.needs_input_grad)
        if is_executable:
            node.set_next_edges(collect_next_edges(*[args[i] for i in tensor_positions]))
            node._tensor_positions = tensor_positions
            node._num_args = len(args)
        with grad_mode.no_grad():
            raw = cls.forward(node, *args)
        single = not isinstance(raw, tuple)
        outputs = (raw,) if single else raw
        if not is_executable:
            return raw
        wrapped = []
        inputs_by_id = {id(a) for a in args if isinstance(a, Tensor)}
        for i, out in enumerate(outputs):
            if not isinstance(out, Tensor):
                wrapped.append(out)
                continue
            non_differentiable = id(out) in node._non_differentiable
            if id(out) in inputs_by_id:
                out = Tensor(out.data, device=out.device)  # an input returned as-is: new view
            node.add_input_metadata(out.shape, out.dtype, out.device)
            if non_differentiable or out.dtype.kind not in "fc":
                wrapped.append(out)
                continue
            out.grad_fn = node
            out.output_nr = i
            wrapped.append(out)
        for i, t in enumerate(node.to_save):  # _save_variables
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save variables, but argument {i} is of "
                    f"type {type(t).__name__}"
                )
        node.save(saved=tuple(node.to_save))
        node.to_save = ()
        node._recorded = True
        return wrapped[0] if single else tuple(wrapped)


def once_differentiable(fn: Any) -> Any:
    """Accepted for compatibility: the wrapped backward runs without grad."""

    def wrapper(ctx: FunctionCtx, *args: Any) -> Any:
        with grad_mode.no_grad():
            return fn(ctx, *args)

    return wrapper
