"""Nodes share the immutable tuples a backward pass reads per node, and still behave alike.

- ``graph.input_metadata_of``: nodes whose inputs have equal (shape, dtype, device) hold
  one ``InputMetadata``; only plain values are shared (an ``np.int64`` size, an unhashable
  dtype keep their own), and the cache stays bounded;
- ``OpNode._saved_versions``: one tuple for the nodes that saved alike; a tensor modified
  in place after it was saved is still refused by the node that saved it, and only by it.
"""

from __future__ import annotations

import numpy as np
import pytest
from semantics_helpers import restore_modes  # noqa: F401 - autouse: grad and anomaly mode reset

from autograd_tui import engine
from autograd_tui.engine import graph
from autograd_tui.engine.graph import InputMetadata, input_metadata_of

pytestmark = pytest.mark.timeout(60)


def _leaf(*values: float) -> engine.Tensor:
    return engine.tensor(list(values), requires_grad=True)


def test_equal_input_metadata_is_one_tuple() -> None:
    a, b = _leaf(1.0, 2.0), _leaf(3.0, 4.0)
    c = _leaf(1.0, 2.0, 3.0)
    n1, n2, n3 = (a * b).grad_fn, (b + a).grad_fn, (c * c).grad_fn
    assert n1._input_metadata[0] is n2._input_metadata[0]
    assert n1._input_metadata[0] == InputMetadata((2,), np.dtype(np.float64), "cpu")
    assert n3._input_metadata[0] is not n1._input_metadata[0]
    assert n3._input_metadata[0].shape == (3,)
    # each leaf's AccumulateGrad too
    assert a.grad_fn is None
    assert (n1.next_functions[0][0]._input_metadata[0]
            is n1.next_functions[1][0]._input_metadata[0])


def test_only_plain_metadata_is_shared() -> None:
    f64 = np.dtype(np.float64)
    plain = input_metadata_of((2,), f64, "cpu")
    numpy_size = input_metadata_of((np.int64(2),), f64, "cpu")
    assert numpy_size == plain and numpy_size is not plain
    assert type(numpy_size.shape[0]) is np.int64  # kept as given, as before
    assert input_metadata_of([2], f64, "cpu") is plain  # a list of ints is a tuple of them

    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

    odd = Unhashable()
    meta = input_metadata_of((2,), odd, "cpu")
    assert meta.dtype is odd and meta.shape == (2,)


def test_metadata_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graph, "_INTERN_MAX", 8)
    monkeypatch.setattr(graph, "_interned_metadata", {})
    metas = [input_metadata_of((n,), np.dtype(np.float32), "cpu") for n in range(20)]
    assert len(graph._interned_metadata) <= 8
    assert [m.shape for m in metas] == [(n,) for n in range(20)]
    assert input_metadata_of((19,), np.dtype(np.float32), "cpu") is metas[-1]


def test_saved_versions_shared_and_checked_per_node() -> None:
    a, b = _leaf(1.0, 2.0), _leaf(3.0, 4.0)
    u, w = a * 1.0, b * 1.0  # non-leaves: they may be modified in place
    y1, y2 = u * w, (a * 1.0) * (b * 1.0)
    assert y1.grad_fn._saved_versions is y2.grad_fn._saved_versions
    u.add_(1.0)  # after y1's node saved it
    y2.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 4.0])
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y1.sum().backward()
    # the shared tuple is unchanged: the version check compares the tensor's counter
    assert y2.grad_fn._saved_versions == (("self", 0, False), ("other", 0, False))


def _layouts() -> list[np.ndarray]:
    base = np.arange(24.0).reshape(2, 3, 4)
    return [np.array([1.5, -2.0]), np.array(3.0), base, base.astype(np.float32),
            base.transpose(2, 0, 1), base[:, ::2], np.asfortranarray(base[0])]


@pytest.mark.parametrize("data", _layouts(), ids=lambda a: f"{a.dtype}{a.shape}{a.strides}")
def test_first_leaf_gradient_copy_is_clones(data: np.ndarray) -> None:
    """AccumulateGrad's first gradient, without grad mode: ``graph._copy_of`` gives what
    ``detach().clone()`` gives (values, dtype, strides, Tensor fields), never an alias."""
    from autograd_tui.engine.tensor import Tensor

    g = Tensor(data)
    with engine.no_grad():
        got, want = graph._copy_of(g), g.detach().clone()
    assert type(got) is type(want) is Tensor and type(got.data) is np.ndarray
    assert got.data.dtype == want.data.dtype and got.data.strides == want.data.strides
    np.testing.assert_array_equal(got.data, want.data)
    assert not np.shares_memory(got.data, data)
    for field in ("device", "grad_fn", "output_nr", "_grad", "_grad_accumulator",
                  "_backward_hooks", "_retains_grad", "_requires_grad", "_version_counter"):
        assert getattr(got, field) == getattr(want, field), field
    # through the engine: the leaf's .grad is a copy of the incoming gradient
    leaf = engine.tensor(np.ones_like(data), requires_grad=True)
    seed = engine.tensor(data)
    leaf.backward(seed)
    assert leaf.grad is not seed and not np.shares_memory(leaf.grad.data, seed.data)
    assert leaf.grad.data.strides == want.data.strides
    np.testing.assert_array_equal(leaf.grad.data, data)
