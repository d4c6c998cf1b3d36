"""``backward(inputs=...)`` and ``autograd.backward()``: which leaves and non-leaves get
``.grad``, dict and duplicated inputs, and the argument errors.

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


def test_backward_inputs_only_those_leaves():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = T(m, [3.0, 4.0], True)
        (a * b).sum().backward(inputs=[a])
        return [a.grad, b.grad]

    same(s)


def test_backward_inputs_single_tensor():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = T(m, [3.0, 4.0], True)
        (a * b * b).sum().backward(inputs=b)
        return [a.grad, b.grad]

    same(s)


def test_backward_inputs_non_leaf_gets_grad_via_retain_grad():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        h = a * 3
        (h * h).sum().backward(inputs=[h])
        return [h.grad, a.grad, h.retains_grad, h.is_leaf]

    same(s)


def test_backward_inputs_non_leaf_and_leaf_accumulate_twice():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        h = a.exp()
        y = (h * a).sum()
        y.backward(inputs=[h, a], retain_graph=True)
        y.backward(inputs=[h, a])
        return [h.grad, a.grad]

    same(s)


def test_backward_inputs_unused_leaf_stays_none():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        c = T(m, [5.0], True)
        (a * a).sum().backward(inputs=[a, c])
        return [a.grad, c.grad]

    same(s)


def test_backward_inputs_empty_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        (a * a).sum().backward(inputs=[])

    same(s, "raise")


def test_backward_inputs_not_requiring_grad_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        x = T(m, [1.0, 2.0])
        (a * x).sum().backward(inputs=[x])

    same(s, "raise")


def test_autograd_backward_inputs_empty_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        m.autograd.backward([(a * a).sum()], inputs=[])

    same(s, "raise")


def test_autograd_backward_single_tensor_and_gradient():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        m.autograd.backward(a * a, T(m, [1.0, 3.0]))
        return [a.grad]

    same(s)


def test_backward_inputs_non_leaf_with_create_graph():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        h = a * a
        (h * h).sum().backward(inputs=[h, a], create_graph=True)
        gh, ga = h.grad, a.grad
        return [gh, ga, gh.requires_grad, ga.requires_grad]

    same(s)


def test_backward_dict_inputs():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = T(m, [3.0, 4.0], True)
        (a * b).sum().backward(inputs={"a": a})
        return [a.grad, b.grad]

    same(s)


def test_backward_inputs_duplicated_leaf():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        (a * a).sum().backward(inputs=[a, a])
        return [a.grad]

    same(s)


def test_backward_inputs_non_leaf_retain_grad_sees_hook():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        h = a * 2
        h.register_hook(lambda g: g * 3)
        (h * h).sum().backward(inputs=[h])
        return [h.grad, a.grad]

    same(s)
