"""Custom ``Function``: ``apply``, ``ctx`` (saved tensors, ``needs_input_grad``,
``mark_non_differentiable``, ``set_materialize_grads``), the number of gradients, and a
reentrant backward.

Each test runs one scenario on torch and on the engine (``same()``, in
semantics_helpers.py) and asserts the same outcome.
"""

from __future__ import annotations

import pytest
from semantics_helpers import (
    Fn,
    T,
    queue_callback,
    restore_modes,  # noqa: F401 - autouse: grad and anomaly mode reset
    same,
)

pytestmark = pytest.mark.timeout(60)


def make_scale_mul(m):
    class ScaleMul(Fn(m)):
        @staticmethod
        def forward(ctx, x, w, k, flag):
            ctx.save_for_backward(x, w)
            ctx.k = k
            ctx.flag = flag
            ctx.log = [list(ctx.needs_input_grad)]
            return x * w * k

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            ctx.log.append(list(ctx.needs_input_grad))
            gx = g * w * ctx.k if ctx.needs_input_grad[0] else None
            gw = g * x * ctx.k if ctx.needs_input_grad[1] else None
            return gx, gw, None, None

    return ScaleMul


def test_custom_function_basic():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        w = T(m, [3.0, 4.0])
        y = make_scale_mul(m).apply(x, w, 2.5, "tag")
        ctx = y.grad_fn
        y.sum().backward()
        return [y, x.grad, w.grad, ctx.log, y.grad_fn.name(), ctx.k, ctx.flag,
                y.requires_grad, y.is_leaf]

    same(s)


def test_custom_function_both_inputs_and_second_order_through_it():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        w = T(m, [3.0, 4.0], True)
        y = make_scale_mul(m).apply(x * x, w, 0.5, None)
        gx, gw = m.autograd.grad(y.sum(), [x, w], create_graph=True)
        (g2,) = m.autograd.grad((gx * gw).sum(), [w])
        return [gx, gw, g2, y.grad_fn.log]

    same(s)


def test_custom_function_next_functions():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        w = T(m, [3.0, 4.0])
        y = make_scale_mul(m).apply(x.exp(), w, 1.0, 0)
        return [[(f.name() if f is not None else None, i) for f, i in y.grad_fn.next_functions]]

    same(s)


def test_custom_function_saved_tensors_freed_after_backward():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        w = T(m, [3.0, 4.0], True)
        y = make_scale_mul(m).apply(x, w, 1.0, None).sum()
        y.backward()
        y.backward()

    exp = same(s, "raise")
    assert exp[2].startswith("Trying to backward through the graph a second time")


def test_custom_function_saved_tensors_access_after_free():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        w = T(m, [3.0, 4.0], True)
        y = make_scale_mul(m).apply(x, w, 1.0, None)
        node = y.grad_fn
        before = list(node.saved_tensors)
        y.sum().backward()
        return [before, node.saved_tensors]

    same(s, "raise")


def test_custom_function_retain_graph_keeps_saved():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        w = T(m, [3.0, 4.0], True)
        y = make_scale_mul(m).apply(x, w, 1.0, None).sum()
        y.backward(retain_graph=True)
        y.backward()
        return [x.grad, w.grad]

    same(s)


def test_custom_function_wrong_number_of_gradients():
    def s(m):
        class TooFew(Fn(m)):
            @staticmethod
            def forward(ctx, x, y):
                return x + y

            @staticmethod
            def backward(ctx, g):
                return g

        a = T(m, [1.0], True)
        b = T(m, [2.0], True)
        TooFew.apply(a, b).sum().backward()

    exp = same(s, "raise")
    assert "incorrect number of gradients" in exp[2]


