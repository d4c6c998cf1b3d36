"""Which in-place op changed a saved tensor: a hint for PyTorch's version-counter error.

PyTorch's ``SavedVariable::unpack`` says a saved tensor "has been modified by an inplace
operation ... is at version 2; expected version 1 instead", but not by which op.
``InplaceLog`` (a ``TorchFunctionMode`` around the forward pass) notes every op that bumps
a tensor's version (``relu_``, ``+=``, ``x[i] = ...``, ``out=``): the tensor's node and
output number before it, its shape, the versions before and after, and the program's
line.  ``hint(message)`` reads the error and names the ops that took the tensor from the
expected version to the one it is at.  (New: PyTorch's own hint is anomaly mode, which
names the backward node that failed, not the op that changed its input.)
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any

from .capture import is_tool_file
from .convert import torch_module

_INPLACE_DUNDERS = {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__",
                    "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__",
                    "__irshift__", "__imatmul__", "__setitem__"}
_ERROR = re.compile(r"\[(?P<type>[\w.]+) \[(?P<shape>[^\]]*)\]\](?:, which is output "
                    r"(?P<nr>\d+) of (?P<node>\w+),)? is at version (?P<now>\d+); expected "
                    r"version (?P<exp>\d+) instead")


@dataclass(frozen=True)
class InplaceOp:
    op: str  # "mul_", "__iadd__"
    node: str | None  # the tensor's grad_fn before the op ("SigmoidBackward0"), None: a leaf
    output_nr: int
    shape: str  # "3, 4", as PyTorch's message writes it
    before: int
    after: int
    where: str  # "model.py:12"


def _base(name: str | None) -> str | None:
    return None if name is None else re.sub(r"Backward\d*$", "", name)


def _where() -> str:
    f = sys._getframe(2)
    while f is not None and is_tool_file(f.f_code.co_filename):
        f = f.f_back
    return f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else "?"


def _target(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], tensor: type) -> Any:
    name = getattr(func, "__name__", "")
    if args and isinstance(args[0], tensor) and (
            name in _INPLACE_DUNDERS or (name.endswith("_") and not name.startswith("__"))):
        return args[0]
    out = kwargs.get("out")
    return out if isinstance(out, tensor) else None


def inplace_log() -> Any:
    """A ``TorchFunctionMode`` that notes in-place ops; ``.ops`` and ``.hint(message)``."""
    torch = torch_module()
    from torch.overrides import TorchFunctionMode

    class InplaceLog(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: list[InplaceOp] = []

        def __torch_function__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            t = _target(func, tuple(args), kwargs, torch.Tensor)
            # an inference tensor (made under torch.inference_mode: timm's validate) has no
            # version counter to read, and no backward can save it
            if t is None or t.is_inference():
                return func(*args, **kwargs)
            gf, before = t.grad_fn, t._version
            out = func(*args, **kwargs)
            if t._version != before:
                self.ops.append(InplaceOp(
                    getattr(func, "__name__", str(func)),
                    type(gf).__name__ if gf is not None else None,
                    t.output_nr if gf is not None else 0,
                    ", ".join(str(d) for d in t.shape), before, t._version, _where()))
            return out

        def hint(self, message: str) -> str | None:
            return hint(self.ops, message)

    return InplaceLog()


def hint(ops: list[InplaceOp], message: str) -> str | None:
    """``hint: modified in place by mul_ at model.py:7 (version 0 -> 1)`` for PyTorch's
    version-counter error ``message``, or None (another error, or no op known)."""
    m = _ERROR.search(message)
    if m is None:
        return None
    exp, now = int(m["exp"]), int(m["now"])
    found = [o for o in ops if o.shape == m["shape"] and exp <= o.before and o.after <= now
             and (m["node"] is None and o.node is None or m["node"] is not None
                  and _base(o.node) == _base(m["node"]) and o.output_nr == int(m["nr"]))]
    if not found:
        return None
    return "hint: modified in place by " + "; then ".join(
        f"{o.op} at {o.where} (version {o.before} -> {o.after})" for o in found)
