"""Device arrays stay on the device: every op and every scenario, with a stand-in GPU.

Without a GPU, ``cuda:N`` is simulated with NumPy arrays, so nothing would notice
an op that copies a CuPy array to the host (``np.asarray``) or makes a new one
there (``np.zeros``).  Here ``device.simulated_module`` gives every device a
stand-in array module with CuPy's interface (``ndarray``, ``asarray``,
``asnumpy``, ``get_array_module`` and the NumPy functions the engine calls)
whose arrays, ``DeviceArray``, behave as CuPy's do where it matters:

- not an ``np.ndarray``: the engine takes its CuPy paths (no stride bookkeeping);
- ``__array__`` raises, as CuPy's does ("Implicit conversion to a NumPy array is
  not allowed"): ``np.asarray``, ``np.array`` and NumPy functions without a
  ufunc refuse it;
- NumPy's ufuncs (``np.add``, ``np.exp``, ...) and operators take it and give
  ``DeviceArray`` (``__array_ufunc__``, which CuPy has too); a host array mixed
  into one is refused, as CuPy refuses it.

Every Tensor the engine makes while a case runs (outputs, gradients, the sums in
input buffers, zeros for undefined gradients) is recorded: its data must be a
``DeviceArray``, and the values must equal the NumPy run's.  Where CuPy finds a
GPU, the same cases run with CuPy as the module (else they skip and say why).

The ``torch-*`` scenarios are left out: their tensors are PyTorch's, run by
PyTorch's autograd through the bridge; no array of ours is involved.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from numpy.lib.mixins import NDArrayOperatorsMixin

from autograd_tui import engine, scenarios
from autograd_tui.control import Controller
from autograd_tui.engine import device as dev
from autograd_tui.engine import ops
from autograd_tui.engine.graph import Node
from autograd_tui.engine.ops.base import OpNode
from autograd_tui.engine.ops.table import OPS, OpRow
from autograd_tui.engine.tensor import Tensor

pytestmark = pytest.mark.timeout(300)


# --- the stand-in device ---------------------------------------------------------------
class HostArrayError(TypeError):
    pass


class DeviceArray(NDArrayOperatorsMixin):
    """An array 'on the device': a NumPy array inside, refusing to be converted."""

    __slots__ = ("_a",)

    def __init__(self, a: np.ndarray) -> None:
        assert type(a) is np.ndarray
        self._a = a

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise HostArrayError("Implicit conversion to a NumPy array is not allowed "
                             "(a stand-in device array; use asnumpy)")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if "out" in kwargs:
            kwargs["out"] = tuple(_inner(o) for o in kwargs["out"])
        return _outer(getattr(ufunc, method)(*[_inner(x) for x in inputs], **kwargs))

    # the ndarray attributes and methods the engine and the scenarios use (CuPy has them)
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    itemsize = property(lambda self: self._a.itemsize)
    T = property(lambda self: DeviceArray(self._a.T))

    def reshape(self, *shape: Any) -> DeviceArray:
        return DeviceArray(self._a.reshape(*shape))

    def astype(self, dtype: Any) -> DeviceArray:
        return DeviceArray(self._a.astype(dtype))

    def copy(self) -> DeviceArray:
        return DeviceArray(self._a.copy())

    def sum(self, **kwargs: Any) -> DeviceArray:
        return _outer(self._a.sum(**kwargs))

    def mean(self, **kwargs: Any) -> DeviceArray:
        return _outer(self._a.mean(**kwargs))

    def any(self) -> DeviceArray:
        return _outer(self._a.any())

    def max(self, **kwargs: Any) -> DeviceArray:
        return _outer(self._a.max(**kwargs))

    def dot(self, other: DeviceArray) -> DeviceArray:
        return _outer(self._a.dot(_inner(other)))

    def __getitem__(self, key: Any) -> DeviceArray:
        return _outer(self._a[_inner(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        self._a[_inner(key)] = _inner(value)

    def __bool__(self) -> bool:  # a scalar to the host, as CuPy does
        return bool(self._a)

    def __len__(self) -> int:
        return len(self._a)

    def __repr__(self) -> str:
        return f"DeviceArray({self._a!r})"


def _inner(x: Any) -> Any:
    if isinstance(x, DeviceArray):
        return x._a
    if isinstance(x, (tuple, list)):  # an index, a list of arrays (CuPy takes its own)
        return type(x)(_inner(v) for v in x)
    if isinstance(x, np.ndarray):
        raise HostArrayError(f"a host array in a device operation: {type(x).__name__}")
    return x


def _outer(x: Any) -> Any:
    if isinstance(x, (np.ndarray, np.generic)):  # CuPy gives 0-dim arrays, not scalars
        return DeviceArray(np.asarray(x))
    if isinstance(x, tuple):
        return tuple(_outer(v) for v in x)
    return x


class StandIn:
    """The stand-in's array module, after ``cupy``: only explicit transfers touch the host
    (and are counted: ``to_device``, ``to_host``)."""

    ndarray = DeviceArray

    def __init__(self) -> None:
        self.to_device = self.to_host = 0

    def asarray(self, x: Any, dtype: Any = None) -> DeviceArray:
        if isinstance(x, DeviceArray):
            return x if dtype is None else x.astype(dtype)
        self.to_device += 1
        return DeviceArray(np.array(x, dtype=dtype))

    def array(self, x: Any, dtype: Any = None) -> DeviceArray:
        if isinstance(x, DeviceArray):
            return DeviceArray(np.array(x._a, dtype=dtype))
        return self.asarray(x, dtype)

    def asnumpy(self, x: Any) -> np.ndarray:
        self.to_host += 1
        return x._a.copy() if isinstance(x, DeviceArray) else np.asarray(x)

    def get_array_module(self, *args: Any) -> Any:
        return self if any(isinstance(a, DeviceArray) for a in args) else np

    def __getattr__(self, name: str) -> Callable[..., Any]:
        """Any other NumPy function (``zeros``, ``where``, ``broadcast_to``, ...): device
        arrays in, device arrays out; a host array argument is refused."""
        fn = getattr(np, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return _outer(fn(*[_inner(a) for a in args],
                             **{k: _inner(v) for k, v in kwargs.items()}))

        return call


def _cupy_or_skip() -> Any:
    if not dev.gpu_available():
        pytest.skip("no GPU found by CuPy (or CuPy not installed): the CuPy run needs one")
    if dev.device_count() < 2:
        pytest.skip("the cases and multi-device use cuda:0 and cuda:1: CuPy found one GPU")
    import cupy  # type: ignore[import-not-found]

    return cupy


def _cupy_usable() -> bool:
    try:
        return dev.gpu_available() and dev.device_count() >= 2
    except Exception:  # noqa: BLE001 - a broken CUDA install: no CuPy run
        return False


# The CuPy run is parametrized only where it can run; elsewhere one test says why.
MODULES = ["stand-in", "cupy"] if _cupy_usable() else ["stand-in"]


def test_the_same_cases_run_on_cupy_where_gpus_are_found() -> None:
    """Where CuPy finds two GPUs, every op and scenario case above runs on it too."""
    if "cupy" not in MODULES:
        _cupy_or_skip()
    assert _cupy_or_skip() is not None


def _module(name: str) -> Any:
    return StandIn() if name == "stand-in" else _cupy_or_skip()


@contextmanager
def recording_tensors() -> Iterator[list[tuple[str, type]]]:
    """(device, array type) of every Tensor made meanwhile, on any thread."""
    made: list[tuple[str, type]] = []
    original = Tensor.__init__

    def spy(self: Tensor, data: Any, *args: Any, **kwargs: Any) -> None:
        original(self, data, *args, **kwargs)
        made.append((self.device, type(self.data)))

    Tensor.__init__ = spy  # type: ignore[method-assign]
    try:
        yield made
    finally:
        Tensor.__init__ = original  # type: ignore[method-assign]


def _host(x: Any) -> np.ndarray:
    return dev.to_numpy(x.data if isinstance(x, Tensor) else x)


def _assert_all_on_device(made: list[tuple[str, type]], xp: Any, what: str) -> None:
    assert made, f"{what}: no tensor was made"
    off = sorted({f"{d}: {t.__name__}" for d, t in made if not issubclass(t, xp.ndarray)})
    assert not off, f"{what}: tensors left the device: {off}"


def _assert_same(got: dict[str, Any], want: dict[str, Any], xp: Any, what: str) -> None:
    assert set(got) == set(want), what
    for key, w in want.items():
        g = got[key]
        if w is None:
            assert g is None, f"{what}: {key}"
            continue
        assert isinstance(g.data, xp.ndarray), f"{what}: {key} is {type(g.data).__name__}"
        assert g.device == w.device, f"{what}: {key}"
        # the stand-in computes with NumPy; a GPU's exp, log, sums may differ in the last bits
        rtol, atol = (1e-12, 1e-15) if xp.ndarray is DeviceArray else (1e-9, 1e-12)
        np.testing.assert_allclose(_host(g), _host(w), rtol=rtol, atol=atol,
                                   err_msg=f"{what}: {key}")


# --- every op, forward and backward (and backward of backward) ---------------------------
class Scale(engine.Function):
    """Two outputs; the second unused, so its gradient is materialised as zeros."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x * 2.0, x * 3.0

    @staticmethod
    def backward(ctx: Any, g0: Any, g1: Any) -> Any:
        return g0 * 2.0 + g1 * 3.0