def test_custom_function_too_many_gradients():
    def s(m):
        class TooMany(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2, g

        a = T(m, [1.0], True)
        TooMany.apply(a).sum().backward()

    same(s, "raise")


def test_custom_function_extra_none_gradients_allowed():
    def s(m):
        class ExtraNone(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2, None, None

        a = T(m, [1.0], True)
        ExtraNone.apply(a).sum().backward()
        return [a.grad]

    same(s)


def test_custom_function_gradient_for_non_tensor_arg_error():
    def s(m):
        class BadGrad(Fn(m)):
            @staticmethod
            def forward(ctx, x, k):
                return x * k

            @staticmethod
            def backward(ctx, g):
                return g, g

        a = T(m, [1.0], True)
        BadGrad.apply(a, 3.0).sum().backward()

    same(s, "raise")


def test_custom_function_multiple_outputs_one_unused():
    def s(m):
        class Split(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, g1, g2):
                (x,) = ctx.saved_tensors
                return g1 * 2 + g2 * 3 * x

        a = T(m, [1.0, 2.0], True)
        u, v = Split.apply(a)
        u.sum().backward()
        return [a.grad, u.grad_fn is v.grad_fn, u.grad_fn.name()]

    same(s)


def test_custom_function_no_grad_inputs_or_no_grad_mode():
    def s(m):
        fn = make_scale_mul(m)
        x = T(m, [1.0, 2.0])
        y1 = fn.apply(x, T(m, [3.0, 4.0]), 1.0, None)
        a = T(m, [1.0, 2.0], True)
        with m.no_grad():
            y2 = fn.apply(a, a, 2.0, None)
        return [y1.requires_grad, y1.grad_fn is None, y2.requires_grad, y2.grad_fn is None, y2]

    same(s)


def test_custom_function_returning_input_unchanged():
    def s(m):
        class Ident(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 4

        a = T(m, [1.0, 2.0], True)
        y = Ident.apply(a)
        (y * y).sum().backward()
        return [y is a, y.grad_fn.name(), a.grad]

    same(s)


def test_custom_function_mark_non_differentiable():
    def s(m):
        class WithIdx(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                idx = x > 1.5
                y = x * 2
                ctx.mark_non_differentiable(idx)
                return y, idx

            @staticmethod
            def backward(ctx, g, gidx):
                return g * 2

        a = T(m, [1.0, 2.0], True)
        y, idx = WithIdx.apply(a)
        y.sum().backward()
        return [a.grad, idx.requires_grad]

    same(s)


def test_custom_function_reentrant_backward():
    def s(m):
        class Reentrant(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * 1

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                with m.enable_grad():
                    xd = x.detach().requires_grad_()
                    (inner,) = m.autograd.grad((xd ** 3).sum(), [xd])
                return g * inner

        a = T(m, [1.0, 2.0], True)
        Reentrant.apply(a).sum().backward()
        return [a.grad]

    same(s)


def test_custom_function_materialized_none_grad():
    def s(m):
        class Two(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, g1, g2):
                return g1 + g2

        a = T(m, [1.0, 2.0], True)
        u, v = Two.apply(a)
        u.sum().backward()
        return [a.grad]

    same(s)


def test_custom_function_ctx_is_the_node():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        w = T(m, [3.0, 4.0], True)
        y = make_scale_mul(m).apply(x, w, 2.0, "f")
        node = y.grad_fn
        return [node.k, node.flag, list(node.needs_input_grad), list(node.saved_tensors),
                node.log]

    same(s)


def test_custom_function_takes_a_sequence_number_even_without_grad():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        fn = make_scale_mul(m)
        y1 = a * 2
        with m.no_grad():
            fn.apply(a, a, 1.0, None)
        fn.apply(T(m, [1.0]), T(m, [1.0]), 1.0, None)  # no input requires grad
        y2 = fn.apply(a, a, 1.0, None)
        y3 = a * 2
        s1 = y1.grad_fn._sequence_nr()
        return [y2.grad_fn._sequence_nr() - s1, y3.grad_fn._sequence_nr() - s1]

    same(s)


def test_custom_function_save_for_backward_non_tensor_error():
    def s(m):
        class SavesInt(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x, 3)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g

        SavesInt.apply(T(m, [1.0], True))

    same(s, "raise")


def test_custom_function_save_for_backward_non_tensor_ok_without_grad():
    def s(m):
        class SavesInt(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x, 3)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g

        return SavesInt.apply(T(m, [1.0]))

    same(s)


def test_custom_function_set_materialize_grads_false():
    def s(m):
        class Two(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, g1, g2):
                ctx.seen = [g1 is None, g2 is None]
                return g1 * 2 if g1 is not None else g2 * 3

        a = T(m, [1.0, 2.0], True)
        u, v = Two.apply(a)
        v.sum().backward()
        return [a.grad, u.grad_fn.seen]

    same(s)


def test_custom_function_saved_output_and_input():
    def s(m):
        class Exp(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                y = x.exp()
                ctx.save_for_backward(y, x)
                return y

            @staticmethod
            def backward(ctx, g):
                y, x = ctx.saved_tensors
                return g * y

        a = T(m, [0.5, 1.0], True)
        y = Exp.apply(a)
        (y * y).sum().backward()
        return [a.grad]

    same(s)


def test_custom_function_queue_callback_in_backward():
    def s(m):
        log = []

        class Cb(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                log.append("backward")
                queue_callback(m, lambda: log.append("callback"))
                return g * 2

        a = T(m, [1.0, 2.0], True)
        a.register_hook(lambda g: log.append("leaf"))
        Cb.apply(a).sum().backward()
        log.append("done")
        return log

    same(s)
