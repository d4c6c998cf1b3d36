"""What every op family shares: the backward node's base (``OpNode``), recording it
(``record``), the elementwise kernel with TensorIterator's layout, and small helpers.

Mirrors:

- ``record`` is the generated ``VariableType`` code of an op: ``collect_next_edges``, the
  node made with what it saves, ``set_history`` (the output's ``grad_fn``, ``output_nr``
  and input metadata);
- ``OpNode`` is a generated node of ``derivatives.yaml``: its ``SavedVariable``s, checked
  on unpacking against the version each had when saved (``SavedVariable::unpack``, with
  its message word for word), and its other attributes (sizes, dims, flags), declared
  on the class as the generated struct declares them; its ``apply`` starts as the
  generated one does (``any_grad_defined``): if no incoming gradient is defined, every
  output is undefined (``None``) and the formula does not run.  ``OpNode`` wraps a
  formula in that check, except one marked ``@_any_grad_defined_inline``, which begins
  with the check itself (``if grads[0] is None``), as the generated code has it inline:
  the hot formulas (``add``, ``mul``, ``sum``, ...), so that the backward pass pays no
  extra Python frame per node;
- ``as_view`` is autograd's ``as_view``: a view shares its base's version counter;
- ``elementwise`` lays its result out as ``TensorIterator`` does (``strides.py``);
- ``check_broadcast``, ``check_same_device`` and ``wrap_dim`` raise ATen's errors
  (``infer_size``, the device check, ``maybe_wrap_dim``).

Departures: a saved tensor is a plain reference plus its version (no ``SavedVariable``
object, no pack/unpack hooks); the elementwise kernel is NumPy's ufunc (or CuPy's, on a
device array), run with floating-point errors silenced, as ATen's kernels are.
"""

from __future__ import annotations

import builtins
import inspect
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from .. import grad_mode
from ..dtypes import binary_result_type
from ..errstate import errors_ignored
from ..graph import SAVED_FREED, Node, collect_next_edges
from ..strides import contiguous_strides, elementwise_layout
from ..tensor import Tensor, _tensor_of

Grads = list[Tensor | None]


# --- saved tensors and their versions ----------------------------------------------
_TYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
               "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
               "bool": "Bool"}


def dtype_name(dtype: Any) -> str:
    """``toString(ScalarType)``: ``Float``, ``Long``, ``Bool``, ... (NumPy's name otherwise)."""
    name = np.dtype(dtype).name
    return _TYPE_NAMES.get(name, name)


def torch_type_string(t: Tensor) -> str:
    """``torch.FloatTensor``, ``torch.cuda.DoubleTensor``: the legacy type name PyTorch's
    messages print."""
    return f"torch.{'cuda.' if t.device != 'cpu' else ''}{dtype_name(t.dtype)}Tensor"


def _short_name(node: Node) -> str:
    """A node's name without its ``Backward<N>`` suffix, as SavedVariable's message has it."""
    return re.sub(r"Backward\d*$", "", node.name())


def modified_message(node: Node, t: Tensor, version: int, is_output: bool) -> str:
    """``SavedVariable::unpack``'s error for a tensor modified in place since it was saved."""
    shape = ", ".join(str(n) for n in t.shape)
    msg = ("one of the variables needed for gradient computation has been modified by an "
           f"inplace operation: [{torch_type_string(t)} [{shape}]]")
    producer = node if is_output else t.grad_fn
    if producer is not None:
        msg += f", which is output {t.output_nr} of {_short_name(producer)},"
    return (msg + f" is at version {t._version}; expected version {version} instead. Hint: "
            "enable anomaly detection to find the operation that failed to compute its "
            "gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).")


_interned_versions: dict[tuple[tuple[str, int, bool], ...],
                         tuple[tuple[str, int, bool], ...]] = {}
_INTERN_MAX = 4096  # distinct ones kept; the cache starts over past it


