"""Hooks: tensor hooks, ``retain_grad``, node pre- and post-hooks, ``AccumulateGrad``'s
hooks, their order, handles, hooks under ``grad()``, and the checks on a hook's result
(as in ``python_hook.cpp``).

Each test runs one scenario on torch and on the engine (``same()``, in
semantics_helpers.py) and asserts the same outcome.
"""

from __future__ import annotations

import numpy as np
import pytest
from semantics_helpers import (
    Fn,
    T,
    queue_callback,
    restore_modes,  # noqa: F401 - autouse: grad and anomaly mode reset
    same,
    torch,
)

pytestmark = pytest.mark.timeout(60)


# --- hooks ------------------------------------------------------------------------------------
def test_leaf_tensor_hooks_order_and_modification():
    def s(m):
        log = []
        a = T(m, [1.0, 2.0], True)
        a.register_hook(lambda g: log.append(("h1", g.clone())))
        a.register_hook(lambda g: g * 10)
        a.register_hook(lambda g: log.append(("h3", g.clone())))
        (a * a).sum().backward()
        return [log, a.grad]

    same(s)


def test_non_leaf_tensor_hook_modifies_downstream():
    def s(m):
        log = []
        a = T(m, [1.0, 2.0], True)
        h = a * a
        h.register_hook(lambda g: log.append(("first", g.clone())) or g + 1)
        h.register_hook(lambda g: log.append(("second", g.clone())))
        h.exp().sum().backward()
        return [log, a.grad]

    same(s)


def test_retain_grad_sees_hook_modified_gradient():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        h = a * 2
        h.retain_grad()  # registered first, runs after the tensor hooks anyway
        h.register_hook(lambda g: g * 3)
        (h * h).sum().backward()
        return [h.grad, a.grad, h.retains_grad]

    same(s)


def test_retain_grad_accumulates_across_calls():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        h = a * 2
        h.retain_grad()
        y = (h * h).sum()
        y.backward(retain_graph=True)
        y.backward()
        return [h.grad, a.grad]

    same(s)


def test_retain_grad_on_leaf_is_noop():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        a.retain_grad()
        (a * a).sum().backward()
        return [a.grad, a.retains_grad]

    same(s)


def test_non_leaf_grad_is_none_without_retain_grad():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        h = a * 2
        (h * h).sum().backward()
        return [h.grad, h.retains_grad]

    same(s)


def test_node_prehook_and_posthook_modify():
    def s(m):
        log = []
        a = T(m, [1.0, 2.0], True)
        b = T(m, [3.0, 4.0], True)
        y = a * b
        node = y.grad_fn

        def pre(grad_outputs):
            log.append(("pre", list(grad_outputs)))
            return (grad_outputs[0] * 2,)

        def post(grad_inputs, grad_outputs):
            log.append(("post", list(grad_inputs), list(grad_outputs)))
            return (grad_inputs[0] + 100, grad_inputs[1])

        node.register_prehook(pre)
        node.register_hook(post)
        y.sum().backward()
        return [log, a.grad, b.grad]

    same(s)


def test_posthook_sees_none_for_input_not_requiring_grad():
    def s(m):
        log = []
        a = T(m, [1.0, 2.0], True)
        x = T(m, [3.0, 4.0])
        y = a * x
        y.grad_fn.register_hook(lambda gi, go: log.append([list(gi), list(go)]))
        y.sum().backward()
        return [log, a.grad]

    same(s)


