"""Grad mode and tensor flags: ``no_grad``/``enable_grad``/``set_grad_enabled`` as context
managers and decorators, thread-locality, ``requires_grad``, ``detach``, ``grad_fn``
names.

Each test runs one scenario on torch and on the engine (``same()``, in
semantics_helpers.py) and asserts the same outcome.
"""

from __future__ import annotations

import threading

import pytest
from semantics_helpers import (
    LIBS,
    Fn,
    T,
    restore_modes,  # noqa: F401 - autouse: grad and anomaly mode reset
    same,
)

pytestmark = pytest.mark.timeout(60)


def test_no_grad_and_enable_grad_context_managers():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        out = [m.is_grad_enabled()]
        with m.no_grad():
            out.append(m.is_grad_enabled())
            b = a * 2
            with m.enable_grad():
                out.append(m.is_grad_enabled())
                c = a * 2
            out.append(m.is_grad_enabled())
        out.append(m.is_grad_enabled())
        out += [b.requires_grad, b.grad_fn is None, b.is_leaf, c.requires_grad, c.is_leaf]
        return out

    same(s)


def test_no_grad_and_enable_grad_decorators():
    def s(m):
        a = T(m, [1.0, 2.0], True)

        @m.no_grad()
        def f(x):
            """doc of f"""
            return x * 2, m.is_grad_enabled()

        @m.enable_grad()
        def g(x):
            return x * 2

        y, mode = f(a)
        with m.no_grad():
            z = g(a)
        return [y.requires_grad, mode, z.requires_grad, m.is_grad_enabled(), f.__name__,
                f.__doc__]

    same(s)


def test_no_grad_restores_on_exception():
    def s(m):
        try:
            with m.no_grad():
                raise KeyError("x")
        except KeyError:
            pass
        return m.is_grad_enabled()

    same(s)


def test_set_grad_enabled_function_and_context_manager():
    def s(m):
        a = T(m, [1.0], True)
        out = []
        with m.set_grad_enabled(False):
            out.append(m.is_grad_enabled())
            out.append((a * 2).requires_grad)
        out.append(m.is_grad_enabled())
        m.set_grad_enabled(False)
        out.append(m.is_grad_enabled())
        m.set_grad_enabled(True)
        out.append(m.is_grad_enabled())
        return out

    same(s)


def test_grad_mode_is_thread_local():
    for m in LIBS:
        seen = []
        with m.no_grad():
            t = threading.Thread(target=lambda: seen.append(m.is_grad_enabled()))  # noqa: B023
            t.start()
            t.join()
        assert seen == [True], m.__name__


def test_requires_grad_flags():
    def s(m):
        a = T(m, [1.0, 2.0])
        out = [a.requires_grad, a.is_leaf]
        r = a.requires_grad_()
        out += [r is a, a.requires_grad, a.is_leaf]
        h = a * 2
        out += [h.requires_grad, h.is_leaf]
        d = h.detach()
        out += [d.requires_grad, d.is_leaf, d.grad_fn is None, d]
        a.requires_grad_(False)
        out += [a.requires_grad]
        a.requires_grad = True
        out += [a.requires_grad]
        return out

    same(s)


def test_requires_grad_false_on_non_leaf_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        (a * 2).requires_grad_(False)

    same(s, "raise")


def test_requires_grad_on_integer_tensor_error():
    def s(m):
        x = m.tensor([1, 2])
        x.requires_grad_()

    same(s, "raise")


def test_requires_grad_integer_tensor_constructor_error():
    def s(m):
        m.tensor([1, 2], requires_grad=True)

    same(s, "raise")


def test_detach_cuts_the_graph():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        h = a * a
        y = (h.detach() * a).sum()
        y.backward()
        return [a.grad]

    same(s)


def test_grad_fn_names_and_next_functions():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = T(m, [3.0, 4.0])
        y = ((a * b).exp() + a).sum()
        out = []
        stack = [y.grad_fn]
        while stack:
            fn = stack.pop()
            out.append([fn.name(), [(f.name() if f is not None else None, i)
                                    for f, i in fn.next_functions]])
            stack.extend(f for f, _ in fn.next_functions if f is not None)
        return out

    same(s)


def test_leaf_accumulate_grad_node_is_shared():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y1 = a * 2
        y2 = a * 3
        n1 = y1.grad_fn.next_functions[0][0]
        n2 = y2.grad_fn.next_functions[0][0]
        return [n1 is n2, n1.name(), n1.variable is a]

    same(s)


def test_backward_under_no_grad_still_works():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y = (a * a).sum()
        with m.no_grad():
            y.backward()
        return [a.grad, a.grad.requires_grad]

    same(s)


def test_create_graph_under_no_grad_records_graph():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y = (a ** 3).sum()
        with m.no_grad():
            (g,) = m.autograd.grad(y, [a], create_graph=True)
        return [g, g.requires_grad]

    same(s)


def test_bare_decorators_without_parentheses():
    def s(m):
        a = T(m, [1.0, 2.0], True)

        @m.no_grad
        def f(x):
            return x * 2, m.is_grad_enabled()

        @m.enable_grad
        def g(x):
            return x * 2

        y, mode = f(a)
        with m.no_grad():
            z = g(a)
        return [y.requires_grad, mode, z.requires_grad, f.__name__]

    same(s)


def test_no_grad_decorated_generator():
    def s(m):
        a = T(m, [1.0, 2.0], True)

        @m.no_grad()
        def gen():
            for k in range(2):
                got = yield ((a * k).requires_grad, m.is_grad_enabled())
                yield got

        it = gen()
        out = [next(it), m.is_grad_enabled(), it.send("hi"), next(it), m.is_grad_enabled()]
        it.close()
        return out

    same(s)


def test_set_grad_enabled_as_decorator():
    def s(m):
        a = T(m, [1.0], True)

        @m.set_grad_enabled(False)
        def f():
            return (a * 2).requires_grad

        return [m.is_grad_enabled(), f(), m.is_grad_enabled()]

    same(s)


def test_grad_mode_inside_backward_hooks_and_custom_function():
    def s(m):
        log = []

        class Probe(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                log.append(("forward", m.is_grad_enabled()))
                return x * 2

            @staticmethod
            def backward(ctx, g):
                log.append(("backward", m.is_grad_enabled()))
                return g * 2

        a = T(m, [1.0, 2.0], True)
        y = Probe.apply(a) * a
        y.register_hook(lambda g: log.append(("hook", m.is_grad_enabled())))
        y.sum().backward(retain_graph=True)
        y.sum().backward(create_graph=True)
        return [log, m.is_grad_enabled()]

    same(s)
