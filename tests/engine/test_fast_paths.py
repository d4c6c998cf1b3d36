"""Fast paths give what the slow paths give.

- ``ops.arith._binary`` skips the layout rules for contiguous operands: its result must be
  the array (values, dtype, strides) that ``elementwise_layout`` makes, for every
  layout (transposed, size-1 dimensions with odd strides, empty, 0-dim, scalars);
  so must ``ops.shape._clone``'s, which copies a dense array without the layout rules.
- ``errstate.errors_ignored`` lets an op skip ``np.errstate`` only where the state
  already ignores every error: under the engine's ``ignore_errors`` and nowhere else.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
import warnings

import numpy as np
import pytest

from autograd_tui import engine
from autograd_tui.engine import ops
from autograd_tui.engine.dtypes import result_type
from autograd_tui.engine.errstate import errors_ignored, ignore_errors
from autograd_tui.engine.ops.arith import _binary
from autograd_tui.engine.ops.shape import _clone
from autograd_tui.engine.strides import element_strides, elementwise_layout


def _layouts() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    base = rng.uniform(-2, 2, size=(3, 4))
    out = [
        base, base.T, base[:, ::2], base[::2], base[:1], base[:, :1], base[:1, :1],
        base.reshape(12), base.reshape(12)[::3], base[0], base[:, 0],
        base.reshape(1, 12), base.reshape(12, 1), base[:0], base.reshape(3, 1, 4),
        np.array(1.5), np.ones((2, 3), dtype=np.float32), np.arange(3.0)[::-1],
    ]
    # size-1 dimensions with strides NumPy calls C-contiguous but PyTorch would not set
    odd = np.lib.stride_tricks.as_strided(base, (1, 4), (96, 8))
    odd2 = np.lib.stride_tricks.as_strided(base, (4, 1), (8, 8))
    odd1 = np.lib.stride_tricks.as_strided(base, (1,), (16,))
    # every dimension order of shapes with size-1 dimensions: NumPy's output layout
    # then often differs from TensorIterator's, which the fast path must notice
    for shape in ((2, 3, 1), (1, 2, 2), (1, 2, 3), (3, 1, 3), (1, 3), (3, 2, 2), (1, 1, 3)):
        for perm in itertools.permutations(range(len(shape))):
            dense = np.arange(float(np.prod(shape))).reshape([shape[d] for d in perm])
            out.append(np.transpose(dense, np.argsort(perm)))
    return out + [odd, odd2, odd1]


@pytest.mark.parametrize("np_fn", [np.add, np.multiply, np.subtract, np.divide])
def test_binary_fast_path_gives_the_slow_paths_array(np_fn: object) -> None:
    arrays = _layouts()
    scalars: list[object] = [0.5, 2, True, np.float32(3.0)]
    cases = [(a, b) for a, b in itertools.product(arrays, arrays + scalars)]
    checked = 0
    for quiet in (False, True):
        with engine.no_grad(), (ignore_errors() if quiet else warnings.catch_warnings()):
            for a, b in cases:
                try:
                    np.broadcast_shapes(np.shape(a), np.shape(b))
                except ValueError:
                    continue
                ta = engine.Tensor(a)
                tb = engine.Tensor(b) if isinstance(b, np.ndarray) else b
                got = _binary(ta, tb, np_fn, ops.AddBackward0).data
                # the slow path: NumPy's function of the operands in PyTorch's result type
                dt = result_type(ta, tb)
                a2 = a.astype(dt)
                b2 = b.astype(dt) if isinstance(b, np.ndarray) else np.asarray(b).item()
                with np.errstate(all="ignore"):
                    raw = np_fn(a2, b2)  # type: ignore[operator]
                want = elementwise_layout(raw, a, b)
                assert type(got) is type(want)
                assert got.dtype == want.dtype and got.shape == want.shape
                assert element_strides(got) == element_strides(want), (a.strides, b)
                np.testing.assert_array_equal(got, want)
                checked += 1
    assert checked > 2000


def test_errors_ignored_only_under_ignore_errors() -> None:
    assert not errors_ignored()
    with np.errstate(all="ignore"):
        assert not errors_ignored()  # not ours: the ops enter their own errstate
    with ignore_errors():
        assert errors_ignored()
        with np.errstate(all="raise"):
            assert not errors_ignored()
            with pytest.raises(FloatingPointError):
                np.divide(np.ones(2), np.zeros(2))
            # the op ignores errors all the same
            t = ops.div(engine.tensor([1.0, -1.0]), engine.tensor([0.0, 0.0]))
            assert np.isinf(t.data).all()
        with ignore_errors():
            assert errors_ignored()
        assert errors_ignored()
        seen: list[bool] = []
        th = threading.Thread(target=lambda: seen.append(errors_ignored()))
        th.start()
        th.join()
        assert seen == [False]  # another thread has its own error state
    assert not errors_ignored()


def test_ignore_errors_keeps_the_base_state_and_restores_it() -> None:
    """``ignore_errors`` enters a cached all-ignore state made from the current one: the
    base's buffer size kept, every error ignored, the base itself current again after."""

    def check() -> None:
        np.setbufsize(16384)
        with np.errstate(over="raise", divide="raise"):
            before = np.geterr()
            for _ in range(2):  # the second time from the cache
                with ignore_errors():
                    assert errors_ignored() and np.getbufsize() == 16384
                    assert set(np.geterr().values()) == {"ignore"}
                    np.divide(np.ones(2), np.zeros(2))  # would raise outside
                    with ignore_errors():
                        assert errors_ignored()
                    assert errors_ignored()
                assert np.geterr() == before and not errors_ignored()
            with pytest.raises(FloatingPointError):
                np.divide(np.ones(2), np.zeros(2))

    contextvars.copy_context().run(check)  # np.setbufsize stays in that context
    assert np.getbufsize() != 16384


def test_node_with_its_own_errstate_inside_backward() -> None:
    """A custom backward that asks NumPy to raise still gets silent ops, as before."""

    class F(engine.Function):
        @staticmethod
        def forward(ctx: object, x: engine.Tensor) -> engine.Tensor:
            return x * 1.0

        @staticmethod
        def backward(ctx: object, g: engine.Tensor) -> engine.Tensor:
            with np.errstate(all="raise"):
                return g / engine.tensor([0.0, 0.0])

    x = engine.tensor([1.0, 2.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.apply(x).sum().backward()
    assert np.isinf(x.grad.data).all()


@pytest.mark.parametrize("contiguous", [False, True])
def test_clone_fast_path_gives_the_slow_paths_array(contiguous: bool) -> None:
    from autograd_tui.engine.strides import (
        infer_dense_strides,
        is_non_overlapping_and_dense,
        restride,
    )

    for a in _layouts():
        got = _clone(engine.Tensor(a), contiguous).data
        st = element_strides(a)
        strides = (None if contiguous else st if is_non_overlapping_and_dense(a.shape, st)
                   else infer_dense_strides(a.shape, st))
        want = restride(np.array(a, copy=True), strides)
        assert element_strides(got) == element_strides(want), a.strides
        np.testing.assert_array_equal(got, want)
        assert not np.shares_memory(got, a)