def test_hook_ordering_tensor_pre_post_retain():
    def s(m):
        log = []
        a = T(m, [1.0, 2.0], True)
        h = a.exp()
        h2 = h * 3
        node = h.grad_fn
        node.register_hook(lambda gi, go: log.append("post"))
        node.register_prehook(lambda go: log.append("pre"))
        h.register_hook(lambda g: log.append("tensor1"))
        h.retain_grad()
        h.register_hook(lambda g: log.append("tensor2"))
        h2.register_hook(lambda g: log.append("h2 tensor"))
        h2.grad_fn.register_hook(lambda gi, go: log.append("h2 post"))
        a.register_hook(lambda g: log.append("leaf tensor"))
        acc = node.next_functions[0][0]
        acc.register_prehook(lambda go: log.append("acc pre"))
        acc.register_hook(lambda gi, go: log.append("acc post"))
        y = h2.sum()
        y.grad_fn.register_prehook(lambda go: queue_callback(m, lambda: log.append("cb")))
        y.backward()
        return [log, h.grad, a.grad]

    same(s)


def test_accumulate_grad_hooks_see_grads():
    def s(m):
        log = []
        a = T(m, [1.0, 2.0], True)
        y = (a * a).sum()
        acc = y.grad_fn.next_functions[0][0].next_functions[0][0]

        def pre(go):
            log.append(("pre", list(go)))
            return (go[0] * 0.5,)

        acc.register_prehook(pre)
        acc.register_hook(lambda gi, go: log.append(("post", list(gi), list(go))))
        y.backward()
        return [log, a.grad, acc.name()]

    same(s)


def test_handle_remove():
    def s(m):
        log = []
        a = T(m, [1.0, 2.0], True)
        h = a * 2
        y = (h * h).sum()
        t1 = a.register_hook(lambda g: log.append("leaf") or g * 2)
        t2 = h.register_hook(lambda g: log.append("nonleaf") or g * 2)
        p1 = h.grad_fn.register_prehook(lambda go: log.append("pre"))
        p2 = h.grad_fn.register_hook(lambda gi, go: log.append("post"))
        y.backward(retain_graph=True)
        first = a.grad.clone()
        for hd in (t1, t2, p1, p2):
            hd.remove()
        t1.remove()  # removing twice is harmless
        a.grad = None
        log.append("---")
        y.backward()
        return [log, first, a.grad]

    same(s)


def test_hooks_run_in_grad():
    def s(m):
        log = []
        a = T(m, [1.0, 2.0], True)
        h = a * 2
        h.register_hook(lambda g: log.append("h") or g * 5)
        a.register_hook(lambda g: log.append("a") or g * 7)
        (ga,) = m.autograd.grad((h * h).sum(), [a])
        return [log, ga, a.grad]

    same(s)


def test_hook_on_captured_non_leaf_in_grad():
    def s(m):
        log = []
        a = T(m, [1.0, 2.0], True)
        h = a * 2
        h.register_hook(lambda g: log.append("h") or g * 5)
        (gh,) = m.autograd.grad((h * h).sum(), [h])
        return [log, gh]

    same(s)


def test_register_hook_on_tensor_not_requiring_grad_error():
    def s(m):
        x = T(m, [1.0, 2.0])
        x.register_hook(lambda g: g)

    same(s, "raise")


def test_retain_grad_on_tensor_not_requiring_grad_error():
    def s(m):
        x = T(m, [1.0, 2.0])
        x.retain_grad()

    same(s, "raise")


def test_hook_with_create_graph_sees_graph():
    def s(m):
        log = []
        a = T(m, [1.0, 2.0], True)
        h = a * a
        h.register_hook(lambda g: log.append(g.requires_grad))
        (h * a).sum().backward(create_graph=True)
        return [log, a.grad]

    same(s)


def test_leaf_used_twice_hook_called_once_with_sum():
    def s(m):
        log = []
        a = T(m, [1.0, 2.0], True)
        a.register_hook(lambda g: log.append(g.clone()))
        (a * a + a.exp()).sum().backward()
        return [log, a.grad]

    same(s)


def test_non_leaf_used_twice_hook_called_once_with_sum():
    def s(m):
        log = []
        a = T(m, [1.0, 2.0], True)
        h = a * 2
        h.register_hook(lambda g: log.append(g.clone()))
        (h * h + h).sum().backward()
        return [log, a.grad]

    same(s)