class OpNode(Node):
    """An op's backward node, made with everything it keeps (``record`` makes it):

    - ``saved``: its SavedVariables (the tensors, and the scalars its formula reads beside
      them), unpacked by ``saved()``, which checks each tensor's version, and released
      after a backward without ``retain_graph``;
    - keyword fields: the attributes a formula needs that are not tensors (sizes, dims,
      flags).  A release keeps them, as PyTorch's node keeps its non-tensor attributes
      (a node with no saved tensor can run twice).  Each subclass declares its fields as
      class annotations; any other keyword is refused.
    """

    # SavedVariable's saved_version_: (name, version at save, saved its own output?)
    _saved_versions: Sequence[tuple[str, int, bool]] = ()
    _FIELDS: ClassVar[dict[type, frozenset[str]]] = {}  # a node class -> its declared fields

    def __init__(self, saved: Mapping[str, Any] | None = None, output: Tensor | None = None,
                 **fields: Any) -> None:
        Node.__init__(self)  # not super(): a node is made per op, on the forward's hot path
        if fields:
            declared = OpNode._FIELDS.get(type(self)) or self._declared()
            if not declared.issuperset(fields):
                raise TypeError(f"{type(self).__name__} declares no field "
                                f"{sorted(set(fields) - declared)}")
            self.__dict__.update(fields)
        if saved:
            self.save(**saved)
            versions = tuple([(k, v._version, v is output) for k, v in saved.items()
                              if type(v) is Tensor])
            # One tuple shared by the nodes that saved alike (a str, an int and a bool per
            # tensor, never changed): a backward pass reads it hot, not one list per node.
            shared = _interned_versions.get(versions)
            if shared is None:
                if len(_interned_versions) >= _INTERN_MAX:
                    _interned_versions.clear()
                shared = _interned_versions[versions] = versions
            self._saved_versions = shared

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        formula = cls.__dict__.get("apply")
        if formula is not None and not getattr(formula, "any_grad_defined_inline", False):
            cls.apply = _any_grad_defined(formula)

    @classmethod
    def _declared(cls) -> frozenset[str]:
        names = OpNode._FIELDS.get(cls)
        if names is None:
            names = frozenset(n for k in cls.__mro__ if issubclass(k, OpNode) and k is not OpNode
                              for n in inspect.get_annotations(k))
            OpNode._FIELDS[cls] = names
        return names

    def saved(self) -> dict[str, Any]:
        # ``Node.saved`` and ``Tensor._version``, inlined: called by most formulas
        if self._released:
            raise RuntimeError(SAVED_FREED)
        saved = self._saved or {}
        for k, version, is_output in self._saved_versions:
            t = saved[k]
            vc = t._version_counter
            if (0 if vc is None else vc.version) != version:
                raise RuntimeError(modified_message(self, t, version, is_output))
        return saved

    def node_meta(self) -> dict[str, Any] | None:
        """The saved tensors with their versions, for the views, once one of them has
        been modified in place (else nothing: no event)."""
        if self._released or not self._saved_versions:
            return None
        saved = self._saved or {}
        if all(saved[k]._version == v for k, v, _ in self._saved_versions):
            return None
        lines = []
        for k, version, _ in self._saved_versions:
            t = saved[k]
            now = t._version
            state = (f"version {version}" if now == version
                     else f"saved at version {version}, now version {now}: modified in place")
            lines.append(f"{k}: Tensor{list(t.shape)} {np.dtype(t.dtype).name}, {state}")
        return {"module": None, "module_type": None, "tensor": None, "created": None,
                "source": None, "saved": lines}


def _any_grad_defined(formula: Any) -> Any:
    """The generated ``apply``'s preamble: ``any_grad_defined ? formula : Tensor()`` for
    every output, so undefined gradients flow through a node whose inputs are all undefined
    (a formula with some undefined inputs treats them itself, as ``SplitBackward0`` does)."""

    def apply(self: OpNode, grads: Grads) -> Grads:
        for g in grads:
            if g is not None:
                return formula(self, grads)
        return [None] * len(self._next_edges)

    apply.__wrapped__ = formula  # type: ignore[attr-defined]
    apply.__name__ = apply.__qualname__ = "apply"
    return apply


def _any_grad_defined_inline(formula: Any) -> Any:
    """Marks a formula that begins with the ``any_grad_defined`` check itself (for a node
    with one input: ``if grads[0] is None: return [None] * len(self._next_edges)``), so
    that ``OpNode`` does not wrap it."""
    formula.any_grad_defined_inline = True
    return formula