def _case_table() -> dict[str, tuple[Callable[..., Any], tuple[tuple[int, ...], ...]]]:
    """name -> (function of leaves, leaf shapes).  Values stay in every op's domain."""
    f = engine.functional
    return {
        "add": (lambda a, b: a + b, ((2, 3), (2, 3))),
        "add-broadcast": (lambda a, b: a + b, ((2, 3), (3,))),
        "sub": (lambda a, b: a - b, ((2, 3), (1, 3))),
        "rsub": (lambda a: 1.5 - a, ((3,),)),
        "mul": (lambda a, b: a * b, ((2, 3), (2, 1))),
        "mul-scalar": (lambda a: a * 2.5, ((2, 3),)),
        "div": (lambda a, b: a / b, ((2, 3), (2, 3))),
        "rdiv": (lambda a: 2.0 / a, ((3,),)),
        "neg": (lambda a: -a, ((2,),)),
        "pow-scalar": (lambda a: a ** 3, ((2, 3),)),
        "pow-zero": (lambda a: a ** 0, ((3,),)),
        "pow-tensor": (lambda a, b: a ** b, ((2, 3), (2, 3))),
        "pow-zero-exponent": (lambda a, b: a ** (b * 0.0), ((3,), (3,))),
        "rpow": (lambda a: 2.0 ** a, ((3,),)),
        "rpow-zero": (lambda a: 0.0 ** a, ((3,),)),
        "exp": (lambda a: a.exp(), ((2, 3),)),
        "log": (lambda a: a.log(), ((2, 3),)),
        "reciprocal": (lambda a: a.reciprocal(), ((3,),)),
        "relu": (lambda a: (a - 1.0).relu(), ((2, 3),)),
        "sigmoid": (lambda a: a.sigmoid(), ((2, 3),)),
        "tanh": (lambda a: a.tanh(), ((2, 3),)),
        "sum": (lambda a: a.sum(), ((2, 3),)),
        "sum-dim": (lambda a: a.sum(1), ((2, 3),)),
        "sum-keepdim": (lambda a: a.sum(0, keepdim=True), ((2, 3),)),
        "mean": (lambda a: a.mean(), ((2, 3),)),
        "mean-dim": (lambda a: a.mean((0, 1)), ((2, 3),)),
        "mean-0d": (lambda a: a.mean(0), ((),)),
        "reshape": (lambda a: a.reshape(3, 2), ((2, 3),)),
        "reshape-transposed": (lambda a: a.t().reshape(-1), ((2, 3),)),
        "reshape-alias": (lambda a: a[:, 1:].reshape(2, 2, 1), ((2, 3),)),
        "expand": (lambda a: a.expand(2, 3), ((1, 3),)),
        "t": (lambda a: a.t(), ((2, 3),)),
        "clone": (lambda a: a.clone(), ((2, 3),)),
        "clone-transposed": (lambda a: a.t().clone(), ((2, 3),)),
        "to-device": (lambda a: a.to("cuda:1") * 2.0, ((3,),)),
        "to-cpu": (lambda a: a.to("cuda:0").exp().to("cpu"), ((3,),)),
        "to-dtype": (lambda a: a.to(np.float32) * 2.0, ((3,),)),
        "dot": (lambda a, b: a @ b, ((3,), (3,))),
        "mm": (lambda a, b: a @ b, ((2, 3), (3, 2))),
        "mv": (lambda a, b: a @ b, ((2, 3), (3,))),
        "vm": (lambda a, b: a @ b, ((2,), (2, 3))),
        "select": (lambda a: a[1], ((2, 3),)),
        "slice": (lambda a: a[:, 1:], ((2, 3),)),
        "select-slice": (lambda a: a[0, 1:], ((2, 3),)),
        # the gradient into select and slice requires grad: their double backward
        "select-squared": (lambda a: a[1] * a[1], ((2, 3),)),
        "slice-squared": (lambda a: a[:, 1:] * a[:, 1:], ((2, 3),)),
        "alias": (lambda a: a[:, :], ((2, 3),)),
        # the gradient into an index requires grad: IndexPutImplBackward0's backward
        "index-squared": (lambda a: a[a > 1.0] * a[a > 1.0], ((2, 3),)),
        "linear": (lambda x, w, b: f.linear(x, w, b), ((2, 3), (4, 3), (4,))),
        "linear-1d": (lambda x, w: f.linear(x, w), ((3,), (4, 3))),
        "function": (lambda a: Scale.apply(a)[0], ((2, 3),)),
        "compare": (lambda a, b: a * (a < b).to(np.float64) + (a >= b).to(np.float64),
                    ((3,), (3,))),
        # every row of the op table (ops.table.OPS), as the parity test runs it
        **{f"table-{row.name}": (functools.partial(_table_row, row), row.shapes)
           for row in OPS},
    }


