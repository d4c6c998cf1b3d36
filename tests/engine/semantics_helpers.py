"""Autograd semantics checked against PyTorch itself: the helpers of test_semantics_*.py.

Each scenario is a function of the library module (``engine`` or ``torch``,
torch tensors in float64).  ``same(scenario)`` runs it with both libraries and
asserts the same outcome: the same values (tensors compared with NumPy), or
the same exception type and message.  The expected values and messages thus
come from the installed torch, not from constants in the tests.

A test module imports what it uses from here, and ``restore_modes`` (an autouse
fixture, so importing it is enough).  Without torch installed, importing this module
skips the test module that imports it.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from autograd_tui import engine

torch = pytest.importorskip("torch")

LIBS = (engine, torch)


# --- helpers ------------------------------------------------------------------------------
def T(m: Any, data: Any, requires_grad: bool = False) -> Any:  # noqa: N802
    """A float64 tensor of library ``m``."""
    if m is torch:
        return torch.tensor(data, dtype=torch.float64, requires_grad=requires_grad)
    return engine.tensor(np.asarray(data, dtype=np.float64), requires_grad=requires_grad)


def queue_callback(m: Any, fn: Any) -> None:
    if m is torch:
        torch.autograd.Variable._execution_engine.queue_callback(fn)
    else:
        engine.queue_callback(fn)


def set_anomaly(m: Any, flag: bool) -> None:
    (torch.autograd.set_detect_anomaly if m is torch else engine.set_detect_anomaly)(flag)


def is_anomaly(m: Any) -> bool:
    return (torch.is_anomaly_enabled if m is torch else engine.is_anomaly_enabled)()


def Fn(m: Any) -> type:  # noqa: N802
    """The custom-Function base class of ``m``."""
    return m.autograd.Function


def _norm_str(s: str) -> str:
    return s.replace("torch::autograd::", "")


def norm(x: Any) -> Any:
    """Tensors -> float64 arrays, node names normalised, containers recursively."""
    if isinstance(x, (torch.Tensor, engine.Tensor)):
        t = x.detach()
        arr = t.numpy() if isinstance(t, torch.Tensor) else t.numpy()
        return ("tensor", np.asarray(arr))
    if isinstance(x, str):
        return _norm_str(x)
    if isinstance(x, (list, tuple)):
        return [norm(v) for v in x]
    if isinstance(x, dict):
        return {k: norm(v) for k, v in x.items()}
    if isinstance(x, (engine.Node, torch.autograd.graph.Node)):
        return ("node", _norm_str(x.name()))
    return x


def outcome(scenario: Any, m: Any) -> tuple[Any, ...]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ("ok", norm(scenario(m)))
        except Exception as e:  # noqa: BLE001 - compared below
            return ("raise", type(e).__name__, _norm_str(str(e)))


def assert_same(got: Any, exp: Any, path: str = "result") -> None:
    if isinstance(exp, tuple) and len(exp) == 2 and exp[0] == "tensor":
        assert isinstance(got, tuple) and got[0] == "tensor", f"{path}: {got!r} is not a tensor"
        assert got[1].shape == exp[1].shape, f"{path}: shape {got[1].shape} != {exp[1].shape}"
        np.testing.assert_allclose(got[1], exp[1], rtol=1e-10, atol=1e-12, err_msg=path)
    elif isinstance(exp, list):
        assert isinstance(got, list) and len(got) == len(exp), f"{path}: {got!r} != {exp!r}"
        for i, (g, e) in enumerate(zip(got, exp)):
            assert_same(g, e, f"{path}[{i}]")
    elif isinstance(exp, dict):
        assert isinstance(got, dict) and got.keys() == exp.keys(), f"{path}: {got!r} != {exp!r}"
        for k in exp:
            assert_same(got[k], exp[k], f"{path}[{k!r}]")
    elif isinstance(exp, float) and not isinstance(exp, bool):
        assert got == pytest.approx(exp, rel=1e-10, abs=1e-12), f"{path}: {got!r} != {exp!r}"
    else:
        assert got == exp, f"{path}: {got!r} != {exp!r}"


def same(scenario: Any, expect: str | None = "ok") -> tuple[Any, ...]:
    """Run ``scenario`` on torch and on our engine; assert the same outcome.

    ``expect`` ("ok" or "raise") checks that the scenario does in torch what the test
    says it does; None leaves the outcome to torch."""
    exp = outcome(scenario, torch)
    if expect is not None:
        assert exp[0] == expect, f"torch itself: {exp!r}"
    got = outcome(scenario, engine)
    if exp[0] == "raise":
        assert got[0] == "raise", f"torch raised {exp[1]}: {exp[2]!r}; engine returned {got!r}"
        assert got[1:] == exp[1:]
    else:
        assert got[0] == "ok", f"engine raised {got[1]}: {got[2]!r}; torch returned {exp[1]!r}"
        assert_same(got[1], exp[1])
    return exp


@pytest.fixture(autouse=True)
def restore_modes():
    """A failing scenario must not leave grad mode or anomaly mode changed.

    Autouse: a test module that imports it gets it for every test."""
    yield
    for m in LIBS:
        m.set_grad_enabled(True)
        set_anomaly(m, False)