def record(out: Tensor, node_cls: type[OpNode], inputs: Sequence[Any],
           saved: Mapping[str, Any] | None = None, **fields: Any) -> Tensor:
    """Attach a backward node to ``out`` if grad mode is on and an input requires grad:
    ``node_cls(saved, out, **fields)``, with an edge per input."""
    if not grad_mode.is_grad_enabled():
        return out
    if not builtins.any(isinstance(t, Tensor) and t.requires_grad for t in inputs):
        return out
    node = node_cls(saved, out, **fields) if saved or fields else node_cls()
    # A Python scalar is a constant: its edge is invalid (Edge(None, 0)), as in PyTorch.
    node.set_next_edges(collect_next_edges(*[t if isinstance(t, Tensor) else None
                                             for t in inputs]))
    node.add_input_metadata(out.shape, out.dtype, out.device)
    out.grad_fn = node
    out.output_nr = 0
    return out


# --- helpers -------------------------------------------------------------------
def check_same_device(*ts: Any) -> str:
    devs = {t.device for t in ts if isinstance(t, Tensor) and t.ndim > 0 or
            isinstance(t, Tensor) and t.requires_grad}
    devs |= {t.device for t in ts if isinstance(t, Tensor)}
    if len(devs) > 1:
        a, b = sorted(devs)[:2]
        raise RuntimeError(
            "Expected all tensors to be on the same device, but found at least two "
            f"devices, {b} and {a}!"
        )
    return devs.pop() if devs else "cpu"


def data_of(x: Any) -> Any:
    """A Tensor's array, or a Python scalar as it is."""
    return x.data if isinstance(x, Tensor) else x


def as_tensor(data: Any, device: str) -> Tensor:
    """An op's result: ``data`` (no copy) as a Tensor on ``device``."""
    # a NumPy scalar (a 0-dim result) becomes a 0-dim array; any other array is kept
    return Tensor(np.asarray(data) if isinstance(data, np.generic) else data, device=device)


def as_view(base: Tensor, out: Tensor) -> Tensor:
    """``as_view``: ``out`` is a view of ``base`` and shares its version counter, so an
    in-place op on either is seen by a node that saved the other."""
    out._version_counter = base._shared_version_counter()
    return out


def mask_of(cond: Any, like: Tensor) -> Tensor:
    """A 0/1 Tensor of ``like``'s dtype and device: ``cond`` as a constant factor (a
    comparison has no gradient, so a formula multiplies by its mask)."""
    return as_tensor(cond.astype(like.dtype), like.device)


def _shape_of(x: Any) -> tuple[int, ...]:
    return x.shape if isinstance(x, Tensor) else ()


def computes(node: Node) -> tuple[bool, bool]:
    """``should_compute_output(0)`` and ``(1)`` of a binary op's node, in one call."""
    edges = node._next_edges
    n = len(edges)
    return (n > 0 and edges[0].function is not None,
            n > 1 and edges[1].function is not None)


def check_broadcast(a: Any, b: Any) -> None:
    """The broadcasting ``at::infer_size``'s error (ExpandUtils.cpp, not
    ``strides.infer_size``) for shapes that do not broadcast, in PyTorch's words."""
    sa, sb = _shape_of(a), _shape_of(b)
    nd = builtins.max(len(sa), len(sb))
    for i in range(nd - 1, -1, -1):
        off = nd - 1 - i
        x = sa[len(sa) - 1 - off] if len(sa) - 1 - off >= 0 else 1
        y = sb[len(sb) - 1 - off] if len(sb) - 1 - off >= 0 else 1
        if x != y and x != 1 and y != 1:
            raise RuntimeError(
                f"The size of tensor a ({x}) must match the size of tensor b ({y}) "
                f"at non-singleton dimension {i}"
            )


# (shape, itemsize) -> NumPy's byte strides of a contiguous array, as PyTorch lays it out
# (None for a shape with a zero, whose layout rules are left to the slow path)
_DENSE_STRIDES: dict[tuple[tuple[int, ...], int], tuple[int, ...] | None] = {}


def is_dense(arr: np.ndarray) -> bool:
    """True if ``arr`` has ``contiguous_strides`` exactly (so ``restride`` keeps it)."""
    if arr.ndim == 1:
        return arr.strides[0] == arr.itemsize  # contiguous_strides((n,)) == (1,)
    key = (arr.shape, arr.itemsize)
    strides = _DENSE_STRIDES.get(key, False)
    if strides is False:
        strides = (None if 0 in arr.shape else
                   tuple(s * arr.itemsize for s in contiguous_strides(arr.shape)))
        if len(_DENSE_STRIDES) < 4096:
            _DENSE_STRIDES[key] = strides
    return arr.strides == strides


