"""``Tensor``: a NumPy (or CuPy) array with autograd metadata.

Mirrors the autograd side of ``at::Tensor`` / ``AutogradMeta``: ``requires_grad``,
``grad_fn`` and ``output_nr`` (the edge a gradient takes), ``grad``, the lazily
created grad accumulator of a leaf, tensor hooks and ``retain_grad``, and the version
counter (``VariableVersion``), shared by a view or ``detach()`` with its base.

The forward ops live in the ``ops`` package; this module only wires Python's operators
and methods to them (``tensor_methods.py`` the others).  ``zeros_like``, ``ones_like`` and
``tensor(t)`` make their arrays with the module of ``t``'s data (``device.array_module``:
NumPy or CuPy), on its device; ``numpy()``, ``item()`` and ``repr`` copy to the host
(``device.to_numpy``).
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import device as _dev
from .dtypes import default_dtype
from .graph import AccumulateGrad, Node, RemovableHandle
from .tensor_methods import TensorMethods

#: PyTorch's warning on reading ``.grad`` of a non-leaf that does not retain its grad
NONLEAF_GRAD = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
    "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. "
    "If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor "
    "instead. See github.com/pytorch/pytorch/pull/30531 for more information.")


class VariableVersion:
    """``c10::VariableVersion``: the version counter, one object shared by a tensor, its
    views and ``detach()``es (``as_view``), so an in-place op on any of them bumps all.

    Made on first use (``Tensor._shared_version_counter``: the first bump, view or
    ``detach()``), not with each tensor: most tensors (every gradient a backward pass
    makes) are never bumped nor viewed, and a ``Tensor`` is made per op.  Until then a
    tensor's ``_version_counter`` is ``None`` and its version 0.  (PyTorch, too, skips
    the counter for tensors that never need one: ``VariableVersion(DISABLED)``.)"""

    __slots__ = ("version",)

    def __init__(self, version: int = 0) -> None:
        self.version = version


class Tensor(TensorMethods):
    __slots__ = (
        "data", "_requires_grad", "grad_fn", "output_nr", "_grad", "_grad_accumulator",
        "_backward_hooks", "_retains_grad", "device", "_version_counter", "__weakref__",
    )

    def __init__(self, data: Any, requires_grad: bool = False, device: str = "cpu") -> None:
        self.data = data
        self.device = device
        self.grad_fn: Node | None = None
        self.output_nr = 0
        self._grad: Tensor | None = None
        self._grad_accumulator: weakref.ref[AccumulateGrad] | None = None
        self._backward_hooks: list[Callable[..., Any]] = []
        self._retains_grad = False
        self._requires_grad = False
        self._version_counter: VariableVersion | None = None  # made on first use
        if requires_grad:
            if getattr(data, "dtype", None) is not None and data.dtype.kind not in "fc":
                raise RuntimeError(
                    "Only Tensors of floating point and complex dtype can require gradients")
            self.requires_grad_(True)

    # --- autograd metadata --------------------------------------------------------
    @property
    def _version(self) -> int:
        vc = self._version_counter
        return 0 if vc is None else vc.version

    @_version.setter
    def _version(self, value: int) -> None:
        self._shared_version_counter().version = value

    def _shared_version_counter(self) -> VariableVersion:
        """The version counter, made now if this tensor had none (to bump or share it)."""
        vc = self._version_counter
        if vc is None:
            vc = self._version_counter = VariableVersion()
        return vc

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad or self.grad_fn is not None

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if self.grad_fn is not None:
            if not requires_grad:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want "
                    "to use a computed variable in a subgraph that doesn't require "
                    "differentiation use var_no_grad = var.detach()."
                )
            return self
        if requires_grad and self.data.dtype.kind not in "fc":
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def grad(self) -> Tensor | None:
        if self._grad is None and self.grad_fn is not None and not self._retains_grad:
            warnings.warn(NONLEAF_GRAD, UserWarning, stacklevel=2)  # as TensorBody.h warns
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:  # ``THPVariable_set_grad``'s checks, word for word
            if not isinstance(value, Tensor):
                raise TypeError("assigned grad expected to be a Tensor or None but got grad "
                                f"of type {type(value).__name__}")
            if value.shape != self.shape:
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value.shape)}' to a "
                    f"tensor of size '{list(self.shape)}'. Please ensure that the gradient "
                    "and the tensor are the same size")
        self._grad = value

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def _get_grad_accumulator(self) -> AccumulateGrad:
        """``impl::grad_accumulator``: created on first use, held weakly as in PyTorch."""
        acc = self._grad_accumulator() if self._grad_accumulator is not None else None
        if acc is None:
            acc = AccumulateGrad(self)
            self._grad_accumulator = weakref.ref(acc)
        return acc

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
        """A hook on this tensor's gradient: ``hook(grad)`` may return a replacement."""
        if not self.requires_grad:
            raise RuntimeError(
                "cannot register a hook on a tensor that doesn't require gradient"
            )
        if self.grad_fn is not None:
            return self.grad_fn._add_tensor_pre_hook(self.output_nr, hook)
        self._backward_hooks.append(hook)
        return RemovableHandle(self._backward_hooks, hook)

    def retain_grad(self) -> None:
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None or self._retains_grad:
            return
        ref = weakref.ref(self)

        def retain_grad_hook(grad: Tensor | None) -> None:
            var = ref()
            if var is None or grad is None:
                return
            var._grad = grad.clone() if var._grad is None else var._grad + grad

        self.grad_fn._retains_grad_hooks[self.output_nr] = retain_grad_hook
        self._retains_grad = True

    def backward(
        self,
        gradient: Tensor | None = None,
        retain_graph: bool | None = None,
        create_graph: bool = False,
        inputs: Sequence[Tensor] | Tensor | None = None,
    ) -> None:
        from .autograd import backward

        backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def detach(self) -> Tensor:
        out = Tensor(self.data, device=self.device)
        out._version_counter = self._shared_version_counter()  # a view: the same counter
        return out

    def detach_(self) -> Tensor:
        self.grad_fn = None
        self._requires_grad = False
        return self

    # --- plain properties -----------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    @property
    def dtype(self) -> Any:
        return self.data.dtype

    @property
    def ndim(self) -> int:
        return self.data.ndim

    def dim(self) -> int:
        return self.data.ndim

    def numel(self) -> int:
        return int(self.data.size)

    @property
    def is_cuda(self) -> bool:
        return self.device != "cpu"

    def numpy(self) -> np.ndarray:
        if self.requires_grad:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead."
            )
        if self.device != "cpu":
            raise TypeError(
                f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() "
                "to copy the tensor to host memory first."
            )
        return _dev.to_numpy(self.data)

    def tolist(self) -> Any:
        return _dev.to_numpy(self.data).tolist()

    def item(self) -> Any:
        if self.data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self.data.size} elements cannot be converted to Scalar"
            )
        return _dev.to_numpy(self.data).reshape(()).item()

    def __len__(self) -> int:
        if self.data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.data.shape[0]

    def __bool__(self) -> bool:
        if self.data.size != 1:
            raise RuntimeError(
                "Boolean value of Tensor with more than one value is ambiguous"
            )
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __repr__(self) -> str:
        body = np.array2string(
            _dev.to_numpy(self.data), precision=4, separator=", ", prefix="tensor("
        )
        extra = []
        if self.device != "cpu":
            extra.append(f"device='{self.device}'")
        if self.data.dtype != np.float32 and self.data.dtype.kind == "f":
            extra.append(f"dtype={self.data.dtype}")
        if self.grad_fn is not None:
            extra.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self.requires_grad:
            extra.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extra) + ")"

    __hash__ = object.__hash__

    # --- ops (defined in the ops package) ----------------------------------------------------
    def __add__(self, o: Any) -> Tensor:
        return _ops.add(self, o)

    def __radd__(self, o: Any) -> Tensor:
        return _ops.add(self, o)

    def __sub__(self, o: Any) -> Tensor:
        return _ops.sub(self, o)

    def __rsub__(self, o: Any) -> Tensor:
        return _ops.rsub(self, o)

    def __mul__(self, o: Any) -> Tensor:
        return _ops.mul(self, o)

    def __rmul__(self, o: Any) -> Tensor:
        return _ops.mul(self, o)

    def __truediv__(self, o: Any) -> Tensor:
        return _ops.div(self, o)

    def __rtruediv__(self, o: Any) -> Tensor:
        return _ops.mul(_ops.reciprocal(self), o)

    def __pow__(self, o: Any) -> Tensor:
        return _ops.pow(self, o)

    def __rpow__(self, o: Any) -> Tensor:
        return _ops.rpow(self, o)

    def __neg__(self) -> Tensor:
        return _ops.neg(self)

    def __matmul__(self, o: Tensor) -> Tensor:
        return _ops.matmul(self, o)

    def __getitem__(self, key: Any) -> Tensor:
        return _ops.index(self, key)

    def __lt__(self, o: Any) -> Tensor:
        return _ops.compare(self, o, np.less)

    def __le__(self, o: Any) -> Tensor:
        return _ops.compare(self, o, np.less_equal)

    def __gt__(self, o: Any) -> Tensor:
        return _ops.compare(self, o, np.greater)

    def __ge__(self, o: Any) -> Tensor:
        return _ops.compare(self, o, np.greater_equal)

    # As torch: == and != compare element by element (a bool Tensor), and a Tensor still
    # hashes by identity (a dict keyed by tensors works; ``in`` on a list compares).
    def __eq__(self, o: Any) -> Tensor | bool:  # type: ignore[override]
        return False if o is None else _ops.eq(self, o)  # torch: t == None is False

    def __ne__(self, o: Any) -> Tensor | bool:  # type: ignore[override]
        return True if o is None else _ops.ne(self, o)

    __hash__ = object.__hash__

    def add(self, o: Any) -> Tensor:
        return _ops.add(self, o)

    def sub(self, o: Any) -> Tensor:
        return _ops.sub(self, o)

    def mul(self, o: Any) -> Tensor:
        return _ops.mul(self, o)

    def div(self, o: Any) -> Tensor:
        return _ops.div(self, o)

    def pow(self, o: Any) -> Tensor:
        return _ops.pow(self, o)

    def neg(self) -> Tensor:
        return _ops.neg(self)

    def exp(self) -> Tensor:
        return _ops.exp(self)

    def log(self) -> Tensor:
        return _ops.log(self)

    def reciprocal(self) -> Tensor:
        return _ops.reciprocal(self)

    def relu(self) -> Tensor:
        return _ops.relu(self)

    def sigmoid(self) -> Tensor:
        return _ops.sigmoid(self)

    def tanh(self) -> Tensor:
        return _ops.tanh(self)

    def sum(self, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return _ops.sum(self, dim, keepdim)

    def mean(self, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return _ops.mean(self, dim, keepdim)

    def matmul(self, o: Tensor) -> Tensor:
        return _ops.matmul(self, o)

    def mm(self, o: Tensor) -> Tensor:
        return _ops.mm(self, o)

    def reshape(self, *shape: Any) -> Tensor:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return _ops.reshape(self, shape)

    view = reshape

    def expand(self, *shape: Any) -> Tensor:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return _ops.expand(self, shape)

    def t(self) -> Tensor:
        return _ops.t(self)

    @property
    def T(self) -> Tensor:  # noqa: N802 - torch's name
        return _ops.t(self)

    def clone(self) -> Tensor:
        return _ops.clone(self)

    def to(self, device: str | None = None, dtype: Any = None) -> Tensor:
        return _ops.to(self, device, dtype)

    def cpu(self) -> Tensor:
        return _ops.to(self, "cpu", None)

    def cuda(self, index: int = 0) -> Tensor:
        return _ops.to(self, f"cuda:{index}", None)


_new_tensor = object.__new__


def _tensor_of(data: Any, device: str) -> Tensor:
    """``Tensor(data, device=device)`` (no requires_grad) for the backward pass's hot paths,
    where a gradient is made per node: no ``__init__`` frame, no keyword parsing."""
    t = _new_tensor(Tensor)
    t.data = data
    t.device = device
    t.grad_fn = None
    t.output_nr = 0
    t._grad = None
    t._grad_accumulator = None
    t._backward_hooks = []
    t._retains_grad = False
    t._requires_grad = False
    t._version_counter = None
    return t


# The one cycle of the tensor/ops core: the ops make Tensors and Tensor's operators call the
# ops, so ``ops`` is imported here, once Tensor is defined (its methods read it at call time).
from . import ops as _ops  # noqa: E402


def tensor(data: Any, requires_grad: bool = False, device: str | None = "cpu",
           dtype: Any = None) -> Tensor:
    """``torch.tensor``: copies ``data``; Python floats give the default dtype, ints int64,
    bools bool (a NumPy array keeps its dtype)."""
    if isinstance(data, Tensor):  # a copy made where the data lives (then moved)
        arr = _dev.array_module(data.data).array(data.data, dtype=dtype)
        dev = _dev.canonical(device)
        return Tensor(_dev.to_device_array(arr, dev), requires_grad=requires_grad, device=dev)
    arr = np.array(data, dtype=dtype)
    if arr.dtype == object:
        raise TypeError(f"can't build a tensor from {type(data).__name__} data")
    if dtype is None and arr.dtype.kind == "f" and not isinstance(data, (np.ndarray, np.generic)):
        arr = arr.astype(default_dtype(), copy=False)
    dev = _dev.canonical(device)
    return Tensor(_dev.to_device_array(arr, dev), requires_grad=requires_grad, device=dev)


def _factory(fill: Callable[..., np.ndarray]) -> Callable[..., Tensor]:
    def make(*shape: Any, requires_grad: bool = False, device: str = "cpu",
             dtype: Any = None) -> Tensor:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        dev = _dev.canonical(device)
        arr = fill(shape, default_dtype() if dtype is None else dtype)
        return Tensor(_dev.to_device_array(arr, dev), requires_grad=requires_grad, device=dev)

    return make


zeros = _factory(lambda s, d: np.zeros(s, dtype=d))
ones = _factory(lambda s, d: np.ones(s, dtype=d))


def randn(*shape: Any, requires_grad: bool = False, device: str = "cpu",
          generator: np.random.Generator | None = None, dtype: Any = None) -> Tensor:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if generator is None:  # the generator ``manual_seed`` seeds
        from .creation import default_generator

        generator = default_generator()
    rng = generator
    dev = _dev.canonical(device)
    return Tensor(_dev.to_device_array(rng.standard_normal(shape).astype(
        default_dtype() if dtype is None else dtype), dev),
                  requires_grad=requires_grad, device=dev)


def zeros_like(t: Tensor, requires_grad: bool = False) -> Tensor:
    with _dev.on_device(t.device):
        data = _dev.array_module(t.data).zeros_like(t.data)
    return Tensor(data, requires_grad=requires_grad, device=t.device)


def ones_like(t: Tensor, requires_grad: bool = False) -> Tensor:
    with _dev.on_device(t.device):
        data = _dev.array_module(t.data).ones_like(t.data)
    return Tensor(data, requires_grad=requires_grad, device=t.device)

