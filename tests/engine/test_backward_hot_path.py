"""The backward pass's inlined common cases give what the general code gives.

- ``MulBackward0`` without grad mode multiplies through ``arith._product_1d`` for 1-dim
  float gradients: the same array (values, dtype, strides), device and Tensor fields as
  ``elementwise``, for every 1-dim layout and operand (else it is ``elementwise``'s);
- ``tensor._tensor_of`` makes the Tensor that ``Tensor(data, device=...)`` makes;
- ``evaluate_function`` inlines ``validate_outputs``' common case and ``InputBuffer.add``'s:
  a gradient to reduce, to cast or to refuse still is (checked against torch), and
  gradients summed in a buffer are the same with and without ``create_graph``.
"""

from __future__ import annotations

import numpy as np
import pytest
from semantics_helpers import (
    Fn,
    T,
    restore_modes,  # noqa: F401 - autouse: grad and anomaly mode reset
    same,
)

from autograd_tui import engine
from autograd_tui.engine.errstate import ignore_errors
from autograd_tui.engine.ops.arith import _product_1d
from autograd_tui.engine.ops.base import elementwise
from autograd_tui.engine.strides import element_strides
from autograd_tui.engine.tensor import Tensor, _tensor_of

pytestmark = pytest.mark.timeout(60)

_FIELDS = [s for s in Tensor.__slots__ if s != "__weakref__"]


def _same_tensor(got: Tensor, want: Tensor) -> None:
    assert type(got) is type(want) is Tensor
    assert type(got.data) is type(want.data)
    assert got.data.dtype == want.data.dtype and got.data.shape == want.data.shape
    assert element_strides(got.data) == element_strides(want.data)
    np.testing.assert_array_equal(got.data, want.data)
    for f in _FIELDS:
        if f != "data":
            assert getattr(got, f) == getattr(want, f), f


def _one_dim() -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    base = rng.uniform(-2, 2, size=12)
    odd = np.lib.stride_tricks.as_strided(base, (1,), (16,))
    out = [base, base[::3], base[::-1], base[:0], base[:1], odd, base[:4].reshape(2, 2)[:, 0]]
    return out + [a.astype(np.float32) for a in out] + [np.arange(4), np.ones(4, np.float16)]


def test_product_1d_gives_elementwises_tensor() -> None:
    arrays = _one_dim()
    checked = fast = 0
    with engine.no_grad(), ignore_errors():
        for a in arrays:
            if a.dtype.char not in "df":
                continue  # MulBackward0 takes _product_1d for float32/float64 only
            g = Tensor(a)
            others: list[object] = [0.5, 2, True, np.float32(3.0), np.float64(0.25)]
            others += [Tensor(b) for b in arrays if b.shape == a.shape or b.size == 1]
            others += [Tensor(np.array(2.0)), Tensor(a.copy(), device="cuda:0")]
            for x in others:
                if isinstance(x, Tensor) and x.device != "cpu":
                    with pytest.raises(RuntimeError, match="same device"):
                        _product_1d(g, a, x)
                    with pytest.raises(RuntimeError, match="same device"):
                        elementwise(g, x, np.multiply)
                    continue
                got = _product_1d(g, a, x)
                _same_tensor(got, elementwise(g, x, np.multiply))
                fast += type(x) is float or isinstance(x, Tensor) and x.data.dtype == a.dtype \
                    and x.data.shape == a.shape
                checked += 1
    assert checked > 100 and fast > 30


def test_tensor_of_is_the_constructors_tensor() -> None:
    data = np.arange(3.0)
    for device in ("cpu", "cuda:0"):
        _same_tensor(_tensor_of(data, device), Tensor(data, device=device))
    t = _tensor_of(data, "cpu")
    assert t._backward_hooks is not _tensor_of(data, "cpu")._backward_hooks
    assert t.is_leaf and not t.requires_grad and t._version == 0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("create_graph", [False, True])
def test_mul_and_buffer_sums_as_with_grad_mode(dtype: type, create_graph: bool) -> None:
    """A chain of products with a reused leaf (buffers that sum) and a scalar factor:
    the gradients without grad mode (the inlined paths) equal those made with it."""
    rng = np.random.default_rng(2)
    vals = [rng.uniform(0.5, 1.5, size=3).astype(dtype) for _ in range(3)]
    xs = [engine.tensor(v, requires_grad=True) for v in vals]
    v = xs[0]
    for i in range(12):
        v = (v * xs[i % 3] + xs[(i + 1) % 3]) * 0.5
    grads = engine.autograd.grad(v.sum(), xs, create_graph=create_graph)
    import torch

    ts = [torch.tensor(v, requires_grad=True) for v in vals]
    w = ts[0]
    for i in range(12):
        w = (w * ts[i % 3] + ts[(i + 1) % 3]) * 0.5
    want = torch.autograd.grad(w.sum(), ts)
    for g, tw in zip(grads, want):
        assert g.dtype == tw.numpy().dtype and g.shape == tuple(tw.shape)
        assert element_strides(g.data) == tuple(tw.stride())
        np.testing.assert_allclose(g.data, tw.numpy(), rtol=1e-6 if dtype is np.float32 else 1e-12)
        assert (g.grad_fn is not None) == create_graph


def _shaping(m, out_grad):
    class Shaping(Fn(m)):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return out_grad(m, g)

    return Shaping


@pytest.mark.parametrize("case", ["broadcast", "float32", "incompatible", "both"])
def test_validate_outputs_reduces_casts_and_refuses(case: str) -> None:
    def out_grad(m, g):
        if case == "broadcast":
            return g.expand(3, 2) * 1.0
        if case == "float32":
            return g.float()
        if case == "incompatible":
            return T(m, [1.0, 2.0, 3.0])
        return (g.expand(4, 2) * 1.0).float()

    def s(m):
        x = T(m, [1.0, 2.0], True)
        w = T(m, [0.5, 3.0], True)
        y = _shaping(m, out_grad).apply(x * w) * w
        y.sum().backward()
        return [x.grad, w.grad, x.grad.dtype == x.dtype]

    same(s, "raise" if case == "incompatible" else "ok")
