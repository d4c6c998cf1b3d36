"""The roots of a backward pass: ``GraphRoot`` with several or duplicated roots, leaf roots,
implicit gradients, and the errors for a bad root or gradient.

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


def test_multiple_roots():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = T(m, [3.0, 4.0], True)
        y1 = a * b
        y2 = (a * a).sum()
        m.autograd.backward([y1, y2], [T(m, [1.0, -1.0]), T(m, 2.0)])
        return [a.grad, b.grad]

    same(s)


def test_multiple_roots_shared_subgraph():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        h = a.exp()
        m.autograd.backward([h.sum(), (h * h).sum(), h], [None, None, T(m, [0.5, 0.25])])
        return [a.grad]

    same(s)


def test_duplicate_roots():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y = a * a
        m.autograd.backward([y, y], [T(m, [1.0, 1.0]), T(m, [2.0, 3.0])])
        return [a.grad]

    same(s)


def test_duplicate_scalar_roots_implicit_grad():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y = (a * a).sum()
        m.autograd.backward([y, y, y])
        return [a.grad]

    same(s)


def test_duplicate_leaf_roots():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        m.autograd.backward([a, a], [T(m, [1.0, 1.0]), T(m, [2.0, 3.0])])
        return [a.grad]

    same(s)


def test_leaf_as_root():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        a.backward(T(m, [3.0, 4.0]))
        return [a.grad]

    same(s)


def test_mismatched_gradient_shape_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        (a * 2).backward(T(m, [1.0, 2.0, 3.0]))

    exp = same(s, "raise")
    assert exp[2].startswith("Mismatch in shape")


def test_mismatched_gradient_shape_error_among_several_roots():
    # (A mismatch after the first root makes torch's own message-building fail with
    # "Boolean value of Tensor with more than one value is ambiguous": not tested.)
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y1 = a * 2
        y2 = a * 3
        m.autograd.backward([y1, y2], [T(m, [[1.0, 2.0]]), T(m, [1.0, 1.0])])

    exp = same(s, "raise")
    assert exp[2].startswith("Mismatch in shape: grad_output[0]")


def test_non_scalar_without_gradient_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        (a * 2).backward()

    exp = same(s, "raise")
    assert exp[2] == "grad can be implicitly created only for scalar outputs"


def test_non_scalar_root_with_none_gradient_in_list_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        m.autograd.backward([(a * 2).sum(), a * 3], [None, None])

    same(s, "raise")


def test_root_without_grad_fn_error():
    def s(m):
        x = T(m, [1.0, 2.0])
        x.sum().backward()

    exp = same(s, "raise")
    assert exp[2] == "element 0 of tensors does not require grad and does not have a grad_fn"


def test_second_root_without_grad_fn_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        x = T(m, [1.0, 2.0])
        m.autograd.backward([(a * 2).sum(), x.sum()])

    same(s, "raise")


def test_one_element_non_scalar_implicit_grad():
    def s(m):
        a = T(m, [[2.0]], True)
        (a * a).backward()
        return [a.grad]

    same(s)


def test_gradient_not_a_tensor_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        m.autograd.backward([(a * 2).sum()], [1.0])

    same(s, "raise")
