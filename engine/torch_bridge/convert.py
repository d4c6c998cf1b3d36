"""The bottom of the bridge: tensors, dtypes and devices between PyTorch and our engine.

Gradients travel between bridged nodes as our ``Tensor`` (NumPy data, a device
name), so every view summarises them as it does ours; a PyTorch node gets them
back as ``torch.from_numpy`` moved to its device.  A dtype NumPy cannot hold
(bfloat16) travels as the torch tensor itself (``HeldTensor``), shown in float32.
Every other module of the bridge imports this one; this one imports nothing of the bridge.

torch is imported lazily (``torch_module``): ``import autograd_tui`` never needs it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tensor import Tensor


class TorchBridgeError(RuntimeError):
    """A PyTorch graph the bridge cannot run: the message names the node."""


def torch_module() -> Any:
    """``import torch``, or a clear message saying how to install it."""
    try:
        import torch
    except ImportError:
        raise TorchBridgeError(
            "PyTorch is not installed: pip install 'autograd-tui[torch]' (or pip install torch)"
        ) from None
    return torch


def node_label(fn: Any) -> str:
    """``MulBackward0 (sequence_nr 3)``: how an error names a PyTorch node."""
    try:
        return f"{type(fn).__name__} (sequence_nr {fn._sequence_nr()})"
    except Exception:  # noqa: BLE001 - a label must not fail
        return type(fn).__name__


_np_dtypes: dict[Any, np.dtype] = {}  # torch dtype -> NumPy's (a tensor made once each)


def numpy_dtype(torch: Any, dtype: Any, fn: Any) -> np.dtype:
    """The NumPy dtype our engine sees: the same, or float32 (complex64) for a dtype NumPy
    cannot hold (bfloat16), whose gradients travel as ``HeldTensor``."""
    hit = _np_dtypes.get(dtype)
    if hit is not None:
        return hit
    try:
        hit = _np_dtypes[dtype] = torch.empty((), dtype=dtype).numpy().dtype
        return hit
    except TypeError:
        if dtype.is_floating_point or dtype.is_complex:
            return np.dtype(np.complex64 if dtype.is_complex else np.float32)
        raise TorchBridgeError(f"{node_label(fn)}: its gradients are {dtype}, which NumPy "
                               "cannot hold") from None


class TorchGrad(Tensor):
    """A gradient a PyTorch node made (NumPy data sharing its memory).  Two of them add
    as PyTorch's ``InputBuffer::accumulate`` does, ``old + var`` in ATen: the sum takes
    ATen's memory layout (the first operand's: channels_last stays channels_last, where
    NumPy's would be contiguous), and the next node (a convolution) then computes as it
    does under PyTorch, to the bit."""

    __slots__ = ()

    def buffer_add(self, other: Tensor) -> Tensor | None:
        return to_ours(to_torch(self) + to_torch(other), None)


class HeldTensor(TorchGrad):
    """A gradient NumPy cannot hold (bfloat16): the torch tensor travels as it is
    (``held``); ``data`` is a float32 (complex64) copy, for display only."""

    __slots__ = ("held",)

    def __init__(self, t: Any, device: str) -> None:
        shown = t.to(torch_module().complex64 if t.is_complex() else torch_module().float32)
        super().__init__(shown.cpu().numpy(), device=device)
        self.held = t


def torch_validate(outs: list[Any], targets: list[Any]) -> list[Any]:
    """``validate_outputs`` (engine.cpp) on PyTorch's tensors, before our engine sees them:
    a broadcast gradient summed to shape by ``at::sum_to`` (ATen's summation order, not
    NumPy's) and cast to the next node's dtype (a dtype NumPy may not hold).  ``targets``:
    ``(shape, dtype)`` per output, or None where the next node is not PyTorch's."""
    res = list(outs)
    for i, (o, tgt) in enumerate(zip(outs, targets)):
        if o is None or tgt is None or not hasattr(o, "sum_to_size"):
            continue
        shape, dtype = tgt
        if tuple(o.shape) != shape:
            try:
                o = o.sum_to_size(shape)
            except RuntimeError:
                continue  # not expandable: our engine raises PyTorch's message
        if o.dtype != dtype and (o.is_floating_point() or o.is_complex()):
            o = o.to(dtype)
        res[i] = o
    return res


def device_str(dev: Any) -> str:
    """PyTorch's device as our queue's name (``cuda`` is ``cuda:0``)."""
    s = str(dev)
    return "cuda:0" if s == "cuda" else s


def check_device(dev: Any, fn: Any) -> str:
    """Our engine has cpu and cuda:N queues; a CUDA graph needs a GPU to compute on."""
    s = device_str(dev)
    if s.startswith("cuda:"):
        if not torch_module().cuda.is_available():
            raise TorchBridgeError(f"{node_label(fn)} runs on {s}, but PyTorch finds no GPU "
                                   "here: run the script where it has one")
    elif s != "cpu":
        raise TorchBridgeError(f"{node_label(fn)} runs on device {s}: the bridge runs cpu "
                               "and cuda graphs only")
    return s


def to_ours(t: Any, fn: Any) -> Tensor | None:
    """A PyTorch gradient as our Tensor (NumPy data, the same device name)."""
    if t is None:
        return None
    if t.is_sparse or t.layout != torch_module().strided:
        raise TorchBridgeError(f"{node_label(fn)} produced a {t.layout} gradient: the bridge "
                               "handles dense (strided) tensors only")
    if t.is_nested:
        raise TorchBridgeError(f"{node_label(fn)} produced a nested tensor: the bridge "
                               "handles dense tensors only")
    data = t.detach()
    if data.device.type != "cpu":
        data = data.cpu()
    try:
        arr = data.resolve_conj().resolve_neg().numpy()
    except TypeError:
        if t.is_floating_point() or t.is_complex():
            return HeldTensor(data, device_str(t.device))
        raise TorchBridgeError(f"{node_label(fn)} produced a {t.dtype} gradient, which NumPy "
                               "cannot hold") from None
    return TorchGrad(arr, device=device_str(t.device))


def to_display(t: Any) -> Tensor:
    """A PyTorch tensor as our Tensor to show (float32 where NumPy cannot hold it)."""
    return to_ours(t, None)


def to_torch(t: Tensor | None, copy: bool = False) -> Any:
    """Our Tensor as PyTorch's, sharing the array unless ``copy`` (or it is read-only)."""
    if t is None:
        return None
    held = getattr(t, "held", None)
    if held is not None:
        return held.clone() if copy else held
    torch = torch_module()
    arr = np.asarray(t.data)
    out = torch.from_numpy(np.array(arr, copy=True) if copy or not arr.flags.writeable
                           else arr)
    return out if t.device == "cpu" else out.to(t.device)


def torch_targets(fn: Any) -> list[tuple[tuple[int, ...], Any]]:
    """``fn``'s input metadata as PyTorch's (shape, dtype): what ``torch_validate`` casts to."""
    return [(tuple(m.shape), m.dtype) for m in fn._input_metadata]


def input_metadata(fn: Any) -> list[tuple[tuple[int, ...], np.dtype, str]]:
    """``fn``'s input metadata as ours (shape, NumPy dtype, device), or a clear error."""
    torch = torch_module()
    out = []
    for m in fn._input_metadata:
        if m.is_nested_tensor or m.is_cpp_nested_tensor:
            raise TorchBridgeError(f"{node_label(fn)} takes a nested tensor: the bridge "
                                   "handles dense tensors only")
        out.append((tuple(m.shape), numpy_dtype(torch, m.dtype, fn),
                    check_device(m.device, fn)))
    return out
