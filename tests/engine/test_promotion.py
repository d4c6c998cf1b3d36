"""PyTorch's type promotion and default dtype, against torch 2.13: every pair of dtypes
among bool, int64, float16, float32, float64, each operand a dimensioned tensor, a 0-dim
tensor or a Python scalar, across the binary operators (result dtype and values, or the
exception's type and message), with both defaults at float64 and again at float32; the
in-place ops' result-type check; ``where``, ``maximum``/``minimum``, ``cat``/``stack``;
the gradients' dtypes through mixed-dtype ops; ``set_default_dtype``'s errors."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from autograd_tui import engine

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the parity checks "
                                            "compare with it (pip install -e .[torch])")

pytestmark = pytest.mark.timeout(120)

DTYPES = ["bool", "int64", "float16", "float32", "float64"]
# values exact in every dtype, so that a difference is a dtype's, not a rounding's
VALUES = {"bool": [True, False, True], "int64": [3, 1, 2], "float16": [1.5, -2.0, 0.25],
          "float32": [1.5, -2.0, 0.25], "float64": [1.5, -2.0, 0.25]}
ZERO_DIM = {"bool": True, "int64": 2, "float16": 0.5, "float32": 0.5, "float64": 0.5}
SCALARS = {"bool": True, "int": 2, "float": 2.5}

OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge, "**": operator.pow,
}

Operand = tuple[str, str]  # (kind: "tensor" | "0-dim" | "scalar", dtype or scalar type)
OPERANDS: list[Operand] = ([("tensor", d) for d in DTYPES] + [("0-dim", d) for d in DTYPES]
                           + [("scalar", s) for s in SCALARS])


@pytest.fixture(params=["float64", "float32"])
def default(request: pytest.FixtureRequest) -> Iterator[str]:
    """Both libraries' default dtype set to the parameter; restored afterwards."""
    before_e, before_t = engine.get_default_dtype(), torch.get_default_dtype()
    engine.set_default_dtype(getattr(engine, request.param))
    torch.set_default_dtype(getattr(torch, request.param))
    yield request.param
    engine.set_default_dtype(before_e)
    torch.set_default_dtype(before_t)


def _make(lib: Any, operand: Operand) -> Any:
    kind, name = operand
    if kind == "scalar":
        return SCALARS[name]
    data = VALUES[name] if kind == "tensor" else ZERO_DIM[name]
    return lib.tensor(data, dtype=getattr(lib, name))


def _run(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001 - the exception is what is compared
        return "error", (type(e).__name__, str(e))


def _dtype_name(t: Any) -> str:
    if isinstance(t, torch.Tensor):
        return str(t.dtype).removeprefix("torch.")
    return np.dtype(t.dtype).name


def _same(got: tuple[str, Any], want: tuple[str, Any], case: str, ulps: int = 0) -> None:
    """Same outcome: the same exception (type and message), or the same dtype, shape and
    values (equal, or within ``ulps`` units in the last place of a float dtype)."""
    assert got[0] == want[0], f"{case}: engine {got}, torch {want}"
    if got[0] == "error":
        assert got[1] == want[1], case
        return
    g, w = got[1], want[1]
    assert _dtype_name(g) == _dtype_name(w), case
    assert tuple(g.shape) == tuple(w.shape), case
    gv, wv = g.detach().numpy(), w.detach().numpy()
    if ulps and gv.dtype.kind == "f":
        np.testing.assert_allclose(gv, wv, rtol=ulps * float(np.finfo(gv.dtype).eps),
                                   err_msg=case)
    else:
        np.testing.assert_array_equal(gv, wv, err_msg=case)


@pytest.mark.parametrize("op", list(OPS))
def test_binary_ops_promote_as_torch(op: str, default: str) -> None:
    fn = OPS[op]
    compared = 0
    for a, b in itertools.product(OPERANDS, OPERANDS):
        if a[0] == "scalar" and b[0] == "scalar":
            continue  # Python's own arithmetic
        case = f"{a} {op} {b} (default {default})"
        got = _run(lambda a=a, b=b: fn(_make(engine, a), _make(engine, b)))
        want = _run(lambda a=a, b=b: fn(_make(torch, a), _make(torch, b)))
        # pow's float results come from NumPy's libm and ATen's, which may differ by 1 ulp
        _same(got, want, case, ulps=2 if op == "**" else 0)
        compared += 1
    assert compared == 13 * 13 - 9


@pytest.mark.parametrize("method", ["add_", "sub_", "mul_", "div_", "__iadd__", "__isub__",
                                    "__imul__", "__itruediv__"])
def test_inplace_result_type_check(method: str, default: str) -> None:
    """``canCast``: an in-place op refuses a result of a higher category than its tensor."""
    for a, b in itertools.product([o for o in OPERANDS if o[0] == "tensor"], OPERANDS):
        case = f"{a}.{method}({b})"
        got = _run(lambda a=a, b=b: getattr(_make(engine, a), method)(_make(engine, b)))
        want = _run(lambda a=a, b=b: getattr(_make(torch, a), method)(_make(torch, b)))
        _same(got, want, case)


def test_where_maximum_minimum_cat_stack(default: str) -> None:
    tensors = [o for o in OPERANDS if o[0] != "scalar"]
    for a, b in itertools.product(tensors, OPERANDS):
        for name, fn in [
            ("where", lambda lib, x, y: lib.where(lib.tensor([True, False, True]), x, y)),
            ("where-r", lambda lib, x, y: lib.where(lib.tensor([True, False, True]), y, x)),
            ("maximum", lambda lib, x, y: lib.maximum(x, y)),
            ("minimum", lambda lib, x, y: lib.minimum(x, y)),
        ]:
            if name in ("maximum", "minimum") and b[0] == "scalar":
                continue  # torch.maximum takes tensors only
            got = _run(lambda fn=fn, a=a, b=b: fn(engine, _make(engine, a), _make(engine, b)))
            want = _run(lambda fn=fn, a=a, b=b: fn(torch, _make(torch, a), _make(torch, b)))
            _same(got, want, f"{name}({a}, {b})")
    for a, b in itertools.product(DTYPES, DTYPES):
        for name in ("cat", "stack"):
            got = getattr(engine, name)([_make(engine, ("tensor", a)),
                                         _make(engine, ("tensor", b))])
            want = getattr(torch, name)([_make(torch, ("tensor", a)),
                                         _make(torch, ("tensor", b))])
            _same(("ok", got), ("ok", want), f"{name}({a}, {b})")


FLOATS = ["float16", "float32", "float64"]


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "**"])
def test_gradients_keep_each_inputs_dtype(op: str, default: str) -> None:
    """Backward through a mixed-dtype op: each input's grad has torch's dtype and values."""
    fn = OPS[op]
    kinds = [("tensor", d) for d in FLOATS] + [("0-dim", d) for d in FLOATS]
    for a, b in itertools.product(kinds + [("tensor", "int64")], kinds + [("scalar", "int"),
                                                                       ("scalar", "float")]):
        if a[1] == "int64" and b[0] == "scalar":
            continue  # nothing requires grad
        results = []
        for lib in (engine, torch):
            x, y = _make(lib, a), _make(lib, b)
            leaves = [t for t in (x, y) if isinstance(t, lib.Tensor) and t.dtype != lib.int64]
            for t in leaves:
                t.requires_grad_(True)
            out = fn(x, y)
            out.sum().backward()
            results.append([(_dtype_name(t.grad), t.grad.numpy()) for t in leaves])
        case = f"{a} {op} {b} (default {default})"
        for (gd, gv), (wd, wv) in zip(*results, strict=True):
            assert gd == wd, case
            np.testing.assert_allclose(gv.astype(np.float64), wv.astype(np.float64),
                                       rtol=1e-3 if "float16" in (a[1], b[1]) else 1e-6,
                                       err_msg=case)


