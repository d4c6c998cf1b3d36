"""In-place ops and the version counter, against PyTorch where it is installed: the
versions, the errors (word for word), the gradients through in-place ops, and what the
``inplace-version`` lesson shows (the saved tensor's versions in the node's details, the
error event where the check fails)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from autograd_tui import engine, scenarios
from autograd_tui.engine.ops.inplace import LEAF_INPLACE
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(60)

try:
    import torch
except ImportError:  # the optional "torch" extra
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed: these "
                                                       "compare with it")


def _error(fn: Any) -> str:
    with pytest.raises(RuntimeError) as info:
        fn()
    return str(info.value)


def test_each_inplace_op_bumps_the_version_and_out_of_place_ops_do_not() -> None:
    x = engine.tensor([1.0, 2.0, 3.0])
    assert x._version == 0
    y = x + 1.0
    assert x._version == 0 and y._version == 0
    for i, op in enumerate((lambda t: t.add_(1.0), lambda t: t.mul_(2.0),
                            lambda t: t.sub_(engine.tensor([1.0, 1.0, 1.0])),
                            lambda t: t.div_(2.0), lambda t: t.zero_(),
                            lambda t: t.fill_(4.0), lambda t: t.copy_(y)), start=1):
        assert op(x) is x
        assert x._version == i
    np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_inplace_writes_into_the_same_array() -> None:
    """Views of the array see the change, as views of a PyTorch tensor do."""
    x = engine.tensor([1.0, 2.0, 3.0])
    arr = x.data
    x.add_(1.0)
    assert x.data is arr
    np.testing.assert_array_equal(arr, [2.0, 3.0, 4.0])


def test_a_shape_that_does_not_fit_is_refused() -> None:
    x = engine.tensor([1.0, 2.0, 3.0])
    msg = _error(lambda: x.add_(engine.ones(2, 3)))
    assert "doesn't match the broadcast shape" in msg and x._version == 0


@needs_torch
@pytest.mark.parametrize("op", ["add_", "zero_", "mul_"])
def test_a_leaf_that_requires_grad_refuses_as_in_pytorch(op: str) -> None:
    args = () if op == "zero_" else (2.0,)
    ours = _error(lambda: getattr(engine.tensor([1.0], requires_grad=True), op)(*args))
    theirs = _error(lambda: getattr(torch.tensor([1.0], requires_grad=True), op)(*args))
    assert ours == theirs == LEAF_INPLACE


def test_a_leaf_may_change_in_place_under_no_grad() -> None:
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    with engine.no_grad():
        x.mul_(3.0)
    assert x._version == 1 and x.grad_fn is None and x.requires_grad


def _modified(mod: Any, case: str, dtype: Any) -> str:
    x = mod.tensor([0.5, 1.0, 2.0], requires_grad=True, dtype=dtype)
    if case == "output saved":  # exp saves its result
        e = x.exp()
        e.add_(1.0)
        return _error(lambda: e.sum().backward())
    if case == "input saved":  # sin saves its input, which has a history
        b = x * 2.0
        s = b.sin()
        b.add_(1.0)
        b.mul_(2.0)
        return _error(lambda: s.sum().backward())
    s = x.sin()  # a leaf, saved, modified under no_grad: no "which is output" part
    with mod.no_grad():
        x.mul_(2.0)
    return _error(lambda: s.sum().backward())


@needs_torch
@pytest.mark.parametrize("case", ["output saved", "input saved", "leaf saved"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_modified_saved_tensor_raises_pytorchs_message(case: str, dtype: str) -> None:
    ours = _modified(engine, case, getattr(np, dtype))
    theirs = _modified(torch, case, getattr(torch, dtype))
    assert ours == theirs


@needs_torch
@pytest.mark.parametrize("name", ["mul_", "div_", "add_", "copy_", "zero_"])
def test_gradients_through_inplace_ops_match_pytorch(name: str) -> None:
    """mul_ saves the tensor's value before the op (ATen's original self): no error, and
    the gradients of both operands are PyTorch's."""
    values = [np.array([0.5, 1.5, 2.0]), np.array([1.25, -0.5, 3.0])]

    def run(mod: Any) -> list[np.ndarray]:
        a, b = (mod.tensor(v, requires_grad=True) for v in values)
        t = a * 1.0
        out = t.zero_() if name == "zero_" else getattr(t, name)(b)
        (out * out).sum().backward()
        return [np.zeros(3) if g is None else g.detach().numpy() for g in (a.grad, b.grad)]

    for got, want in zip(run(engine), run(torch)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


@needs_torch
def test_a_double_backward_through_mul_reaches_the_value_before_the_op() -> None:
    """The value mul_ saves (original self) keeps its history, so a double backward
    differentiates through it, as PyTorch's does."""

    def run(mod: Any) -> np.ndarray:
        a = mod.tensor([0.5, 1.5, 2.0], requires_grad=True, dtype=mod.float64)
        t = a * 1.0
        t.mul_(a)
        (g,) = mod.autograd.grad((t * 1.0).sum(), [a], create_graph=True)
        g.sum().backward()
        return a.grad.detach().numpy()

    np.testing.assert_allclose(run(engine), run(torch), rtol=1e-12)


@needs_torch
@pytest.mark.parametrize("second", ["none", "div_"])
def test_mul_by_itself_in_place_raises_pytorchs_message(second: str) -> None:
    """``t.mul_(t)``: the other operand is ``t`` itself, saved as it is, so the op's own
    version bump makes its check fail."""

    def run(mod: Any) -> str:
        a = mod.tensor([0.5, 1.5, 2.0], requires_grad=True, dtype=mod.float64)
        t = a * 1.0
        t.mul_(t)
        if second == "div_":
            t.div_(a + 1.0)
        return _error(lambda: t.sum().backward())

    assert run(engine) == run(torch)


def test_the_node_shows_its_saved_tensors_versions_once_one_changed() -> None:
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    e = x.exp()
    assert e.grad_fn.node_meta() is None  # nothing changed: no event, no details
    e.add_(1.0)
    exp_node = e.grad_fn.next_functions[0][0]
    assert exp_node.name() == "ExpBackward0"
    meta = exp_node.node_meta()
    assert meta is not None
    assert meta["saved"] == ["result: Tensor[2] float64, saved at version 0, now version 1: "
                             "modified in place"]


def test_the_lesson_shows_the_versions_and_the_failing_check() -> None:
    from autograd_tui.app.render import node_details

    run = Run(scenarios.get("inplace-version"))
    try:
        run.run()
    finally:
        assert run.close()
    events = run.events
    meta = [e for e in events if e.kind == "node_meta"]
    assert len(meta) == 1 and meta[0].graph_task == 1
    error = next(e for e in events if e.kind == "error")
    assert error.node == meta[0].node  # the node whose saved tensor changed is the one failing
    assert "modified by an inplace operation" in error.data["message"]
    assert "is at version 1; expected version 0 instead" in error.data["message"]
    details = node_details(run.history.state_at(meta[0].seq), meta[0].node).plain
    assert "saved at version 0, now version 1" in details
    done = {e.graph_task: e.data["error"] for e in events if e.kind == "completion"}
    assert done[1] == error.data["message"] and done[2] is None  # GraphTask 2 completes
