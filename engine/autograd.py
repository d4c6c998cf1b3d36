"""``backward()`` and ``grad()``: from tensors to ``Engine.execute``.

Mirrors ``torch/autograd/__init__.py`` (argument handling, ``_make_grads`` and
its messages) and ``THPEngine_run_backward`` in ``python_engine.cpp`` (roots
from ``gradient_edge``, output edges for ``inputs=``, ``retain_grad`` on
non-leaf inputs of ``backward``, the unused-input check).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .engine import get_default_engine
from .grad_mode import (  # noqa: F401 - re-exported: torch.autograd.set_detect_anomaly, ...
    detect_anomaly,
    enable_grad,
    no_grad,
    set_detect_anomaly,
    set_grad_enabled,
)
from .graph import Edge, Identity, gradient_edge
from .tensor import Tensor, ones_like, zeros_like

TensorOrTensors = Tensor | Sequence[Tensor]


def _tensor_or_tensors_to_tuple(tensors: Any, length: int) -> tuple[Any, ...]:
    if tensors is None:
        return (None,) * length
    if isinstance(tensors, Tensor):
        return (tensors,)
    return tuple(tensors)


def _make_grads(outputs: Sequence[Tensor], grads: Sequence[Any]) -> tuple[Tensor | None, ...]:
    new_grads: list[Tensor | None] = []
    for out, grad in zip(outputs, grads):
        if isinstance(grad, Tensor):
            if grad.shape != out.shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{_index(grads, grad)}] has a shape of "
                    f"{_size(grad.shape)} and output[{_index(outputs, out)}] has a shape of "
                    f"{_size(out.shape)}."
                )
            new_grads.append(grad)
        elif grad is None:
            if out.requires_grad:
                if out.numel() != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                if out.dtype.kind != "f":
                    raise RuntimeError(
                        "grad can be implicitly created only for real scalar outputs"
                        f" but got {out.dtype}"
                    )
                new_grads.append(ones_like(out))
            else:
                new_grads.append(None)
        else:
            raise TypeError(
                "gradients can be either Tensors or None, but got " + type(grad).__name__
            )
    return tuple(new_grads)


def _index(seq: Sequence[Any], item: Any) -> int:
    return next(i for i, x in enumerate(seq) if x is item)


def _size(shape: tuple[int, ...]) -> str:
    return f"torch.Size({list(shape)})"


def _inputs_tuple(inputs: Any, api: str) -> tuple[Tensor, ...]:
    if inputs is None:
        return ()
    if isinstance(inputs, Tensor):
        return (inputs,)
    if type(inputs) is dict:
        return tuple(inputs.values())
    if isinstance(inputs, Mapping):
        raise TypeError(
            f"`inputs` argument to `{api}()` must be a dict, not {type(inputs).__name__}. "
            "Other Mapping types are not supported."
        )
    return tuple(inputs)


def _run_backward(
    tensors: Sequence[Tensor],
    grad_tensors: Sequence[Tensor | None],
    keep_graph: bool,
    create_graph: bool,
    inputs: Sequence[Tensor],
    allow_unreachable: bool,
    accumulate_grad: bool,
) -> tuple[Tensor | None, ...] | None:
    """``THPEngine_run_backward``."""
    roots: list[Edge] = []
    grads: list[Tensor | None] = []
    for i, (variable, grad) in enumerate(zip(tensors, grad_tensors)):
        edge = gradient_edge(variable)
        if edge.function is None:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn"
            )
        roots.append(edge)
        if isinstance(grad, Tensor):
            grads.append(grad)
        else:
            if grad is not None:
                raise RuntimeError(f"element {i} of gradients tuple is not a Tensor or None")
            if variable.requires_grad:
                raise RuntimeError(
                    f"element {i} of gradients tuple is None, but the corresponding Tensor "
                    "requires grad"
                )
            grads.append(None)

    output_edges: list[Edge] = []
    for tensor in inputs:
        if not isinstance(tensor, Tensor):
            raise TypeError(f"inputs must be Tensors, not {type(tensor).__name__}")
        grad_fn = tensor.grad_fn
        if grad_fn is None and tensor._grad_accumulator is not None:
            grad_fn = tensor._grad_accumulator()
        if accumulate_grad:
            # As in THPEngine_run_backward: before the requires_grad check, so a
            # tensor that does not require grad fails in retain_grad() here.
            tensor.retain_grad()
        if not tensor.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        if grad_fn is None:
            # NOTE [Autograd Unreachable Input]: a leaf never used in the graph.
            output_edges.append(Edge(Identity(), 0))
        else:
            output_edges.append(Edge(grad_fn, tensor.output_nr))

    outputs = get_default_engine().execute(roots, grads, keep_graph, create_graph,
                                           accumulate_grad, output_edges)
    if inputs and not accumulate_grad:
        for i, out in enumerate(outputs):
            if not allow_unreachable and out is None:
                raise RuntimeError(
                    f"The differentiated Tensor at index {i} appears to not have been used in "
                    "the graph. Set allow_unused=True if this is the desired behavior."
                )
        return tuple(outputs)
    return None


def backward(
    tensors: TensorOrTensors,
    grad_tensors: TensorOrTensors | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: TensorOrTensors | None = None,
) -> None:
    """Accumulate the gradients of ``tensors`` into the leaves' ``.grad``."""
    inputs_tuple = _inputs_tuple(inputs, "backward")
    if inputs is not None and len(inputs_tuple) == 0:
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    tensors_t = (tensors,) if isinstance(tensors, Tensor) else tuple(tensors)
    grads = _tensor_or_tensors_to_tuple(grad_tensors, len(tensors_t))
    grads = _make_grads(tensors_t, grads)
    if retain_graph is None:
        retain_graph = create_graph
    _run_backward(tensors_t, grads, retain_graph, create_graph, inputs_tuple,
                  allow_unreachable=True, accumulate_grad=True)


def grad(
    outputs: TensorOrTensors,
    inputs: TensorOrTensors,
    grad_outputs: TensorOrTensors | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused: bool | None = None,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...] | dict[Any, Tensor | None]:
    """Return the gradients of ``outputs`` with respect to ``inputs`` (no ``.grad`` is touched);
    a dict of inputs gives a dict of gradients with the same keys, as in PyTorch."""
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, "
            "but got: allow_unused=False."
        )
    if allow_unused is None:
        allow_unused = materialize_grads
    outputs_t = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
    inputs_tuple = _inputs_tuple(inputs, "grad")
    if len(inputs_tuple) == 0:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    grads = _tensor_or_tensors_to_tuple(grad_outputs, len(outputs_t))
    grads = _make_grads(outputs_t, grads)
    if retain_graph is None:
        retain_graph = create_graph
    result = _run_backward(outputs_t, grads, retain_graph, create_graph, inputs_tuple,
                           allow_unreachable=allow_unused, accumulate_grad=False)
    assert result is not None
    if materialize_grads:
        result = tuple(
            r if r is not None else zeros_like(inp, requires_grad=create_graph)
            for r, inp in zip(result, inputs_tuple)
        )
    if type(inputs) is dict:
        return dict(zip(inputs.keys(), result))  # type: ignore[return-value]
    return result


def queue_callback(callback: Any) -> None:
    """Run ``callback()`` when the current backward pass finishes (a final callback)."""
    get_default_engine().queue_callback(callback)