def test_default_dtype_api_matches_torch() -> None:
    assert engine.get_default_dtype() == engine.float64  # the engine's documented default
    for bad in ("int64", "bool", "int32"):
        got = _run(lambda bad=bad: engine.set_default_dtype(getattr(engine, bad)))
        want = _run(lambda bad=bad: torch.set_default_dtype(getattr(torch, bad)))
        assert got == want
    for bad in (None, "float32", 5):
        got = _run(lambda bad=bad: engine.set_default_dtype(bad))
        want = _run(lambda bad=bad: torch.set_default_dtype(bad))
        assert got == want
    assert engine.get_default_dtype() == engine.float64  # unchanged by a refusal


def test_tensor_and_factories_use_the_default_dtype(default: str) -> None:
    makers: list[Callable[[Any], Any]] = [
        lambda lib: lib.tensor([1.5, 2.0]), lambda lib: lib.tensor(1.5),
        lambda lib: lib.tensor([1, 2]), lambda lib: lib.tensor([True]),
        lambda lib: lib.tensor([1, 2.5]), lambda lib: lib.zeros(2), lambda lib: lib.ones(2, 3),
        lambda lib: lib.randn(2), lambda lib: lib.rand(2), lambda lib: lib.eye(2),
        lambda lib: lib.arange(3), lambda lib: lib.arange(0, 1, 0.25),
        lambda lib: lib.tensor([1, 2]) / 2, lambda lib: lib.tensor([1, 2]) * 2.5,
        lambda lib: 1 / lib.tensor([1, 2]), lambda lib: lib.tensor([1, 2]).reciprocal(),
    ]
    for i, make in enumerate(makers):
        assert _dtype_name(make(engine)) == _dtype_name(make(torch)), (i, default)


def test_float16_rounds_as_atens_cpu_kernels(default: str) -> None:
    """Values not exact in float16: ATen computes in float32 on operands rounded to
    float16, except that ``mul`` and ``div`` read a scalar second operand unrounded."""
    compared = 0
    for (op, fn), s, zero_dim, reflected in itertools.product(
            OPS.items(), [0.1, 1 / 3, 3.3, -0.7, 1e-3, 7], (False, True), (False, True)):
        def run(lib: Any, fn: Any = fn, s: float = s, zero_dim: bool = zero_dim,
                reflected: bool = reflected) -> Any:
            t = lib.tensor([0.1, 1 / 3, 1.7], dtype=lib.float16)
            other = lib.tensor(s, dtype=lib.float64) if zero_dim else s
            return fn(other, t) if reflected else fn(t, other)

        case = f"{op} {s} 0-dim={zero_dim} reflected={reflected} (default {default})"
        _same(_run(lambda: run(engine)), _run(lambda: run(torch)), case,
              ulps=2 if op == "**" else 0)
        compared += 1
    assert compared == len(OPS) * 24
