"""The bottom of the bridge: tensors, dtypes and devices between PyTorch and our engine.

A gradient a PyTorch node made travels between bridged nodes as ``TorchGrad``: our
``Tensor`` with a NumPy view of it as ``data`` (so every view summarises it as it does
ours) that keeps the torch tensor itself, which the next PyTorch node gets back as it
is (no NumPy round trip, no device move).  A dtype NumPy cannot hold (bfloat16) is
viewed as a float32 copy.  One of our own gradients reaches a PyTorch node as
``torch.from_numpy``, moved to its device.  A sparse COO gradient (``nn.Embedding(sparse=
True)``'s) travels as the sparse tensor itself, and adds as ``InputBuffer::accumulate``
adds it; what our engine and the views read is a dense copy up to ``SPARSE_SHOWN``
elements.  A bigger one (a 2,000,000-row embedding's) is never densified, as in PyTorch:
our engine's checks read its shape and dtype from a one-element array broadcast to its
shape, and its summary (``SparseGrad``: norm, first values, min, max, nnz) is computed
from its values and indices.
Every other module of the bridge imports this one; this one imports nothing of the bridge.

torch is imported lazily (``torch_module``): ``import autograd_tui`` never needs it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tensor import Tensor


class TorchBridgeError(RuntimeError):
    """A PyTorch graph the bridge cannot run: the message names the node."""


class Unsupported(TorchBridgeError):
    """What PyTorch runs and the bridge does not (nested and big sparse gradients, other
    devices): the program is not at fault, and the message says what to change."""


_torch: Any = None  # torch, once imported
#: [n]: n higher-order ops (torch.cond) compiling or running (compiled.py): dynamo traces
#: the forward capture's mode and module hooks, which meanwhile only call through
HOP = [0]


def torch_module() -> Any:
    """``import torch``, or a clear message saying how to install it."""
    global _torch
    if _torch is not None:
        return _torch
    try:
        import torch
    except ImportError:
        raise TorchBridgeError(
            "PyTorch is not installed: pip install 'autograd-tui[torch]' (or pip install torch)"
        ) from None
    _torch = torch
    return torch


def check_backward_args(outputs: Any, grads: Any, inputs: Any) -> tuple[list[Any], list[Any]]:
    """What ``torch.autograd.backward``/``grad`` check before PyTorch's engine runs, in its
    words (``_make_grads``, then ``THPEngine_run_backward``); returns the roots and their
    gradients."""
    torch = torch_module()
    from torch.autograd import _make_grads

    def seq(x: Any) -> list[Any]:
        return [] if x is None else [x] if isinstance(x, torch.Tensor) else list(x)

    outputs, inputs = seq(outputs), seq(inputs)
    made = list(_make_grads(outputs, seq(grads) or [None] * len(outputs), is_grads_batched=False))
    for i, t in enumerate(outputs):  # (a GradientEdge: from_torch says it is not stepped)
        if isinstance(t, torch.Tensor) and not t.requires_grad:  # recomputed under no_grad
            raise RuntimeError(f"element {i} of tensors does not require grad and does not "
                               "have a grad_fn")
    if any(isinstance(t, torch.Tensor) and not t.requires_grad for t in inputs):
        raise RuntimeError("One of the differentiated Tensors does not require grad")
    return outputs, made


def typename(obj: Any) -> str:
    """``THPUtils_typename``, as PyTorch's messages name a value's type: ``tp_name``,
    dotted for a type written in C outside builtins (``numpy.ndarray``)."""
    t = type(obj)
    heap = t.__flags__ & (1 << 9)  # Py_TPFLAGS_HEAPTYPE: a class written in Python
    return t.__name__ if heap or t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def node_label(fn: Any) -> str:
    """``MulBackward0 (sequence_nr 3)``: how an error names a PyTorch node."""
    try:
        return f"{type(fn).__name__} (sequence_nr {fn._sequence_nr()})"
    except Exception:  # noqa: BLE001 - a label must not fail
        return type(fn).__name__


_NP_DTYPES: dict[Any, np.dtype] = {}


def numpy_dtype(torch: Any, dtype: Any, fn: Any) -> np.dtype:
    """The NumPy dtype our engine sees: the same, or float32 (complex64) for a dtype NumPy
    cannot hold (bfloat16), whose gradients ``TorchGrad`` views in float32."""
    out = _NP_DTYPES.get(dtype)
    if out is not None:
        return out
    try:
        out = torch.empty((), dtype=dtype).numpy().dtype
    except TypeError:
        if dtype.is_floating_point or dtype.is_complex:
            out = np.dtype(np.complex64 if dtype.is_complex else np.float32)
        else:
            raise TorchBridgeError(f"{node_label(fn)}: its gradients are {dtype}, which "
                                   "NumPy cannot hold") from None
    _NP_DTYPES[dtype] = out
    return out


class TorchGrad(Tensor):
    """A gradient a PyTorch node made: the torch tensor itself travels (``held``), so the
    next PyTorch node gets it back as it is (no copy, no device move, its dtype, layout
    and conjugate bits as PyTorch's engine would pass them); ``data`` is a NumPy view
    of it (a host copy off the cpu, a float32/complex64 copy for a dtype NumPy cannot
    hold, bfloat16), which our engine's checks and every view read.  Two of them add as
    PyTorch's ``InputBuffer::accumulate`` does, ``old + var`` in ATen: the sum takes
    ATen's memory layout (the first operand's: channels_last stays channels_last, where
    NumPy's would be contiguous), and the next node (a convolution) then computes as it
    does under PyTorch, to the bit.  Its summary is made once and reused while the
    torch tensor's version counter says it is unchanged (``summary_once``)."""

    __slots__ = ("held", "_summary")

    def __init__(self, data: Any, device: str, held: Any) -> None:
        super().__init__(data, device=device)
        self.held = held
        self._summary: tuple[int, bool, Any] | None = None

    def buffer_add(self, other: Tensor) -> Tensor | None:
        old, var = self.held, to_torch(other)
        # a sparse buffer is added to (var + old_var): sparse + dense is dense, and two
        # sparse gradients concatenate in PyTorch's order
        return to_ours(var + old if old.is_sparse else old + var, None)

    def summary_once(self, full: bool, make: Any) -> Any:
        """``make(self, full)``, or the one made before if the tensor has not changed
        since (an in-place op on the torch tensor bumps its version)."""
        version = self.held._version
        s = self._summary
        if s is not None and s[0] == version and s[1] == full:
            return s[2]
        out = make(self, full)
        self._summary = (version, full, out)
        return out


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
        if o.shape != shape:  # torch.Size is a tuple
            try:
                o = o.sum_to_size(shape)
            except RuntimeError:
                continue  # not expandable: our engine raises PyTorch's message
        if o.dtype != dtype and (o.is_floating_point() or o.is_complex()):
            o = o.to(dtype)
        res[i] = o
    return res


def outputs_to_ours(outs: Any, targets: list[Any], fn: Any) -> list[Tensor | None]:
    """``to_ours`` of each of ``torch_validate(outs, targets)``, in one pass: a gradient
    already of its target's shape and dtype (the common case) is not looked at twice."""
    n = len(targets)
    res: list[Tensor | None] = []
    for i, o in enumerate(outs):
        if o is None:
            res.append(None)
            continue
        tgt = targets[i] if i < n else None
        if tgt is not None and hasattr(o, "sum_to_size") and (o.shape != tgt[0]
                                                              or o.dtype != tgt[1]):
            o = torch_validate([o], [tgt])[0]
        res.append(to_ours(o, fn))
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
        raise Unsupported(f"{node_label(fn)} runs on device {s}: the bridge runs cpu "
                          "and cuda graphs only")
    return s


def to_ours(t: Any, fn: Any) -> Tensor | None:
    """A PyTorch gradient as our Tensor (``TorchGrad``: the tensor itself, a NumPy view)."""
    if t is None:
        return None
    torch = _torch or torch_module()
    if t.layout != torch.strided:
        if t.layout == torch.sparse_coo:
            return _sparse_grad(t, fn)
        raise Unsupported(f"{node_label(fn)} produced a {t.layout} gradient: the bridge "
                          "handles dense (strided) tensors and sparse COO ones only")
    if t.is_nested:
        raise Unsupported(f"{node_label(fn)} produced a nested tensor: the bridge "
                          "handles dense tensors only")
    if t.requires_grad:
        t = t.detach()
    shown = t if type(t) is torch.Tensor else subclass_shown(t, fn)
    cpu = t.is_cpu
    try:  # the common case: a cpu tensor NumPy can view as it is
        arr = (shown if cpu else shown.cpu()).numpy()
    except (TypeError, RuntimeError):  # conjugate/negative bits, bfloat16
        arr = _host_copy(torch, shown, fn)
    # TorchGrad(arr, device, t), without its two __init__ frames (one per gradient)
    g = _new_grad(TorchGrad)
    g.data, g.device, g.held, g._summary = arr, "cpu" if cpu else device_str(t.device), t, None
    g.grad_fn, g.output_nr, g._grad, g._grad_accumulator = None, 0, None, None
    g._backward_hooks, g._retains_grad, g._requires_grad, g._version_counter = [], False, \
        False, None
    return g


_new_grad = object.__new__


def subclass_shown(t: Any, fn: Any) -> Any:
    """What the views read of a tensor subclass's gradient (the subclass itself travels):
    a DTensor's local tensor when it is the whole tensor (a mesh of one rank, or
    replicated; FSDP2's ``fully_shard`` and ``distribute_tensor`` make them), else
    refused, saying so (NumPy cannot view a subclass)."""
    local = getattr(t, "to_local", None)
    if local is not None:
        whole = local()
        if whole.shape == t.shape:
            return whole
        raise Unsupported(f"{node_label(fn)} produced a DTensor gradient of shape "
                          f"{list(t.shape)} of which this rank holds {list(whole.shape)}: "
                          "the bridge shows whole gradients only (a mesh of one rank, or "
                          "replicated placements)")
    raise Unsupported(f"{node_label(fn)} produced a gradient of the tensor subclass "
                      f"{typename(t)}: the bridge reads gradients as plain tensors")


#: the most elements of a sparse gradient the views read densified (a NumPy copy; what
#: PyTorch passes on is the sparse tensor itself); a bigger one is a ``SparseGrad``
SPARSE_SHOWN = 1 << 22


def _sparse_grad(t: Any, fn: Any) -> TorchGrad:
    """A sparse COO gradient (``nn.Embedding(sparse=True)``): the sparse tensor travels
    (``held``), as PyTorch's engine passes it on, and adds as ``InputBuffer::accumulate``
    adds it (``old + var`` in ATen: sparse + sparse stays sparse, with dense it is dense);
    our engine's checks and the views read a dense copy (``data``)."""
    if t.requires_grad:
        t = t.detach()
    device = "cpu" if t.is_cpu else device_str(t.device)
    if t.numel() > SPARSE_SHOWN:
        torch = _torch or torch_module()
        # its shape and dtype for our engine's checks, in one element's memory
        shape = np.broadcast_to(np.zeros((), numpy_dtype(torch, t.dtype, fn)), tuple(t.shape))
        return SparseGrad(shape, device, t)
    dense = t.to_dense()
    arr = (dense if dense.is_cpu else dense.cpu())
    try:
        data = arr.numpy()
    except (TypeError, RuntimeError):
        data = _host_copy(_torch or torch_module(), arr, fn)
    return TorchGrad(data, device, t)


class SparseGrad(TorchGrad):
    """A sparse COO gradient too big to densify: ``data`` is zeros of its shape and dtype
    (a broadcast view of one element: our engine's shape and dtype checks read it), and
    the summary is computed from its values and indices (``sparse_summary``)."""

    __slots__ = ()

    def summary_once(self, full: bool, make: Any) -> Any:
        from ..events import raw

        version = self.held._version
        s = self._summary
        if s is None or s[0] != version:  # full or not: no element list for a huge one
            s = self._summary = (version, full, raw(sparse_summary(self.held)))
        return s[2]


def sparse_summary(t: Any, n: int = 4) -> dict[str, Any]:
    """``events.summarize`` of a sparse COO tensor without densifying it: its shape, dtype,
    first ``n`` values (of the dense layout), norm, and ``nnz``, ``min``, ``max`` (an
    implicit zero counts when some element is not stored).  Duplicate indices add, as
    ``to_dense`` adds them (``coalesce``)."""
    import math

    torch = _torch or torch_module()
    c = t.coalesce().cpu()
    vals = c.values().to(torch.float64)  # (nnz, *dense dims)
    nnz = c._nnz()
    per = math.prod(c.shape[c.sparse_dim():])  # elements per stored index
    fin = math.isfinite
    norm = math.sqrt(float(vals.pow(2).sum())) if nnz else 0.0
    stored = nnz * per
    lo = float(vals.min()) if stored else 0.0
    hi = float(vals.max()) if stored else 0.0
    if stored < t.numel():  # an element not stored is a zero
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    # the first n elements of the dense layout: the stored rows whose flat index is first
    rows = -(-min(n, t.numel()) // per) if per else 0
    first = torch.zeros(rows * per, dtype=torch.float64)
    if rows and nnz:
        strides = torch.tensor([math.prod(c.shape[i + 1:c.sparse_dim()])
                                for i in range(c.sparse_dim())], dtype=torch.int64)
        lin = (c.indices() * strides[:, None]).sum(0)
        at = (lin < rows).nonzero().flatten()
        for j in at.tolist():
            r = int(lin[j])
            first[r * per:(r + 1) * per] = vals[j].reshape(-1)
    values = [v if fin(v) else repr(v) for v in first[:n].tolist()]
    shown = [x if fin(x) else repr(x) for x in (norm, lo, hi)]
    return {"shape": list(t.shape), "dtype": str(numpy_dtype(torch, t.dtype, None)),
            "values": values, "norm": shown[0], "nnz": nnz, "min": shown[1], "max": shown[2],
            "sparse": True}


def _host_copy(torch: Any, t: Any, fn: Any) -> np.ndarray:
    """``t`` on the host as NumPy: its lazy bits resolved, or shown in float32 (complex64)
    when NumPy cannot hold its dtype."""
    data = t if t.is_cpu else t.cpu()
    try:
        return data.resolve_conj().resolve_neg().numpy()
    except TypeError:
        if t.is_floating_point() or t.is_complex():
            shown = data.to(torch.complex64 if t.is_complex() else torch.float32)
            return shown.resolve_conj().resolve_neg().numpy()
        raise TorchBridgeError(f"{node_label(fn)} produced a {t.dtype} gradient, which NumPy "
                               "cannot hold") from None


def to_display(t: Any) -> Tensor:
    """A PyTorch tensor as our Tensor to show (float32 where NumPy cannot hold it)."""
    return to_ours(t, None)


def to_torch(t: Tensor | None, copy: bool = False) -> Any:
    """Our Tensor as PyTorch's: a PyTorch node's gradient is its own tensor (cloned with
    ``copy``); ours shares the array unless ``copy`` (or it is read-only)."""
    if t is None:
        return None
    if type(t) is TorchGrad or type(t) is SparseGrad:
        return t.held.clone() if copy else t.held
    torch = _torch or torch_module()
    arr = np.asarray(t.data)
    out = torch.from_numpy(np.array(arr, copy=True) if copy or not arr.flags.writeable
                           else arr)
    return out if t.device == "cpu" else out.to(t.device)


def node_metadata(fn: Any) -> tuple[list[tuple[tuple[int, ...], np.dtype, str]],
                                     list[tuple[tuple[int, ...], Any]]]:
    """``fn``'s input metadata (read once: each read builds its Python objects anew) as
    ours (shape, NumPy dtype, device), or a clear error; and as PyTorch's (shape, dtype),
    what ``torch_validate`` casts a gradient flowing into ``fn`` to."""
    torch = torch_module()
    ours, theirs = [], []
    for m in fn._input_metadata:
        if m.is_nested_tensor or m.is_cpp_nested_tensor:
            raise Unsupported(f"{node_label(fn)} takes a nested tensor: the bridge "
                              "handles dense tensors only")
        shape, dtype = tuple(m.shape), m.dtype
        ours.append((shape, numpy_dtype(torch, dtype, fn), check_device(m.device, fn)))
        theirs.append((shape, dtype))
    return ours, theirs


def traced(outputs: Any) -> bool:
    """Outputs of a tensor subclass (not a Parameter): torch tracing a graph inside a node
    (``torch.cond``'s backward traces its branches' backward with functional tensors).
    PyTorch's engine runs that backward: it runs no node of the program's graph."""
    torch = _torch or torch_module()
    seq = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    return any(isinstance(t, torch.Tensor) and type(t) not in (torch.Tensor, torch.nn.Parameter)
               for t in seq)
