"""A program: its forward pass under ``capture()``, its backward on our engine.

``run_program(entry)`` is what ``autograd-tui torch`` and the torch scenarios
run; ``split_result`` reads what an entry returns; ``leaf_names`` is the one
rule that names a leaf (``check-order`` names them the same way).
"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from .bridge import TorchAccumulateGrad, TorchGraph, from_torch
from .capture import capture
from .convert import TorchBridgeError, device_str, torch_module


def split_result(out: Any) -> tuple[Any, Any, Any]:
    """What an entry returns: the loss, ``(loss, grad_outputs[, inputs])`` or a dict with
    ``loss`` (or ``outputs``), ``grad_outputs``, ``inputs``."""
    torch = torch_module()
    if isinstance(out, torch.Tensor):
        return out, None, None
    if isinstance(out, dict):
        loss = out.get("loss", out.get("outputs"))
        return loss, out.get("grad_outputs"), out.get("inputs")
    if isinstance(out, (tuple, list)) and 1 <= len(out) <= 3:
        items = list(out) + [None] * (3 - len(out))
        return items[0], items[1], items[2]
    raise TorchBridgeError(f"the entry function returned {type(out).__name__}: it must return "
                           "the loss (a tensor), (loss, grad_outputs[, inputs]) or a dict")


def leaf_names(graph: TorchGraph) -> dict[str, TorchAccumulateGrad]:
    """Each leaf's ``AccumulateGrad`` by name, in the graph's order: the parameter's name
    from the forward pass (``0.weight``) or ``leaf [shape]``, with ``'`` added until it
    is unique (two unnamed leaves of one shape)."""
    out: dict[str, TorchAccumulateGrad] = {}
    for node in graph.nodes.values():
        if isinstance(node, TorchAccumulateGrad):
            name = (node.meta or {}).get("tensor") or f"leaf {list(node.variable.var.shape)}"
            while name in out:
                name += "'"
            out[name] = node
    return out


class ProgramResult(dict[str, Tensor]):
    """Each leaf's ``.grad`` by name; ``no_grad``: each parameter of the models the forward
    pass called that got no gradient, and why."""

    no_grad: dict[str, str]


NOT_REACHED = "not reached by the backward"
FROZEN = "requires_grad is False"


def run_program(entry: Any, *args: Any, **kwargs: Any) -> ProgramResult:
    """Run ``entry`` (forward) under ``capture()`` and its backward on our engine; return
    each leaf's ``.grad`` (our Tensor) by ``leaf_names``' name, then the parameters whose
    gradient a nested GraphTask wrote (a reentrant checkpoint's); ``no_grad`` names the
    parameters left without one."""
    torch_module()
    with capture() as reg:
        out = entry(*args, **kwargs)
    loss, grad_outputs, inputs = split_result(out)
    g = from_torch(loss, grad_outputs, inputs)
    g.backward()
    grads = ProgramResult()
    grads.no_grad = {}
    seen = set()
    for name, node in leaf_names(g).items():
        seen.add(id(node.variable.var))
        grad = node.variable._grad
        if grad is not None:
            grads[name] = grad
        else:
            grads.no_grad[name] = NOT_REACHED
    for name, p in reg.parameters():
        if id(p) in seen:
            continue
        if p.grad is not None:
            grads[name] = Tensor(p.grad.detach().cpu().numpy(), device=device_str(p.grad.device))
        else:
            grads.no_grad[name] = NOT_REACHED if p.requires_grad else FROZEN
    return grads
