"""What a Python hook may return: the checks of ``python_hook.cpp``.

Mirrors ``torch/csrc/autograd/python_hook.cpp``: a hook registered from Python
(``Tensor.register_hook``, ``Node.register_prehook``, ``Node.register_hook``)
returns None to keep the gradients, or replacements, which are checked before
the engine uses them, with PyTorch's errors and messages:

=========================  =========================================================
ours                       PyTorch
=========================  =========================================================
``check_result``           ``check_result``: a tuple, as many values as before
``check_single_result``    ``check_single_result`` + ``check_variable_result``
                           (custom_function.cpp): same type, device kind and size
``hook_name``              ``hook_name``: the hook's ``__name__``, else ``<unknown>``
``type_string``            ``at::Tensor::toString`` (``torch.DoubleTensor``, ...)
=========================  =========================================================

Departures:
- The engine calls the checks itself, in ``Engine.call_tensor_pre_hooks``,
  ``call_pre_hooks`` and ``call_post_hooks`` (engine.py), one hook at a time,
  where PyTorch's ``PyFunctionTensorPreHook``, ``PyFunctionPreHook`` and
  ``PyFunctionPostHook`` call them from ``_call_hooks`` over a dict of hooks.
- ``type_string`` names NumPy's dtypes as ATen names its scalar types; a
  simulated ``cuda:N`` tensor is a ``torch.cuda.*Tensor``, as a real one is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .tensor import Tensor

_TORCH_TYPE_NAMES = {
    "float64": "Double", "float32": "Float", "float16": "Half", "int64": "Long",
    "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
    "complex64": "ComplexFloat", "complex128": "ComplexDouble",
}


def type_string(t: Tensor) -> str:
    """``at::Tensor::toString``: ``torch.DoubleTensor``, ``torch.cuda.FloatTensor``, ..."""
    base = _TORCH_TYPE_NAMES.get(str(t.dtype), str(t.dtype).capitalize())
    return ("torch." if t.device == "cpu" else "torch.cuda.") + base + "Tensor"


def hook_name(hook: Any) -> str:
    """``hook_name`` in python_hook.cpp: what the messages call a hook."""
    return getattr(hook, "__name__", "<unknown>")


def check_single_result(original: Any, result: Any, hook: Any) -> None:
    """``check_single_result`` in python_hook.cpp: a hook may not change a gradient's
    type or size, nor replace a None gradient."""
    from .tensor import Tensor

    if result is None:
        return
    if original is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    if not isinstance(result, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(result).__name__}'")
    name = hook_name(hook)
    if result.dtype != original.dtype or (result.device == "cpu") != (original.device == "cpu"):
        raise RuntimeError(f"hook '{name}' has changed the type of value (was "
                           f"{type_string(original)} got {type_string(result)})")
    if tuple(result.shape) != tuple(original.shape):
        raise RuntimeError(f"hook '{name}' has changed the size of value")


def check_result(prev: Sequence[Any], result: Any, hook: Any) -> None:
    """``check_result`` in python_hook.cpp, for node pre- and post-hooks."""
    if not isinstance(result, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(result).__name__}'")
    if len(result) != len(prev):
        name = hook_name(hook)
        raise RuntimeError(f"hook '{name}' has returned an incorrect number of values "
                           f"(got {len(result)}, but expected {len(prev)})")
    for original, r in zip(prev, result):
        check_single_result(original, r, hook)