def operand_arrays(a: Any, b: Any, dt: Any, opmath_b: bool = False) -> tuple[Any, Any, Any]:
    """``a``'s and ``b``'s arrays (or Python scalars) cast to the dtype an op computes in
    for a result of ``dt``, and that dtype.  A NumPy scalar becomes a Python one, so that
    NumPy does not promote by it.  For float16 (a reduced float) ATen's CPU kernels compute
    in float32 (``opmath_type``) on operands cast to float16 first, except that ``mul``
    and ``div`` read a scalar second operand's original value (``original_scalar_value``):
    ``opmath_b``."""
    if dt != np.float16:
        def cast(x: Any) -> Any:
            if isinstance(x, Tensor):
                return x.data if x.data.dtype == dt else x.data.astype(dt)
            return x.item() if isinstance(x, np.generic) else x

        return cast(a), cast(b), dt
    f16, f32 = np.dtype(np.float16), np.dtype(np.float32)

    def cast_reduced(x: Any, exact: bool) -> Any:
        if isinstance(x, Tensor):
            d = x.data if exact or x.data.dtype == f16 else x.data.astype(f16)
            return d.astype(f32)
        return builtins.float((np.float32 if exact else np.float16)(x))

    return cast_reduced(a, False), cast_reduced(b, opmath_b), f32


def elementwise(a: Tensor, b: Any, np_fn: Any, dtype: Any = None) -> Tensor:
    """``np_fn(a, b)`` (``b`` wrapped) on one device, laid out as TensorIterator lays it out,
    computed in PyTorch's result type of ``a`` and ``b`` (or ``dtype``, if given)."""
    ad = a.data
    # Fast path (the backward pass's usual case): where the checks below cannot fail
    # and ``elementwise_strides`` gives ``contiguous_strides``: NumPy operands of one
    # shape on one device, C-contiguous (its own first test), or a scalar with a
    # 0- or 1-dim tensor (always contiguous) or a dense one, all of the result's dtype.
    # The result is then the slow path's array, laid out again only if NumPy's layout
    # is not that one.  The result type is ``binary_result_type``'s fast answer, asked
    # inline (a call per op costs about as much as the rest of this test): two tensors
    # of one dtype, or a Python scalar of the tensor's category or lower, give the
    # tensor's dtype; float16 ("e") computes in float32, so never here.
    if type(ad) is np.ndarray:
        dt = ad.dtype
        if type(b) is Tensor:
            bd = b.data
            fast = (type(bd) is np.ndarray and bd.dtype == dt and ad.shape == bd.shape
                    and a.device == b.device and ad.flags.c_contiguous
                    and bd.flags.c_contiguous)
        else:
            bd = b
            tb = type(b)
            fast = ((tb is float and dt.kind == "f" or tb is int and dt.kind != "b"
                     or tb is bool) and (ad.ndim <= 1 or is_dense(ad)))
        if fast and (dtype is None or dtype == dt) and dt.char != "e":
            if errors_ignored():
                data = np_fn(ad, bd)
            else:
                with np.errstate(all="ignore"):
                    data = np_fn(ad, bd)
            if type(data) is not np.ndarray or not (
                    data.ndim == 1 and data.strides[0] == data.itemsize or is_dense(data)):
                data = elementwise_layout(data, ad, bd)  # (is_dense's 1-dim case inline)
            return _tensor_of(data, a.device)
    dt = binary_result_type(a, b) if dtype is None else dtype
    dev = check_same_device(a, b)
    check_broadcast(a, b)
    opmath_b = (np_fn is np.multiply or np_fn is np.divide) and (
        not isinstance(b, Tensor) or b.data.size == 1)
    x, y, comp = operand_arrays(a, b, dt, opmath_b)
    with np.errstate(all="ignore"):  # inf * 0, inf - inf: NaN, silently, as in torch
        data = np_fn(x, y)
    if comp != dt and data.dtype == comp:
        data = data.astype(dt)
    return as_tensor(elementwise_layout(data, ad, data_of(b)), dev)


def norm_dims(dim: int | Sequence[int], ndim: int) -> tuple[int, ...]:
    """Reduction dims, wrapped and sorted."""
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(sorted(d % builtins.max(ndim, 1) for d in dims))


def wrap_dim(dim: int, ndim: int) -> int:
    """``maybe_wrap_dim``: a negative dimension counts from the end; out of range raises."""
    n = builtins.max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
            f"but got {dim})")
    return dim % n
