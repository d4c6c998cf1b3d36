"""Custom autograd functions: ``Function`` with ``ctx``.

Mirrors ``torch/autograd/function.py`` and ``python_function.cpp``
(``THPFunction_apply``): ``forward`` runs without grad; each differentiable
output gets the Function's backward node as ``grad_fn``; the node's
``next_edges`` are those of the Tensor arguments; ``backward`` receives one
gradient per output (``None`` materialised as zeros, PyTorch's default, made
on the output's device by its array module) and
must return one gradient per forward argument.  A ``backward`` may itself call
``backward()`` or ``grad()``: that is a reentrant backward.

``ctx.mark_dirty`` is ``_mark_dirty`` (the version bump) and the ``is_modified`` branch
of ``_process_backward_mode_ad``'s ``set_history`` (custom_function.cpp): the input
modified in place is returned as itself, with the Function's node as its history
(``rebase_history``), PyTorch's errors and warning word for word.  ``once_differentiable``
is ``torch/autograd/function.py``'s: with grad mode on and a gradient that requires grad,
its outputs come from ``DelayedError``, whose ``Error`` node raises on a double backward.

Departures: a dirty input that is a view does not rewrite its base's history
(``CopySlices``), as no in-place op on a view does here (ops/inplace.py).
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

from . import device as _dev
from . import grad_mode
from .graph import Error, Node, collect_next_edges
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
        self.dirty_tensors: tuple[Tensor, ...] = ()

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        self.to_save = tensors

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        return self.to_save

    def mark_dirty(self, *tensors: Tensor) -> None:
        self.dirty_tensors = tensors

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
        dirty = _mark_dirty(node)
        returned = {id(o) for o in outputs}
        if any(k not in returned for k in dirty):  # _wrap_outputs' check
            raise RuntimeError(
                "Some elements marked as dirty during the forward method were not returned "
                "as output. The inputs that are modified inplace must all be outputs of the "
                "Function.")
        if not is_executable:
            return raw
        wrapped = []
        inputs_by_id = {id(a) for a in args if isinstance(a, Tensor)}
        for i, out in enumerate(outputs):
            if not isinstance(out, Tensor):
                wrapped.append(out)
                continue
            non_differentiable = id(out) in node._non_differentiable
            if id(out) in dirty:  # set_history's is_modified branch
                if out.grad_fn is None and out._requires_grad:
                    raise RuntimeError("a leaf Variable that requires grad has been used in "
                                       "an in-place operation.")
                if id(out) not in inputs_by_id:
                    warnings.warn(
                        "ctx.mark_dirty() received a tensor that was not an input. Only input "
                        "Tensors that have been mutated should be passed to ctx.mark_dirty().",
                        UserWarning, stacklevel=2)
                out._grad = None  # grad reset, hooks cleared, then rebase_history
                out._backward_hooks = []
                out._retains_grad = False
            elif id(out) in inputs_by_id:
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


def _mark_dirty(node: FunctionCtx) -> dict[int, Tensor]:
    """``_mark_dirty`` (python_function.cpp): each dirty tensor's version is bumped."""
    dirty: dict[int, Tensor] = {}
    for i, t in enumerate(node.dirty_tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"mark_dirty can only accept variables, but argument {i} is of "
                            f"type {type(t).__name__}")
        t._version += 1
        dirty[id(t)] = t
    return dirty


ONCE_DIFFERENTIABLE = ("trying to differentiate twice a function that was marked with "
                       "@once_differentiable")


def delayed_error(msg: str, *inputs: Tensor | None) -> Any:
    """``DelayedError::apply`` (functions/basic_ops.cpp): each input's data as an output
    whose history is one ``Error`` node (``wrap_outputs``), which raises ``msg`` if a
    backward reaches it."""
    outputs = [Tensor(t.data, device=t.device) if t is not None else None for t in inputs]
    if grad_mode.is_grad_enabled() and any(t is not None and t.requires_grad for t in inputs):
        node = Error(msg, collect_next_edges(*inputs))
        for i, out in enumerate(outputs):
            if out is not None:
                node.add_input_metadata(out.shape, out.dtype, out.device)
                out.grad_fn, out.output_nr = node, i
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def once_differentiable(fn: Any) -> Any:
    """``torch.autograd.function.once_differentiable``: the backward runs without grad;
    if grad mode is on and a gradient requires grad, its outputs lead to an ``Error``
    node, so a double backward through it raises PyTorch's error."""

    @functools.wraps(fn)
    def wrapper(ctx: FunctionCtx, *args: Any) -> Any:
        with grad_mode.no_grad():
            outputs = fn(ctx, *args)
        if not grad_mode.is_grad_enabled():
            return outputs
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            return outputs
        if not isinstance(outputs, tuple):
            outputs = (outputs,)

        def fake_requires_grad(var: Tensor | None) -> Tensor | None:
            if var is not None:
                var = var.detach()
                var.requires_grad = True
            return var

        return delayed_error(ONCE_DIFFERENTIABLE, *[fake_requires_grad(v) for v in outputs])

    return wrapper