def _table_row(row: OpRow, *leaves: Any) -> Any:
    return row.fn(engine, engine.functional, *leaves)


CASES = _case_table()


def _leaf_values(shapes: tuple[tuple[int, ...], ...], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.5, 1.5, size=s) for s in shapes]  # positive: log, pow, div


def run_case(name: str, device: str) -> dict[str, Any]:
    """Forward, backward with create_graph, then the backward of the gradients."""
    fn, shapes = CASES[name]
    leaves = [engine.tensor(v, requires_grad=True, device=device)
              for v in _leaf_values(shapes, len(name))]
    out = fn(*leaves)
    grads = engine.autograd.grad(out.sum() if out.ndim else out, leaves, create_graph=True,
                                 allow_unused=True)
    second = [g for g in grads if g is not None and g.requires_grad]
    total = None
    for g in second:
        total = g.sum() if total is None else total + g.sum()
    if total is not None:
        total.backward()
    result: dict[str, Any] = {"out": out.detach()}
    for i, (leaf, g) in enumerate(zip(leaves, grads)):
        result[f"grad{i}"] = None if g is None else g.detach()
        result[f"grad2_{i}"] = leaf.grad
    result["zeros"] = engine.zeros_like(out)
    result["ones"] = engine.ones_like(out)
    result["copy"] = engine.tensor(out.detach(), device=device)
    return result


