"""Exceptions inside a backward pass (custom backward, hooks): their type and message
reach the caller, and the engine stays usable.

Each test runs one scenario on torch and on the engine (``same()``, in
semantics_helpers.py) and asserts the same outcome.
"""

from __future__ import annotations

import pytest
from semantics_helpers import (
    Fn,
    T,
    restore_modes,  # noqa: F401 - autouse: grad and anomaly mode reset
    same,
)

pytestmark = pytest.mark.timeout(60)


def make_raising_fn(m):
    class Boom(Fn(m)):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom in backward")

    return Boom


def test_exception_in_custom_backward_then_engine_usable():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y = make_raising_fn(m).apply(a * 3).sum()
        try:
            y.backward()
        except ValueError as e:
            caught = str(e)
        else:
            caught = None
        (a * a).sum().backward()
        return [caught, a.grad]

    same(s)


def test_exception_in_custom_backward_type_and_message():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = T(m, [1.0, 2.0], True)
        y = make_raising_fn(m).apply(a).sum() + (b * b).sum()
        y.backward()

    exp = same(s, "raise")
    assert exp[1:] == ("ValueError", "boom in backward")


def test_exception_in_hook():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        h = a * 2

        def hook(g):
            raise TypeError("bad hook")

        handle = h.register_hook(hook)
        try:
            (h * h).sum().backward(retain_graph=True)
        except TypeError as e:
            caught = str(e)
        handle.remove()
        (h * h).sum().backward()
        return [caught, a.grad]

    same(s)


def test_exception_in_grad_prehook_propagates():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y = (a.exp() * a).sum()

        def pre(go):
            raise IndexError("pre-hook failed")

        y.grad_fn.register_prehook(pre)
        m.autograd.grad(y, [a])

    same(s, "raise")


def test_exception_in_post_hook_propagates():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y = (a.exp() * a).sum()

        def post(gi, go):
            raise ArithmeticError("post-hook failed")

        y.grad_fn.register_hook(post)
        y.backward()

    same(s, "raise")


def test_hook_changing_shape_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        h = a * 2
        h.register_hook(lambda g: g.sum())
        (h * h).sum().backward()
        return [a.grad]

    same(s, "raise")


def test_exception_in_hook_during_grad_then_usable():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        h = a.exp()
        handle = h.register_hook(lambda g: 1 / 0)
        try:
            m.autograd.grad((h * h).sum(), [a], retain_graph=True)
        except ZeroDivisionError as e:
            caught = str(e)
        handle.remove()
        return [caught, m.autograd.grad((h * h).sum(), [a])[0]]

    same(s)
