"""The custom-Function programs of a first course, run under torch 2.13 and the engine
(``same()``, semantics_helpers.py): undefined gradients through every node, ``ctx.mark_dirty``,
``once_differentiable``, the anomaly-mode warning of a failing node, and the version counter
a view or ``detach()`` shares with its base.  Values, node names, exception type and message,
warning category and text all come from the installed torch.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from semantics_helpers import (
    Fn,
    T,
    restore_modes,  # noqa: F401 - autouse: grad and anomaly mode reset
    same,
    set_anomaly,
    torch,
)

from autograd_tui import engine

pytestmark = pytest.mark.timeout(60)


def once(m: Any) -> Any:
    return (torch.autograd.function.once_differentiable if m is torch
            else engine.once_differentiable)


def none_back(m: Any) -> type:
    """A Function whose backward returns None for its (non-leaf) input."""

    class NoneBack(Fn(m)):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return None

    return NoneBack


def names(node: Any) -> list[Any]:
    """``node``'s name and, depth first, those of everything it leads to."""
    if node is None:
        return [None]
    return [node.name(), [names(n) for n, _ in node.next_functions]]


# --- undefined gradients ------------------------------------------------------------------
UNDEFINED_INTO = {
    "pow": lambda x: x ** 2,
    "exp": lambda x: x.exp(),
    "mul": lambda x: x * x,
    "div": lambda x: x / 3.0,
    "add_sub": lambda x: (x + 1.0) - x,
    "log": lambda x: (x + 1.0).log(),
    "sigmoid_tanh": lambda x: x.sigmoid().tanh(),
    "relu": lambda x: x.relu(),
    "view_ops": lambda x: x.reshape(2, 1).t().reshape(2),
    "index": lambda x: x[[1, 0]],
    "sum_expand": lambda x: x.sum().expand(2),
    "split_cat": lambda x: x.split(1)[0].expand(2),
}


@pytest.mark.parametrize("name", sorted(UNDEFINED_INTO))
def test_undefined_gradient_flows_through(name):
    f = UNDEFINED_INTO[name]

    def s(m):
        x = T(m, [1.0, 2.0], True)
        y = none_back(m).apply(f(x))
        y.sum().backward()
        (g,) = m.autograd.grad(none_back(m).apply(f(x)).sum(), x, allow_unused=True)
        return x.grad is None, g is None, names(y.grad_fn)

    assert same(s)[1][:2] == [True, True]


def test_undefined_beside_a_defined_gradient():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        a, b = x.split(1)
        y = none_back(m).apply(x ** 2) + x * 3 + none_back(m).apply(a).sum() + b.sum()
        y.sum().backward()
        return x.grad, names(y.grad_fn)

    same(s)


