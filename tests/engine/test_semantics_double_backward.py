"""Double backward (``create_graph=True``): second and third derivatives of the ops.

Each test runs one scenario on torch and on the engine (``same()``, in
semantics_helpers.py) and asserts the same outcome.
"""

from __future__ import annotations

import pytest
from semantics_helpers import (
    T,
    restore_modes,  # noqa: F401 - autouse: grad and anomaly mode reset
    same,
)

pytestmark = pytest.mark.timeout(60)


UNARY = {
    "cube": lambda x: x ** 3,
    "pow_half": lambda x: x ** 0.5,
    "exp": lambda x: x.exp(),
    "log": lambda x: x.log(),
    "sigmoid": lambda x: x.sigmoid(),
    "tanh": lambda x: x.tanh(),
    "relu": lambda x: x.relu() * x,
    "reciprocal": lambda x: 1 / x,
    "mean": lambda x: x.mean() * x,
    "sum_dim": lambda x: x.reshape(2, 2).sum(0) ** 2,
    "mean_dim": lambda x: x.reshape(2, 2).mean(1, keepdim=True) * x.reshape(2, 2),
    "rpow": lambda x: 2 ** x,
    "sub_neg": lambda x: (1 - x) * (-x) - x,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_double_backward_unary(name):
    f = UNARY[name]

    def s(m):
        x = T(m, [0.5, 1.5, 2.0, 3.0], True)
        y = f(x).sum()
        (g,) = m.autograd.grad(y, [x], create_graph=True)
        (g2,) = m.autograd.grad(g.sum(), [x], allow_unused=True)
        return [g, g2, g.requires_grad]

    same(s)


BINARY = {
    "mul": lambda a, b: a * b * a,
    "div": lambda a, b: a / b,
    "add_sub": lambda a, b: (a + b) * (a - b),
    "pow_tensor": lambda a, b: a ** b,
    "matmul": lambda a, b: a.reshape(2, 2) @ b.reshape(2, 2) @ a.reshape(2, 2),
    "matvec": lambda a, b: (a.reshape(2, 2) @ b[:2]) * b[2:],
    "dot": lambda a, b: (a @ b) * a,
    "broadcast": lambda a, b: a.reshape(2, 2) * b[:2] * a[0],
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_double_backward_binary(name):
    f = BINARY[name]

    def s(m):
        a = T(m, [0.5, 1.5, 2.0, 3.0], True)
        b = T(m, [1.5, -0.5, 2.5, 1.0], True)
        y = f(a, b).sum()
        ga, gb = m.autograd.grad(y, [a, b], create_graph=True)
        # a Hessian-vector product through both first-order gradients
        hv = m.autograd.grad((ga * gb).sum() + (ga ** 2).sum(), [a, b], allow_unused=True)
        return [ga, gb, *hv]

    same(s)


def test_backward_create_graph_then_backward_of_grad():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        (x ** 3).sum().backward(create_graph=True)
        gx = x.grad
        req = gx.requires_grad
        x.grad = None
        gx.sum().backward()
        return [gx, req, x.grad]

    same(s)


def test_backward_create_graph_accumulates_with_graph():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        (x ** 2).sum().backward(create_graph=True)
        (x ** 3).sum().backward(create_graph=True)
        gx = x.grad
        name = gx.grad_fn.name() if gx.grad_fn is not None else None
        (g2,) = m.autograd.grad(gx.sum(), [x])
        return [gx, g2, name is not None]

    same(s)


def test_third_order():
    def s(m):
        x = T(m, [0.5, 1.0, 2.0], True)
        y = (x ** 4 * x.exp()).sum()
        (g1,) = m.autograd.grad(y, x, create_graph=True)
        (g2,) = m.autograd.grad(g1.sum(), x, create_graph=True)
        (g3,) = m.autograd.grad(g2.sum(), x)
        return [g1, g2, g3]

    same(s)


def test_grad_create_graph_used_in_second_grad_mixed():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        w = T(m, [0.5, -1.0], True)
        y = (w * x.tanh()).sum()
        (gx,) = m.autograd.grad(y, [x], create_graph=True)
        penalty = (gx ** 2).sum()
        gw, gx2 = m.autograd.grad(penalty, [w, x])
        return [gx, gw, gx2]

    same(s)


def test_double_backward_of_linear_is_zero_second_order():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        (g,) = m.autograd.grad((x * 3).sum(), [x], create_graph=True)
        return [g, g.requires_grad]

    same(s)
