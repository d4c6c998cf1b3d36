"""``retain_graph`` and ``create_graph``: a second backward through a freed graph, which
nodes fail, accumulation across calls.

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


def test_second_backward_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = T(m, [3.0, 4.0], True)
        y = (a * b).sum()
        y.backward()
        y.backward()

    exp = same(s, "raise")
    assert exp[2].startswith("Trying to backward through the graph a second time")


def test_second_grad_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y = a.exp().sum()
        m.autograd.grad(y, [a])
        m.autograd.grad(y, [a])

    same(s, "raise")


TWICE = {
    "add_sum": lambda m, a, b: (a + b).sum(),
    "sub_mean": lambda m, a, b: (a - b).mean(),
    "add_scalar": lambda m, a, b: (a + 2).sum(),
    "rsub_scalar": lambda m, a, b: (2 - a).sum(),
    "neg_reshape_t": lambda m, a, b: (-a).reshape(2, 1).t().sum(),
    "clone_index": lambda m, a, b: a.clone()[1],
    "expand": lambda m, a, b: a.sum().expand(3).sum(),
    "mul_scalar": lambda m, a, b: (a * 2).sum(),  # saves the wrapped scalar: fails
    "div_scalar": lambda m, a, b: (a / 2).sum(),
    "mul": lambda m, a, b: (a * b).sum(),
    "exp": lambda m, a, b: a.exp().sum(),
    "matmul": lambda m, a, b: a @ b,
    "mean_of_mul": lambda m, a, b: (a - b * 2).mean(),
}


@pytest.mark.parametrize("name", sorted(TWICE))
def test_second_backward_only_nodes_with_saved_tensors_fail(name):
    """(a + b).sum() runs twice in torch; a node that saved tensors fails the second time."""
    f = TWICE[name]

    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = T(m, [3.0, 4.0], True)
        y = f(m, a, b)
        y.backward()
        y.backward()
        return [a.grad, b.grad]

    exp = same(s, expect=None)
    assert (exp[0] == "ok") == (name in {"add_sum", "sub_mean", "add_scalar", "rsub_scalar",
                                         "neg_reshape_t", "clone_index", "expand"})


def test_retain_graph_accumulates():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = T(m, [3.0, 4.0], True)
        y = (a * b).exp().sum()
        y.backward(retain_graph=True)
        first = a.grad.clone()
        y.backward(retain_graph=True)
        y.backward()
        return [first, a.grad, b.grad]

    same(s)


def test_retain_graph_then_free_then_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y = (a * a).sum()
        y.backward(retain_graph=True)
        y.backward()
        y.backward()

    same(s, "raise")


def test_second_backward_partial_graph_error():
    """Only the nodes that saved tensors fail: a shared subgraph is freed by the first pass."""

    def s(m):
        a = T(m, [1.0, 2.0], True)
        h = a * a
        h.sum().backward()
        (h + 1).sum().backward()

    same(s, "raise")


def test_gradient_accumulation_across_calls():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        for k in range(3):
            ((a * a) * (k + 1)).sum().backward()
        g = a.grad
        (a * 3).sum().backward()
        return [a.grad, g is a.grad]

    same(s)


def test_grad_set_to_none_then_backward():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        (a * a).sum().backward()
        a.grad = None
        (a * 5).sum().backward()
        return [a.grad]

    same(s)


def test_create_graph_keeps_graph_by_default():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y = (a * a).sum()
        y.backward(create_graph=True)
        y.backward()
        return [a.grad]

    same(s)


def test_create_graph_with_retain_graph_false_frees():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y = (a * a).sum()
        y.backward(create_graph=True, retain_graph=False)
        y.backward()

    same(s, "raise")


def test_grad_retain_graph_then_backward():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y = (a.exp() * a).sum()
        (g,) = m.autograd.grad(y, [a], retain_graph=True)
        y.backward()
        return [g, a.grad]

    same(s)