def test_custom_function_materializes_undefined_grads():
    """All incoming gradients undefined: a custom Function still runs, on zeros (PyTorch's
    ``materialize_grads``); ``set_materialize_grads(False)`` passes None; some undefined:
    zeros for those."""

    def s(m):
        seen: list[Any] = []

        class Mat(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                return x * 3

            @staticmethod
            def backward(ctx, g):
                seen.append(g)
                return g * 3

        class NoMat(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x * 3, x * 4

            @staticmethod
            def backward(ctx, g1, g2):
                seen.append([g1, g2])
                return None if g1 is None else g1 * 3

        class Mat2(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                return x * 3, x * 4

            @staticmethod
            def backward(ctx, g1, g2):
                seen.append([g1, g2])
                return g1 * 3 + g2 * 4

        x = T(m, [1.0, 2.0], True)
        none_back(m).apply(Mat.apply(x)).sum().backward()
        grads = [x.grad]
        for fn in (NoMat, Mat2):
            x.grad = None
            fn.apply(x)[0].sum().backward()
            grads.append(x.grad)
        return grads, seen

    same(s)


# --- ctx.mark_dirty -----------------------------------------------------------------------
def inc(m: Any) -> type:
    class Inc(Fn(m)):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    return Inc


def test_mark_dirty_returns_the_input_with_a_new_history():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = a.clone()
        out = inc(m).apply(b)
        facts = [out is b, b._version, b.is_leaf, names(b.grad_fn)]
        (out * 3).sum().backward()
        return facts, a.grad, b.grad_fn.name()

    same(s)


def test_mark_dirty_without_grad_bumps_the_version():
    def s(m):
        c = T(m, [1.0, 2.0])
        r = inc(m).apply(c)
        return r is c, c._version, c, r.requires_grad

    same(s)


def test_mark_dirty_on_a_leaf_that_requires_grad():
    same(lambda m: inc(m).apply(T(m, [1.0, 2.0], True)), "raise")


def test_mark_dirty_of_an_input_not_returned():
    def s(m):
        class Bad(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                x.add_(1)
                ctx.mark_dirty(x)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g

        return Bad.apply(T(m, [1.0, 2.0], True).clone())

    same(s, "raise")


def test_mark_dirty_makes_a_saved_tensor_stale():
    def s(m):
        d = T(m, [1.0, 2.0], True).clone()
        e = d * d
        inc(m).apply(d)
        e.sum().backward()

    same(s, "raise")


def _warnings(m: Any, scenario: Any) -> list[tuple[str, str]]:
    """The warnings ``scenario(m)`` gives: category and text, torch's "(Triggered
    internally at ...)" suffix cut."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scenario(m)
    return [(w.category.__name__, str(w.message).split(" (Triggered internally")[0])
            for w in caught]


def test_mark_dirty_of_a_tensor_not_an_input_warns():
    def s(m):
        class NotInput(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                y = x * 2
                ctx.mark_dirty(y)
                return y

            @staticmethod
            def backward(ctx, g):
                return g

        r = NotInput.apply(T(m, [1.0, 2.0], True).clone())
        r.sum().backward()

    got, exp = _warnings(engine, s), _warnings(torch, s)
    assert exp and got == exp


# --- once_differentiable ------------------------------------------------------------------
def once_fn(m: Any) -> type:
    class Once(Fn(m)):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        @once(m)
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x

    return Once


def test_once_differentiable_first_backward():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        (gx,) = m.autograd.grad((once_fn(m).apply(x) * x).sum(), x, create_graph=True)
        (plain,) = m.autograd.grad(once_fn(m).apply(x).sum(), x)
        return gx, gx.requires_grad, names(gx.grad_fn), plain, plain.requires_grad

    same(s)


def test_once_differentiable_refuses_a_double_backward():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        (gx,) = m.autograd.grad((once_fn(m).apply(x) * x).sum(), x, create_graph=True)
        gx.sum().backward()

    same(s, "raise")


# --- anomaly mode: the failing node's forward stack ---------------------------------------
def fail(m: Any) -> type:
    class Fail(Fn(m)):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")

    return Fail


def _anomaly_warnings(m: Any, forward_under_anomaly: bool) -> tuple[Any, ...]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x = T(m, [1.0, 2.0], True)
        if forward_under_anomaly:
            set_anomaly(m, True)
        y = fail(m).apply(x.exp())  # the forward call the warning points at
        set_anomaly(m, True)
        try:
            y.sum().backward()
        except ValueError as e:
            error = (type(e).__name__, str(e))
        finally:
            set_anomaly(m, False)
    texts = [(w.category.__name__, str(w.message).split(" (Triggered internally")[0])
             for w in caught if "Error detected" in str(w.message)]
    return error, texts


@pytest.mark.parametrize("forward_under_anomaly", [True, False])
def test_anomaly_mode_warns_with_the_forward_stack(forward_under_anomaly):
    got = _anomaly_warnings(engine, forward_under_anomaly)
    exp = _anomaly_warnings(torch, forward_under_anomaly)
    assert got[0] == exp[0]
    assert len(got[1]) == len(exp[1]) == 1
    (gcat, gtext), (ecat, etext) = got[1][0], exp[1][0]
    assert gcat == ecat
    if not forward_under_anomaly:
        assert gtext == etext
        return
    head = "Error detected in FailBackward. Traceback of forward call that caused the error:\n"
    assert etext.startswith(head) and gtext.startswith(head)
    # both point at the forward call in this file (torch prints the whole stack, the
    # engine its innermost frames)
    def caller(text: str) -> list[str]:
        lines = text[len(head):].splitlines()
        i = next(i for i, line in enumerate(lines) if "in _anomaly_warnings" in line)
        return lines[i:i + 2]

    assert caller(gtext) == caller(etext)
    assert "fail(m).apply(x.exp())" in caller(etext)[1]


def test_detect_anomaly_warns_when_entered():
    def s(m):
        with m.autograd.detect_anomaly():
            pass

    got, exp = _warnings(engine, s), _warnings(torch, s)
    assert exp and got == exp


# --- version counters shared by views and detach() ----------------------------------------
def test_detach_zero_then_backward_raises_the_inplace_error():
    def s(m):
        y = T(m, [1.0, 2.0], True) * 1
        z = y * y
        y.detach().zero_()
        z.sum().backward()

    same(s, "raise")


def test_views_share_the_version_counter():
    def s(m):
        y = T(m, [1.0, 2.0, 3.0, 4.0], True) * 1
        d = y.detach()
        d.add_(1)
        versions = [d._version, y._version]
        v, t = y.reshape(2, 2), y[1:]
        with m.no_grad():
            t.add_(1)
        views = [y.reshape(2, 2), y.unsqueeze(0), y[0], y.split(2)[1], y.reshape(2, 2).t(),
                 y.reshape(2, 2).transpose(0, 1), y.reshape(2, 2).permute(1, 0),
                 y.unsqueeze(0).squeeze(0)]
        copies = [y.clone(), y + 1, y.exp()]
        return (versions, y._version, v._version, [w._version for w in views],
                [c._version for c in copies], y)

    same(s)


def test_inplace_on_a_slice_makes_the_base_stale():
    def s(m):
        y = T(m, [1.0, 2.0, 3.0], True) * 1
        z = y * y
        with m.no_grad():
            y[1:].mul_(2)
        z.sum().backward()

    same(s, "raise")
