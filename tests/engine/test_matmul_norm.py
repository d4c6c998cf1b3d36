"""Batched ``matmul``, ``norm`` for any p, and the nodes of double-backward graphs, against
PyTorch 2.13: values, gradients, backward node names (breadth first, as the op-table parity
test walks them), exception types and messages."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from test_ops_parity import _graph_names  # the one walk of a graph's node names

from autograd_tui import engine

torch = pytest.importorskip("torch", reason="PyTorch is not installed: these checks "
                                            "compare with it (pip install -e .[torch])")

pytestmark = pytest.mark.timeout(120)


def _np(t: Any) -> np.ndarray | None:
    if t is None:
        return None
    if isinstance(t, torch.Tensor):
        return t.detach().numpy(force=True)
    return t.detach().numpy()


def _same(ours: Any, theirs: Any) -> None:
    if theirs is None:
        assert ours is None
        return
    np.testing.assert_allclose(_np(ours), _np(theirs), rtol=1e-10, atol=1e-12)


# --- matmul ----------------------------------------------------------------------------
MATMUL_SHAPES = [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)), ((2, 3), (3, 4)),
    ((2, 3, 4), (4,)), ((3,), (2, 3, 4)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)),
    ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (2, 4, 5)),
    ((2, 3, 4), (1, 4, 5)), ((2, 1, 3, 4), (2, 4, 5)), ((1, 1, 3, 4), (2, 2, 4, 5)),
    ((3,), (4, 1, 3, 2)), ((2, 1, 3, 4), (4,)), ((4,), (2, 2, 4, 3)), ((2, 3, 4), (4, 1)),
]
GRAD_MODES = [(True, True), (True, False), (False, True)]


@pytest.mark.parametrize("needs", GRAD_MODES, ids=["both", "left", "right"])
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=[f"{a}@{b}" for a, b in MATMUL_SHAPES])
def test_matmul_matches_pytorch(shapes: tuple[tuple[int, ...], ...],
                                needs: tuple[bool, bool]) -> None:
    rng = np.random.default_rng(len(shapes[0]) * 10 + len(shapes[1]))
    values = [rng.uniform(-1, 1, size=s) for s in shapes]
    results = []
    for m in (engine, torch):
        a, b = (m.tensor(v, requires_grad=r) for v, r in zip(values, needs, strict=True))
        out = m.matmul(a, b)
        leaves = [x for x in (a, b) if x.requires_grad]
        grads = m.autograd.grad((out * out).sum(), leaves)
        results.append((out, _graph_names(out), grads))
    (o, names, grads), (to, tnames, tgrads) = results
    assert tuple(o.shape) == tuple(to.shape)
    _same(o, to)
    assert names == tnames
    for g, tg in zip(grads, tgrads, strict=True):
        _same(g, tg)


def test_matmul_of_a_transposed_batch_without_grad_is_not_folded() -> None:
    """``should_fold`` looks at the strides when the smaller operand needs no gradient."""
    v = np.arange(24.0).reshape(2, 4, 3)
    w = np.arange(15.0).reshape(3, 5)
    names = []
    for m in (engine, torch):
        a = m.tensor(v, requires_grad=True).transpose(0, 1)  # (4, 2, 3), batch not contiguous
        out = a @ m.tensor(w)
        names.append(_graph_names(out))
        _same(out, torch.tensor(v).transpose(0, 1) @ torch.tensor(w))
    assert names[0] == names[1]


MATMUL_ERRORS = [((2, 3, 4), (3,)), ((2, 3, 4), (3, 5)), ((2, 3, 4), (2, 3, 5)),
                 ((2, 3, 4), (3, 4, 5)), ((3, 4), (2, 3, 5)), ((4,), (2, 3, 5)), ((), (3,))]


@pytest.mark.parametrize("shapes", MATMUL_ERRORS, ids=[f"{a}@{b}" for a, b in MATMUL_ERRORS])
def test_matmul_errors_match_pytorch(shapes: tuple[tuple[int, ...], ...]) -> None:
    messages = []
    for m in (engine, torch):
        a, b = (m.tensor(np.ones(s), requires_grad=True) for s in shapes)
        with pytest.raises(RuntimeError) as info:
            m.matmul(a, b)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


# --- norm ------------------------------------------------------------------------------
PS = [2, 1, 3, 0.5, 1.5, 2.5, 0, math.inf, -math.inf, -1, -2, "fro"]
DIMS = [(None, False), (1, False), (0, True), ((0, 1), False), (-1, True)]
INPUTS = {"mixed": np.array([[0.5, -1.2, 0.0], [2.0, 0.7, -0.3]]),
          "zeros": np.zeros((2, 3)),
          "ties": np.array([[1.0, -2.0, 2.0], [-1.0, 0.5, 1.0]])}


@pytest.mark.parametrize("values", sorted(INPUTS))
@pytest.mark.parametrize("dim", DIMS, ids=[f"dim={d},keepdim={k}" for d, k in DIMS])
@pytest.mark.parametrize("p", PS, ids=[str(p) for p in PS])
def test_norm_matches_pytorch(p: Any, dim: tuple[Any, bool], values: str) -> None:
    d, keepdim = dim
    results = []
    for m in (engine, torch):
        x = m.tensor(INPUTS[values], requires_grad=True)
        y = x.norm(p) if d is None else x.norm(p, dim=d, keepdim=keepdim)
        try:
            (g,) = m.autograd.grad(y.sum(), [x])
        except RuntimeError as e:  # p = 0: an undefined gradient, as in PyTorch
            g = str(e)
        results.append((y, y.grad_fn.name(), g))
    (y, name, g), (ty, tname, tg) = results
    assert tuple(y.shape) == tuple(ty.shape) and name == tname
    _same(y, ty)
    if isinstance(tg, str):
        assert g == tg
    else:
        _same(g, tg)


def test_torch_norm_function_with_dims_and_float32() -> None:
    v = np.random.default_rng(3).uniform(-1, 1, size=(2, 3, 4)).astype(np.float32)
    outs = []
    for m in (engine, torch):
        x = m.tensor(v, requires_grad=True)
        y = m.norm(x, 3.5, dim=(0, 2), keepdim=True)
        (g,) = m.autograd.grad(y.sum(), [x])
        outs.append((y, g))
        assert str(y.dtype).removeprefix("torch.") == "float32"
    np.testing.assert_allclose(_np(outs[0][0]), _np(outs[1][0]), rtol=1e-5)
    np.testing.assert_allclose(_np(outs[0][1]), _np(outs[1][1]), rtol=1e-5, atol=1e-6)


# --- double backward: the nodes of a create_graph=True gradient -------------------------
def _functional(m: Any) -> Any:
    return engine.functional if m is engine else torch.nn.functional


DOUBLE: dict[str, Callable[[Any, Any, Any], Any]] = {
    "exp": lambda m, x, y: x.exp(),
    "mul": lambda m, x, y: x * y,
    "relu": lambda m, x, y: (x - 1.0).relu(),
    "sigmoid": lambda m, x, y: x.sigmoid(),
    "tanh": lambda m, x, y: x.tanh(),
    "pow": lambda m, x, y: x ** 3,
    "square": lambda m, x, y: x.square(),
    "rpow": lambda m, x, y: 2.0 ** x,
    "sqrt": lambda m, x, y: x.sqrt(),
    "pow-tensor": lambda m, x, y: x ** y,
    "clamp": lambda m, x, y: x.clamp(0.8, 1.2) * x + x.clamp(min=1.0) * y,
    "reciprocal": lambda m, x, y: x.reciprocal(),
    "abs": lambda m, x, y: (x - 1.0).abs(),
    "log": lambda m, x, y: x.log(),
    "div": lambda m, x, y: x / y,
    "sin": lambda m, x, y: x.sin(),
    "max": lambda m, x, y: x.max() * x + x.min() * y,
    "broadcast-mul": lambda m, x, y: x.sum() * y + x * y[0],
    "matmul": lambda m, x, y: x @ y.t(),
    "matmul-batched": lambda m, x, y: x.reshape(1, 2, 3) @ y.reshape(1, 3, 2),
    "norm": lambda m, x, y: x.norm(3),
    "softmax": lambda m, x, y: x.softmax(1) * y,
    "log_softmax": lambda m, x, y: x.log_softmax(0) * y,
    "mse_loss": lambda m, x, y: _functional(m).mse_loss(x, y),
    "mse_loss-sum": lambda m, x, y: _functional(m).mse_loss(x, y, reduction="sum"),
    "mse_loss-none": lambda m, x, y: _functional(m).mse_loss(x * 2.0, y, reduction="none"),
    "norm-dims": lambda m, x, y: x.norm(1.5, dim=1) + x.norm(0.5, dim=(0, 1))
    + x.norm(1, dim=0).sum() + x.norm(float("inf"), dim=1),
}


@pytest.mark.parametrize("op", sorted(DOUBLE))
def test_double_backward_nodes_match_pytorch(op: str) -> None:
    rng = np.random.default_rng(7)
    vx, vy = rng.uniform(0.5, 1.5, size=(2, 3)), rng.uniform(0.5, 1.5, size=(2, 3))
    results = []
    for m in (engine, torch):
        x, y = m.tensor(vx, requires_grad=True), m.tensor(vy, requires_grad=True)
        gx, gy = m.autograd.grad(DOUBLE[op](m, x, y).sum(), [x, y], create_graph=True,
                                 allow_unused=True)
        names = _graph_names(gx)
        hx, hy = m.autograd.grad((gx * gx).sum(), [x, y], allow_unused=True)
        results.append((names, hx, hy))
    (names, hx, hy), (tnames, thx, thy) = results
    assert names == tnames
    _same(hx, thx)
    if thy is None or hy is None:  # PyTorch may give an explicit zero where we give None
        assert thy is None or not _np(thy).any()
        assert hy is None or not _np(hy).any()
    else:
        _same(hy, thy)
