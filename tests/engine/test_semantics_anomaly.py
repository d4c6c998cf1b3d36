"""Anomaly mode (NaN checks, ``detect_anomaly``, ``set_detect_anomaly``), and inf and NaN
computed silently when it is off, as torch does.

Each test runs one scenario on torch and on the engine (``same()``, in
semantics_helpers.py) and asserts the same outcome.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from semantics_helpers import (
    LIBS,
    Fn,
    T,
    assert_same,
    is_anomaly,
    norm,
    restore_modes,  # noqa: F401 - autouse: grad and anomaly mode reset
    same,
    set_anomaly,
    torch,
)

from autograd_tui import engine

pytestmark = pytest.mark.timeout(60)


# --- anomaly mode -----------------------------------------------------------------------------
NAN_GRAPHS = {
    "pow_half_at_zero": lambda m, x: (x ** 0.5 * 0).sum(),
    "log_at_zero": lambda m, x: (x.log() * 0).sum(),
    "div_zero_zero": lambda m, x: (x / x).sum(),
}


@pytest.mark.parametrize("name", sorted(NAN_GRAPHS))
def test_anomaly_mode_nan(name):
    f = NAN_GRAPHS[name]

    def s(m):
        x = T(m, [0.0, 1.0], True)
        set_anomaly(m, True)
        try:
            f(m, x).backward()
        finally:
            set_anomaly(m, False)

    exp = same(s, "raise")
    assert "returned nan values in its" in exp[2]
    assert not engine.is_anomaly_enabled()


def test_anomaly_mode_off_gives_nan_grads():
    def s(m):
        x = T(m, [0.0, 1.0], True)
        (x ** 0.5 * 0).sum().backward()
        return [np.isnan(x.grad.detach().numpy()).tolist()]

    same(s)


def test_anomaly_mode_nan_from_custom_function():
    def s(m):
        class NanBack(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, g):
                return g * float("nan")

        x = T(m, [1.0, 2.0], True)
        set_anomaly(m, True)
        try:
            NanBack.apply(x).sum().backward()
        finally:
            set_anomaly(m, False)

    same(s, "raise")


def test_anomaly_mode_engine_usable_after():
    def s(m):
        x = T(m, [0.0, 1.0], True)
        set_anomaly(m, True)
        try:
            try:
                (x ** 0.5 * 0).sum().backward()
            except RuntimeError:
                pass
            (x * x).sum().backward()
        finally:
            set_anomaly(m, False)
        return [x.grad, is_anomaly(m)]

    same(s)


def test_detect_anomaly_context_manager():
    for m in LIBS:
        dm = torch.autograd.detect_anomaly if m is torch else engine.detect_anomaly
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with dm():
                assert is_anomaly(m)
        assert not is_anomaly(m)


def test_anomaly_mode_nan_in_grad():
    def s(m):
        x = T(m, [0.0, 4.0], True)
        set_anomaly(m, True)
        try:
            m.autograd.grad((x.log() * 0).sum(), [x])
        finally:
            set_anomaly(m, False)

    assert same(s, "raise")[2] == "Function 'LogBackward0' returned nan values in its 0th output."


def test_set_detect_anomaly_as_context_manager():
    def s(m):
        out = [is_anomaly(m)]
        with m.autograd.set_detect_anomaly(True):
            out.append(is_anomaly(m))
            x = T(m, [0.0, 1.0], True)
            try:
                (x.log() * 0).sum().backward()
            except RuntimeError as e:
                out.append(str(e))
        out.append(is_anomaly(m))
        return out

    same(s)


def test_anomaly_mode_without_nan_check():
    def s(m):
        x = T(m, [0.0, 1.0], True)
        m.autograd.set_detect_anomaly(True, check_nan=False)
        try:
            (x ** 0.5 * 0).sum().backward()
        finally:
            m.autograd.set_detect_anomaly(False)
        return [np.isnan(x.grad.detach().numpy()).tolist()]

    same(s)


# --- inf and NaN: computed silently, as torch does --------------------------------------------
_INF = float("inf")


_SPECIAL = {
    "mul by zero": lambda m, x, w: (x * T(m, [0.0, 0.0, 1.0])).sum(),
    "add opposite infinities": lambda m, x, w: (x + T(m, [-_INF, 1.0, 1.0])).sum(),
    "sub": lambda m, x, w: (x - x * 2).sum(),
    "div by zero": lambda m, x, w: (x / T(m, [0.0, 0.0, 0.0])).sum(),
    "matmul": lambda m, x, w: (x.reshape(1, 3) @ w).sum(),
    "sum and mean": lambda m, x, w: x.sum() * 0 + x.mean(),
    "exp overflow": lambda m, x, w: (x * 1000).exp().sum(),
    "log of zero and negatives": lambda m, x, w: (x - 1).log().sum(),
    "pow": lambda m, x, w: ((x - 1) ** -1).sum(),
    "tanh sigmoid relu": lambda m, x, w: (x.tanh() + x.sigmoid() + x.relu()).sum(),
}


@pytest.mark.parametrize("name", list(_SPECIAL))
def test_inf_and_nan_compute_silently_as_in_torch(name: str) -> None:
    """NumPy warns on inf * 0, 0 / 0, overflow, log(0), ...; torch does not, and returns
    inf or NaN: the engine neither, forward or backward, and gives torch's values."""
    def scenario(m: Any) -> Any:
        x = T(m, [_INF, 1.0, 0.0], requires_grad=True)
        w = T(m, [[0.0], [_INF], [2.0]], requires_grad=True)
        y = _SPECIAL[name](m, x, w)
        y.backward()
        return [y, x.grad, w.grad if w.grad is not None else "none"]

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning fails the test
        got = norm(scenario(engine))
    exp = norm(scenario(torch))
    assert_same(got, exp)