def test_grad_wrt_non_leaf_skips_its_node_hooks_but_runs_tensor_hooks():
    def s(m):
        log = []
        a = T(m, [1.0, 2.0], True)
        h = a * 2
        h.register_hook(lambda g: log.append("tensor") or g * 3)
        h.grad_fn.register_prehook(lambda go: log.append("pre"))
        h.grad_fn.register_hook(lambda gi, go: log.append("post"))
        (gh,) = m.autograd.grad((h * h).sum(), [h])
        return [log, gh]

    same(s)


def test_grad_captures_value_before_tensor_hook_when_node_is_needed():
    def s(m):
        log = []
        a = T(m, [1.0, 2.0], True)
        h = a * 2
        h.register_hook(lambda g: log.append("tensor") or g * 3)
        gh, ga = m.autograd.grad((h * h).sum(), [h, a])
        return [log, gh, ga]

    same(s)


# --- hook results are checked as in python_hook.cpp -------------------------------------------
HOOK_RESULTS = {
    "tensor_size": lambda m, a, b, y: (a * 2).register_hook(lambda g: g.sum()),
    "leaf_size": lambda m, a, b, y: a.register_hook(lambda g: g.sum()),
    "tensor_dtype": lambda m, a, b, y: a.register_hook(
        lambda g: g.float() if m is torch else g.to(dtype=np.float32)),
    "tensor_not_a_tensor": lambda m, a, b, y: a.register_hook(lambda g: 3.0),
    "named_hook": lambda m, a, b, y: a.register_hook(named_bad_hook),
    "pre_not_tuple": lambda m, a, b, y: y.grad_fn.register_prehook(lambda go: go[0]),
    "pre_count": lambda m, a, b, y: y.grad_fn.register_prehook(lambda go: (go[0], go[0])),
    "pre_size": lambda m, a, b, y: y.grad_fn.register_prehook(lambda go: (go[0].sum(),)),
    "pre_same_tuple": lambda m, a, b, y: y.grad_fn.register_prehook(lambda go: go),
    "post_list": lambda m, a, b, y: y.grad_fn.register_hook(lambda gi, go: list(gi)),
    "post_count": lambda m, a, b, y: y.grad_fn.register_hook(lambda gi, go: (gi[0],)),
    "post_size": lambda m, a, b, y: y.grad_fn.register_hook(
        lambda gi, go: (gi[0].sum(), gi[1])),
    "post_none_ok": lambda m, a, b, y: y.grad_fn.register_hook(lambda gi, go: (None, gi[1])),
    "post_replace_none": lambda m, a, b, y: y.grad_fn.register_hook(
        lambda gi, go: (gi[0], gi[0])),
}


def named_bad_hook(g):
    return g.reshape(1, 2)


@pytest.mark.parametrize("name", sorted(HOOK_RESULTS))
def test_hook_result_checks(name):
    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = T(m, [3.0, 4.0], name != "post_replace_none")
        y = a * b
        HOOK_RESULTS[name](m, a, b, y)
        (y * (a * 2)).sum().backward()
        return [a.grad, b.grad]

    same(s, expect=None)


def test_hook_result_check_messages():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        a.register_hook(named_bad_hook)
        (a * a).sum().backward()

    assert same(s, "raise")[2] == "hook 'named_bad_hook' has changed the size of value"


def test_tensor_hooks_on_two_outputs_of_one_node_run_grouped_per_tensor():
    def s(m):
        class Two(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, g1, g2):
                return g1 * 2 + g2 * 3

        log = []
        a = T(m, [1.0, 2.0], True)
        u, v = Two.apply(a)
        u.register_hook(lambda g: log.append("u1"))
        v.register_hook(lambda g: log.append("v1"))
        u.register_hook(lambda g: log.append("u2") or g * 10)
        v.register_hook(lambda g: log.append("v2"))
        (u * v).sum().backward()
        return [log, a.grad]

    same(s)
