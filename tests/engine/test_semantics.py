"""Autograd semantics, checked against PyTorch itself.

Each scenario is a function of the library module (``engine`` or ``torch``,
torch tensors in float64).  ``same(scenario)`` runs it with both libraries and
asserts the same outcome: the same values (tensors compared with NumPy), or
the same exception type and message.  The expected values and messages thus
come from the installed torch, not from constants in this file.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

import numpy as np
import pytest

from autograd_tui import engine

pytestmark = pytest.mark.timeout(60)

torch = pytest.importorskip("torch")

LIBS = (engine, torch)


# --- helpers ----------------------------------------------------------------------------
def T(m: Any, data: Any, requires_grad: bool = False) -> Any:  # noqa: N802
    """A float64 tensor of library ``m``."""
    if m is torch:
        return torch.tensor(data, dtype=torch.float64, requires_grad=requires_grad)
    return engine.tensor(np.asarray(data, dtype=np.float64), requires_grad=requires_grad)


def queue_callback(m: Any, fn: Any) -> None:
    if m is torch:
        torch.autograd.Variable._execution_engine.queue_callback(fn)
    else:
        engine.queue_callback(fn)


def set_anomaly(m: Any, flag: bool) -> None:
    (torch.autograd.set_detect_anomaly if m is torch else engine.set_detect_anomaly)(flag)


def is_anomaly(m: Any) -> bool:
    return (torch.is_anomaly_enabled if m is torch else engine.is_anomaly_enabled)()


def Fn(m: Any) -> type:  # noqa: N802
    """The custom-Function base class of ``m``."""
    return m.autograd.Function


def _norm_str(s: str) -> str:
    return s.replace("torch::autograd::", "")


def norm(x: Any) -> Any:
    """Tensors -> float64 arrays, node names normalised, containers recursively."""
    if isinstance(x, (torch.Tensor, engine.Tensor)):
        t = x.detach()
        arr = t.numpy() if isinstance(t, torch.Tensor) else t.numpy()
        return ("tensor", np.asarray(arr))
    if isinstance(x, str):
        return _norm_str(x)
    if isinstance(x, (list, tuple)):
        return [norm(v) for v in x]
    if isinstance(x, dict):
        return {k: norm(v) for k, v in x.items()}
    if isinstance(x, (engine.Node, torch.autograd.graph.Node)):
        return ("node", _norm_str(x.name()))
    return x


def outcome(scenario: Any, m: Any) -> tuple[Any, ...]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ("ok", norm(scenario(m)))
        except Exception as e:  # noqa: BLE001 - compared below
            return ("raise", type(e).__name__, _norm_str(str(e)))


def assert_same(got: Any, exp: Any, path: str = "result") -> None:
    if isinstance(exp, tuple) and len(exp) == 2 and exp[0] == "tensor":
        assert isinstance(got, tuple) and got[0] == "tensor", f"{path}: {got!r} is not a tensor"
        assert got[1].shape == exp[1].shape, f"{path}: shape {got[1].shape} != {exp[1].shape}"
        np.testing.assert_allclose(got[1], exp[1], rtol=1e-10, atol=1e-12, err_msg=path)
    elif isinstance(exp, list):
        assert isinstance(got, list) and len(got) == len(exp), f"{path}: {got!r} != {exp!r}"
        for i, (g, e) in enumerate(zip(got, exp)):
            assert_same(g, e, f"{path}[{i}]")
    elif isinstance(exp, dict):
        assert isinstance(got, dict) and got.keys() == exp.keys(), f"{path}: {got!r} != {exp!r}"
        for k in exp:
            assert_same(got[k], exp[k], f"{path}[{k!r}]")
    elif isinstance(exp, float) and not isinstance(exp, bool):
        assert got == pytest.approx(exp, rel=1e-10, abs=1e-12), f"{path}: {got!r} != {exp!r}"
    else:
        assert got == exp, f"{path}: {got!r} != {exp!r}"


def same(scenario: Any, expect: str | None = "ok") -> tuple[Any, ...]:
    """Run ``scenario`` on torch and on our engine; assert the same outcome.

    ``expect`` ("ok" or "raise") checks that the scenario does in torch what the test
    says it does; None leaves the outcome to torch."""
    exp = outcome(scenario, torch)
    if expect is not None:
        assert exp[0] == expect, f"torch itself: {exp!r}"
    got = outcome(scenario, engine)
    if exp[0] == "raise":
        assert got[0] == "raise", f"torch raised {exp[1]}: {exp[2]!r}; engine returned {got!r}"
        assert got[1:] == exp[1:]
    else:
        assert got[0] == "ok", f"engine raised {got[1]}: {got[2]!r}; torch returned {exp[1]!r}"
        assert_same(got[1], exp[1])
    return exp


@pytest.fixture(autouse=True)
def _restore_modes():
    """A failing scenario must not leave grad mode or anomaly mode changed."""
    yield
    for m in LIBS:
        m.set_grad_enabled(True)
        set_anomaly(m, False)


# --- backward(inputs=...) ------------------------------------------------------------------
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


# --- autograd.grad ---------------------------------------------------------------------------
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


# --- roots: GraphRoot, duplicates, argument errors --------------------------------------------
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


# --- retain_graph -------------------------------------------------------------------------
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


# --- double backward ---------------------------------------------------------------------
UNARY = {
    "cube": lambda x: x ** 3,
    "pow_half": lambda x: x ** 0.5,
    "exp": lambda x: x.exp(),
    "log": lambda x: x.log(),
    "sigmoid": lambda x: x.sigmoid(),
    "tanh": lambda x: x.tanh(),
    "relu": lambda x: x.relu() * x,
    "reciprocal": lambda x: 1 / x,
    "mean": lambda x: x.mean() * x,
    "sum_dim": lambda x: x.reshape(2, 2).sum(0) ** 2,
    "mean_dim": lambda x: x.reshape(2, 2).mean(1, keepdim=True) * x.reshape(2, 2),
    "rpow": lambda x: 2 ** x,
    "sub_neg": lambda x: (1 - x) * (-x) - x,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_double_backward_unary(name):
    f = UNARY[name]

    def s(m):
        x = T(m, [0.5, 1.5, 2.0, 3.0], True)
        y = f(x).sum()
        (g,) = m.autograd.grad(y, [x], create_graph=True)
        (g2,) = m.autograd.grad(g.sum(), [x], allow_unused=True)
        return [g, g2, g.requires_grad]

    same(s)


BINARY = {
    "mul": lambda a, b: a * b * a,
    "div": lambda a, b: a / b,
    "add_sub": lambda a, b: (a + b) * (a - b),
    "pow_tensor": lambda a, b: a ** b,
    "matmul": lambda a, b: a.reshape(2, 2) @ b.reshape(2, 2) @ a.reshape(2, 2),
    "matvec": lambda a, b: (a.reshape(2, 2) @ b[:2]) * b[2:],
    "dot": lambda a, b: (a @ b) * a,
    "broadcast": lambda a, b: a.reshape(2, 2) * b[:2] * a[0],
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_double_backward_binary(name):
    f = BINARY[name]

    def s(m):
        a = T(m, [0.5, 1.5, 2.0, 3.0], True)
        b = T(m, [1.5, -0.5, 2.5, 1.0], True)
        y = f(a, b).sum()
        ga, gb = m.autograd.grad(y, [a, b], create_graph=True)
        # a Hessian-vector product through both first-order gradients
        hv = m.autograd.grad((ga * gb).sum() + (ga ** 2).sum(), [a, b], allow_unused=True)
        return [ga, gb, *hv]

    same(s)


def test_backward_create_graph_then_backward_of_grad():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        (x ** 3).sum().backward(create_graph=True)
        gx = x.grad
        req = gx.requires_grad
        x.grad = None
        gx.sum().backward()
        return [gx, req, x.grad]

    same(s)


def test_backward_create_graph_accumulates_with_graph():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        (x ** 2).sum().backward(create_graph=True)
        (x ** 3).sum().backward(create_graph=True)
        gx = x.grad
        name = gx.grad_fn.name() if gx.grad_fn is not None else None
        (g2,) = m.autograd.grad(gx.sum(), [x])
        return [gx, g2, name is not None]

    same(s)


def test_third_order():
    def s(m):
        x = T(m, [0.5, 1.0, 2.0], True)
        y = (x ** 4 * x.exp()).sum()
        (g1,) = m.autograd.grad(y, x, create_graph=True)
        (g2,) = m.autograd.grad(g1.sum(), x, create_graph=True)
        (g3,) = m.autograd.grad(g2.sum(), x)
        return [g1, g2, g3]

    same(s)


def test_grad_create_graph_used_in_second_grad_mixed():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        w = T(m, [0.5, -1.0], True)
        y = (w * x.tanh()).sum()
        (gx,) = m.autograd.grad(y, [x], create_graph=True)
        penalty = (gx ** 2).sum()
        gw, gx2 = m.autograd.grad(penalty, [w, x])
        return [gx, gw, gx2]

    same(s)


def test_double_backward_of_linear_is_zero_second_order():
    def s(m):
        x = T(m, [1.0, 2.0], True)
        (g,) = m.autograd.grad((x * 3).sum(), [x], create_graph=True)
        return [g, g.requires_grad]

    same(s)


# --- hooks ----------------------------------------------------------------------------------
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


# --- queue_callback ---------------------------------------------------------------------------
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


# --- exceptions inside the backward -------------------------------------------------------------
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


# --- anomaly mode ------------------------------------------------------------------------------
NAN_GRAPHS = {
    "pow_half_at_zero": lambda m, x: (x ** 0.5 * 0).sum(),
    "log_at_zero": lambda m, x: (x.log() * 0).sum(),
    "div_zero_zero": lambda m, x: (x / x).sum(),
}


@pytest.mark.parametrize("name", sorted(NAN_GRAPHS))
def test_anomaly_mode_nan(name):
    f = NAN_GRAPHS[name]

    def s(m):
        x = T(m, [0.0, 1.0], True)
        set_anomaly(m, True)
        try:
            f(m, x).backward()
        finally:
            set_anomaly(m, False)

    exp = same(s, "raise")
    assert "returned nan values in its" in exp[2]
    assert not engine.is_anomaly_enabled()


def test_anomaly_mode_off_gives_nan_grads():
    def s(m):
        x = T(m, [0.0, 1.0], True)
        (x ** 0.5 * 0).sum().backward()
        return [np.isnan(x.grad.detach().numpy()).tolist()]

    same(s)


def test_anomaly_mode_nan_from_custom_function():
    def s(m):
        class NanBack(Fn(m)):
            @staticmethod
            def forward(ctx, x):
                return x.clone()

            @staticmethod
            def backward(ctx, g):
                return g * float("nan")

        x = T(m, [1.0, 2.0], True)
        set_anomaly(m, True)
        try:
            NanBack.apply(x).sum().backward()
        finally:
            set_anomaly(m, False)

    same(s, "raise")


def test_anomaly_mode_engine_usable_after():
    def s(m):
        x = T(m, [0.0, 1.0], True)
        set_anomaly(m, True)
        try:
            try:
                (x ** 0.5 * 0).sum().backward()
            except RuntimeError:
                pass
            (x * x).sum().backward()
        finally:
            set_anomaly(m, False)
        return [x.grad, is_anomaly(m)]

    same(s)


def test_detect_anomaly_context_manager():
    for m in LIBS:
        dm = torch.autograd.detect_anomaly if m is torch else engine.detect_anomaly
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with dm():
                assert is_anomaly(m)
        assert not is_anomaly(m)


# --- custom Function ---------------------------------------------------------------------------
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


# --- grad mode and tensor flags -------------------------------------------------------------------
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


# --- hook results are checked as in python_hook.cpp ---------------------------------------------
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


# --- more custom Function and ctx semantics ----------------------------------------------------
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


def test_anomaly_mode_nan_in_grad():
    def s(m):
        x = T(m, [0.0, 4.0], True)
        set_anomaly(m, True)
        try:
            m.autograd.grad((x.log() * 0).sum(), [x])
        finally:
            set_anomaly(m, False)

    assert same(s, "raise")[2] == "Function 'LogBackward0' returned nan values in its 0th output."


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


# --- more grad()/backward() details -----------------------------------------------------------
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


def test_backward_dict_inputs():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        b = T(m, [3.0, 4.0], True)
        (a * b).sum().backward(inputs={"a": a})
        return [a.grad, b.grad]

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


def test_backward_inputs_duplicated_leaf():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        (a * a).sum().backward(inputs=[a, a])
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


def test_backward_inputs_non_leaf_retain_grad_sees_hook():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        h = a * 2
        h.register_hook(lambda g: g * 3)
        (h * h).sum().backward(inputs=[h])
        return [h.grad, a.grad]

    same(s)


def test_grad_of_leaf_root_wrt_itself():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        return list(m.autograd.grad(a, [a], grad_outputs=T(m, [5.0, 6.0])))

    same(s)


# --- grad-mode and anomaly-mode helpers, as torch has them ------------------------------------
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


def test_set_detect_anomaly_as_context_manager():
    def s(m):
        out = [is_anomaly(m)]
        with m.autograd.set_detect_anomaly(True):
            out.append(is_anomaly(m))
            x = T(m, [0.0, 1.0], True)
            try:
                (x.log() * 0).sum().backward()
            except RuntimeError as e:
                out.append(str(e))
        out.append(is_anomaly(m))
        return out

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


def test_anomaly_mode_without_nan_check():
    def s(m):
        x = T(m, [0.0, 1.0], True)
        m.autograd.set_detect_anomaly(True, check_nan=False)
        try:
            (x ** 0.5 * 0).sum().backward()
        finally:
            m.autograd.set_detect_anomaly(False)
        return [np.isnan(x.grad.detach().numpy()).tolist()]

    same(s)


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


def test_grad_retain_graph_then_backward():
    def s(m):
        a = T(m, [1.0, 2.0], True)
        y = (a.exp() * a).sum()
        (g,) = m.autograd.grad(y, [a], retain_graph=True)
        y.backward()
        return [g, a.grad]

    same(s)


# --- inf and NaN: computed silently, as torch does -------------------------------------------
_INF = float("inf")
_SPECIAL = {
    "mul by zero": lambda m, x, w: (x * T(m, [0.0, 0.0, 1.0])).sum(),
    "add opposite infinities": lambda m, x, w: (x + T(m, [-_INF, 1.0, 1.0])).sum(),
    "sub": lambda m, x, w: (x - x * 2).sum(),
    "div by zero": lambda m, x, w: (x / T(m, [0.0, 0.0, 0.0])).sum(),
    "matmul": lambda m, x, w: (x.reshape(1, 3) @ w).sum(),
    "sum and mean": lambda m, x, w: x.sum() * 0 + x.mean(),
    "exp overflow": lambda m, x, w: (x * 1000).exp().sum(),
    "log of zero and negatives": lambda m, x, w: (x - 1).log().sum(),
    "pow": lambda m, x, w: ((x - 1) ** -1).sum(),
    "tanh sigmoid relu": lambda m, x, w: (x.tanh() + x.sigmoid() + x.relu()).sum(),
}


@pytest.mark.parametrize("name", list(_SPECIAL))
def test_inf_and_nan_compute_silently_as_in_torch(name: str) -> None:
    """NumPy warns on inf * 0, 0 / 0, overflow, log(0), ...; torch does not, and returns
    inf or NaN: the engine neither, forward or backward, and gives torch's values."""
    def scenario(m: Any) -> Any:
        x = T(m, [_INF, 1.0, 0.0], requires_grad=True)
        w = T(m, [[0.0], [_INF], [2.0]], requires_grad=True)
        y = _SPECIAL[name](m, x, w)
        y.backward()
        return [y, x.grad, w.grad if w.grad is not None else "none"]

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning fails the test
        got = norm(scenario(engine))
    exp = norm(scenario(torch))
    assert_same(got, exp)
