"""``queue_callback``: final callbacks of a GraphTask, from hooks, from a reentrant
backward, raising ones, and the engine after a callback error.

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


def test_callback_queued_from_hook_runs_after_backward():
    def s(m):
        log = []
        a = T(m, [1.0, 2.0], True)
        h = a * 2

        def cb():
            log.append(("cb", a.grad.clone()))

        def hook(g):
            log.append("hook")
            queue_callback(m, cb)

        h.register_hook(hook)
        a.register_hook(lambda g: log.append("leaf"))
        (h * h).sum().backward()
        log.append("after")
        return log

    same(s)


def test_callback_queueing_another_callback():
    def s(m):
        log = []
        a = T(m, [1.0, 2.0], True)

        def cb2():
            log.append("cb2")

        def cb1():
            log.append("cb1")
            queue_callback(m, cb2)

        y = (a * a).sum()
        y.grad_fn.register_prehook(lambda go: queue_callback(m, cb1))
        y.backward()
        return log

    same(s)


def test_callbacks_run_once_per_backward():
    def s(m):
        log = []
        a = T(m, [1.0, 2.0], True)
        y = (a * a).sum()
        y.grad_fn.register_prehook(lambda go: queue_callback(m, lambda: log.append("cb")))
        y.backward(retain_graph=True)
        log.append("|")
        y.backward()
        return log

    same(s)


def test_callback_outside_backward_error():
    def s(m):
        queue_callback(m, lambda: None)

    exp = same(s, "raise")
    assert exp[2] == "Final callbacks can only be installed during backward pass."


def test_callback_raising_propagates():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y = (a * a).sum()

        def cb():
            raise KeyError("from callback")

        y.grad_fn.register_prehook(lambda go: queue_callback(m, cb))
        y.backward()

    same(s, "raise")


def test_callback_in_reentrant_backward_runs_with_the_inner_pass():
    def s(m):
        log = []

        class Inner(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * 1

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                with m.enable_grad():
                    xd = x.detach().requires_grad_()
                    y = (xd * xd).sum()
                    y.grad_fn.register_prehook(
                        lambda go: queue_callback(m, lambda: log.append("inner cb")))
                    log.append("inner start")
                    y.backward()
                    log.append("inner end")
                queue_callback(m, lambda: log.append("outer cb"))
                return g * xd.grad

        a = T(m, [1.0, 2.0], True)
        Inner.apply(a).sum().backward()
        log.append("done")
        return [log, a.grad]

    same(s)


def test_engine_usable_after_callback_error():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y = (a * a).sum()

        def cb():
            raise KeyError("cb")

        handle = y.grad_fn.register_prehook(lambda go: queue_callback(m, cb))
        try:
            y.backward(retain_graph=True)
        except KeyError as e:
            caught = str(e)
        handle.remove()
        a.grad = None
        y.backward()
        return [caught, a.grad]

    same(s)