def _node_classes() -> set[str]:
    return {v.__name__ for v in vars(ops).values()
            if isinstance(v, type) and issubclass(v, Node) and v not in (Node, OpNode)
            and v.__module__.startswith(ops.__name__)}


def test_the_cases_record_every_node_of_ops():
    """The table covers the module: every backward node the ``ops`` package defines is recorded,
    forward or in a double backward."""
    seen: set[str] = set()
    with engine.enable_grad():
        for name in CASES:
            fn, shapes = CASES[name]
            leaves = [engine.tensor(v, requires_grad=True)
                      for v in _leaf_values(shapes, len(name))]
            out = fn(*leaves)
            grads = engine.autograd.grad(out.sum() if out.ndim else out, leaves,
                                         create_graph=True, allow_unused=True)
            stack = [out.grad_fn] + [g.grad_fn for g in grads if g is not None]
            visited: set[int] = set()
            while stack:
                node = stack.pop()
                if node is None or id(node) in visited:
                    continue
                visited.add(id(node))
                seen.add(node.name())
                stack += [n for n, _ in node.next_functions]
    missing = _node_classes() - seen
    assert not missing, f"ops nodes no case records: {sorted(missing)}"


@pytest.mark.parametrize("module", MODULES)
@pytest.mark.parametrize("device", ["cpu", "cuda:1"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_op_keeps_device_arrays(name: str, device: str, module: str) -> None:
    xp = _module(module)
    want = run_case(name, device)
    with dev.simulated_module(xp):
        with recording_tensors() as made:
            got = run_case(name, device)
        _assert_all_on_device(made, xp, f"{name} on {device}")
        if isinstance(xp, StandIn):  # no observer, no summary: nothing went to the host
            assert xp.to_host == 0 and xp.to_device > 0
        _assert_same(got, want, xp, f"{name} on {device}")


def test_stand_in_refuses_the_host():
    """The stand-in catches what it is for: conversion, host functions, mixing."""
    xp = StandIn()
    a = xp.asarray(np.arange(3.0))
    for convert in (np.asarray, np.array, np.zeros_like, np.transpose):
        with pytest.raises(TypeError):
            convert(a)
    with pytest.raises(HostArrayError):
        np.add(a, np.ones(3))
    assert isinstance(np.exp(a) + 1.0, DeviceArray)
    with dev.simulated_module(xp):
        assert dev.array_module(a) is xp and dev.array_module(np.ones(2), 1.0) is np
        t = engine.tensor([1.0, 2.0], device="cuda:0")
        assert isinstance(t.data, DeviceArray)
        assert type(t.to("cpu").numpy()) is np.ndarray  # an explicit copy to the host
        assert "tensor([1., 2.]" in repr(t)  # a summary shown: allowed on the host
    assert dev.array_module(a) is np  # the hook is closed: plain NumPy again
    assert type(engine.tensor([1.0], device="cuda:0").data) is np.ndarray


# --- every scenario ----------------------------------------------------------------------
SCENARIOS = [s for s in scenarios.builtins() if "torch" not in s.requires]
LEFT_OUT = [s.name for s in scenarios.builtins(everything=True) if "torch" in s.requires]


def _run_scenario(scenario: scenarios.Scenario) -> tuple[Any, list[Any]]:
    ctl = Controller(engine.Engine(**scenario.engine), policy="random", seed=0)
    try:
        ctl.start(lambda: scenario.run(None))
        r = ctl.run()
    finally:
        assert ctl.close(), f"{scenario.name}: engine threads did not exit"
    return r, ctl.program_result


def test_torch_scenarios_are_the_ones_left_out():
    names = {s.name for s in SCENARIOS}
    assert names and not names & set(LEFT_OUT)
    assert all(n.startswith("torch-") for n in LEFT_OUT)


@pytest.mark.parametrize("module", MODULES)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario_keeps_device_arrays(scenario: scenarios.Scenario, module: str) -> None:
    before = threading.active_count()
    xp = _module(module)
    r_np, want = _run_scenario(scenario)
    with dev.simulated_module(xp):
        with recording_tensors() as made:
            r, got = _run_scenario(scenario)
        assert r.status == r_np.status, (r.status, r_np.status)
        _assert_all_on_device(made, xp, scenario.name)
        if scenario.expect == "complete":
            assert isinstance(got, dict) and got
            _assert_same(got, want, xp, scenario.name)
    assert threading.active_count() <= before


def test_device_names_are_checked_every_time() -> None:
    """``canonical`` keeps the names it validated: the same answers, and a bad name is an
    error every time it is asked."""
    for _ in range(2):
        assert dev.canonical("cuda") == "cuda:0"
        assert dev.canonical("cuda:1") == "cuda:1" and dev.canonical(None) == "cpu"
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            dev.canonical(f"cuda:{dev.device_count()}")
        with pytest.raises(RuntimeError, match="Expected one of cpu, cuda"):
            dev.canonical("tpu")
