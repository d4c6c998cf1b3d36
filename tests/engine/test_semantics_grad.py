"""``autograd.grad()``: results, ``allow_unused``, ``materialize_grads``, ``grad_outputs``,
several outputs, dict inputs, and the argument errors.

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


def test_grad_basic_and_leaves_untouched():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = T(m, [3.0, 4.0], True)
        b.grad = T(m, [10.0, 10.0])
        ga, gb = m.autograd.grad((a * b * a).sum(), [a, b])
        return [ga, gb, a.grad, b.grad]

    same(s)


def test_grad_allow_unused_returns_none():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = T(m, [3.0, 4.0], True)
        return list(m.autograd.grad((a * a).sum(), [a, b], allow_unused=True))

    same(s)


def test_grad_unused_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = T(m, [3.0, 4.0], True)
        m.autograd.grad((a * a).sum(), [a, b])

    exp = same(s, "raise")
    assert exp[2] == (
        "The differentiated Tensor at index 1 appears to not have been used in the graph. "
        "Set allow_unused=True if this is the desired behavior."
    )


def test_grad_unused_non_leaf_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        h = a * 2  # created, never used by y
        y = (a * a).sum()
        m.autograd.grad(y, [a, h])

    same(s, "raise")


def test_grad_unused_non_leaf_allow_unused():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y = (a * a).sum()
        h = a * 2  # created after y
        return list(m.autograd.grad(y, [h, a], allow_unused=True))

    same(s)


def test_grad_input_not_requiring_grad_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        x = T(m, [1.0, 2.0])
        m.autograd.grad((a * x).sum(), [a, x])

    same(s, "raise")


def test_grad_output_not_requiring_grad_error():
    def s(m):
        x = T(m, [1.0, 2.0])
        a = T(m, [1.0, 2.0], True)
        m.autograd.grad(x.sum(), [a])

    same(s, "raise")


def test_grad_empty_inputs_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        m.autograd.grad((a * a).sum(), [])

    same(s, "raise")


def test_grad_materialize_grads():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = T(m, [3.0, 4.0, 5.0], True)
        return list(m.autograd.grad((a * a).sum(), [a, b], materialize_grads=True))

    same(s)


def test_grad_materialize_grads_with_allow_unused_false_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        m.autograd.grad((a * a).sum(), [a], allow_unused=False, materialize_grads=True)

    same(s, "raise")


def test_grad_non_leaf_input_and_grad_outputs():
    def s(m):
        a = T(m, [1.0, 2.0, 3.0], True)
        h = a.exp()
        y = h * a
        gh, ga = m.autograd.grad(y, [h, a], grad_outputs=T(m, [1.0, 0.5, 2.0]))
        return [gh, ga, a.grad]

    same(s)


def test_grad_same_input_twice():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        return list(m.autograd.grad((a * a * a).sum(), [a, a]))

    same(s)


def test_grad_single_tensor_input_returns_tuple():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        r = m.autograd.grad((a * a).sum(), a)
        return [type(r).__name__, len(r), r[0]]

    same(s)


def test_grad_result_does_not_require_grad_without_create_graph():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        (g,) = m.autograd.grad((a * a).sum(), [a])
        return [g.requires_grad, g.grad_fn is None]

    same(s)


def test_grad_mismatched_grad_outputs_shape_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        m.autograd.grad(a * 2, [a], grad_outputs=[T(m, [1.0, 2.0, 3.0])])

    same(s, "raise")


def test_grad_materialize_grads_with_create_graph():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = T(m, [3.0], True)
        ga, gb = m.autograd.grad((a ** 3).sum(), [a, b], create_graph=True,
                                 materialize_grads=True)
        return [ga, gb, ga.requires_grad, gb.requires_grad, gb.is_leaf]

    same(s)


def test_grad_dict_inputs_returns_dict():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = T(m, [3.0, 4.0], True)
        r = m.autograd.grad((a * b).sum(), {"a": a, "b": b})
        return [type(r).__name__, r]

    same(s)


def test_grad_second_output_not_requiring_grad_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        m.autograd.grad([(a * a).sum(), T(m, 1.0)], [a])

    same(s, "raise")


def test_grad_non_scalar_without_grad_outputs_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        m.autograd.grad(a * a, [a])

    same(s, "raise")


def test_grad_several_outputs_with_grad_outputs():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        return list(m.autograd.grad([a * a, a.exp().sum()], [a],
                                    grad_outputs=[T(m, [1.0, -1.0]), None]))

    same(s)


def test_grad_of_leaf_root_wrt_itself():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        return list(m.autograd.grad(a, [a], grad_outputs=T(m, [5.0, 6.0])))

    same(s)
