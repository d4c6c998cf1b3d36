"""A student's training loop runs as under PyTorch: in-place ``+= -= *= /=`` (the same
object, the version counter, the leaf check), ``no_grad`` updates, ``.grad`` cleared with
``zero_()`` or ``None``, the checks on assigning ``.grad``, the warning on reading a
non-leaf's ``.grad``, ``retain_grad`` through an in-place op, ``engine.optim.SGD``, and the
``training-loop`` lesson: each compared with torch 2.13 on the same program."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from autograd_tui import engine, scenarios
from autograd_tui.engine.ops.inplace import LEAF_INPLACE
from autograd_tui.engine.tensor import NONLEAF_GRAD
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(60)

try:
    import torch
except ImportError:  # the optional "torch" extra
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed: these "
                                                       "compare with it")
F64: dict[str, Any] = {} if torch is None else {"dtype": torch.float64}


def _kw(mod: Any) -> dict[str, Any]:
    return F64 if mod is torch else {}


def _np(t: Any) -> np.ndarray:
    return np.asarray(t.detach().cpu().numpy() if t is not None else None)


def _raised(fn: Any) -> tuple[type, str]:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return type(e), str(e)
    raise AssertionError("did not raise")


# --- the 20-step loop ------------------------------------------------------------------
def _data(mod: Any) -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 3))
    y = x @ np.array([1.5, -2.0, 0.5]) + 0.3 + 0.01 * rng.standard_normal(16)
    return mod.tensor(x, **_kw(mod)), mod.tensor(y, **_kw(mod))


def _loop(mod: Any, how: str, steps: int = 20, lr: float = 0.1,
          **opt: Any) -> list[tuple[float, np.ndarray, float]]:
    """A student's loop, written once for both libraries; ``how`` says how it updates."""
    x, y = _data(mod)
    w = mod.tensor([0.0, 0.0, 0.0], requires_grad=True, **_kw(mod))
    b = mod.tensor(0.0, requires_grad=True, **_kw(mod))
    leaf_w = w
    optimizer = mod.optim.SGD([w, b], lr=lr, **opt) if how == "optim" else None
    out = []
    for _ in range(steps):
        if optimizer is not None:
            optimizer.zero_grad()
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        if optimizer is not None:
            optimizer.step()
        else:
            with mod.no_grad():
                w -= lr * w.grad
                b -= lr * b.grad
            if how == "zero_":
                w.grad.zero_()
                b.grad.zero_()
            else:
                w.grad = None
                b.grad = None
        assert w is leaf_w and w.is_leaf and w.requires_grad and w.grad_fn is None
        out.append((loss.item(), _np(w).copy(), b.item()))
    return out


@needs_torch
@pytest.mark.parametrize("how, opt", [
    ("none", {}), ("zero_", {}), ("optim", {}), ("optim", {"momentum": 0.9}),
    ("optim", {"momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
], ids=["grad=None", "grad.zero_()", "SGD", "SGD-momentum", "SGD-nesterov-wd"])
def test_twenty_sgd_steps_give_torchs_loss_and_weights_at_every_step(
        how: str, opt: dict[str, Any]) -> None:
    ours, theirs = _loop(engine, how, **opt), _loop(torch, how, **opt)
    assert len(ours) == len(theirs) == 20
    for step, ((lo, wo, bo), (lt, wt, bt)) in enumerate(zip(ours, theirs), start=1):
        # float64 both; NumPy and ATen sum in different orders, so the last bits may differ
        np.testing.assert_allclose(lo, lt, rtol=1e-12, atol=1e-14, err_msg=f"loss, step {step}")
        np.testing.assert_allclose(wo, wt, rtol=1e-12, atol=1e-14, err_msg=f"w, step {step}")
        np.testing.assert_allclose(bo, bt, rtol=1e-12, atol=1e-14, err_msg=f"b, step {step}")
    assert ours[-1][0] < ours[0][0] / 10  # it trains


def test_rebinding_instead_of_updating_in_place_trains_nothing_afterwards() -> None:
    """``w = w - lr * w.grad`` under ``no_grad`` makes a new tensor that needs no grad."""
    w = engine.tensor([1.0], requires_grad=True)
    (w * w).sum().backward()
    with engine.no_grad():
        w = w - 0.1 * w.grad
    assert not w.requires_grad and w.is_leaf


# --- the in-place operators --------------------------------------------------------------
OPS = {"+=": lambda a, o: a.__iadd__(o), "-=": lambda a, o: a.__isub__(o),
       "*=": lambda a, o: a.__imul__(o), "/=": lambda a, o: a.__itruediv__(o)}


def _augmented(op: str, a: Any, o: Any) -> Any:
    """``a op o`` as Python runs the statement (the name rebound to what it returns)."""
    if op == "+=":
        a += o
    elif op == "-=":
        a -= o
    elif op == "*=":
        a *= o
    else:
        a /= o
    return a


@needs_torch
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("other", ["scalar", "tensor"])
def test_an_augmented_assignment_under_no_grad_updates_the_leaf_in_place(
        op: str, other: str) -> None:
    def run(mod: Any) -> tuple[Any, ...]:
        w = mod.tensor([1.0, 2.0, 4.0], requires_grad=True, **_kw(mod))
        o = 0.5 if other == "scalar" else mod.tensor([2.0, 4.0, 8.0], **_kw(mod))
        alias = w
        with mod.no_grad():
            w = _augmented(op, w, o)
        return (w is alias, w.is_leaf, w.requires_grad, w.grad_fn, w._version,
                _np(w).tolist())

    assert run(engine) == run(torch)


@needs_torch
@pytest.mark.parametrize("op", list(OPS))
def test_an_augmented_assignment_on_a_leaf_that_requires_grad_is_refused(op: str) -> None:
    def run(mod: Any) -> tuple[Any, ...]:
        w = mod.tensor([1.0, 2.0], requires_grad=True, **_kw(mod))
        raised = _raised(lambda: _augmented(op, w, 2.0))
        return raised, w._version, _np(w).tolist()

    ours, theirs = run(engine), run(torch)
    assert ours == theirs
    assert ours[0] == (RuntimeError, LEAF_INPLACE)


@needs_torch
@pytest.mark.parametrize("op", list(OPS))
def test_an_augmented_assignment_on_a_non_leaf_is_recorded(op: str) -> None:
    def run(mod: Any) -> tuple[Any, ...]:
        x = mod.tensor([1.0, 2.0, 3.0], requires_grad=True, **_kw(mod))
        o = mod.tensor([0.5, 1.5, 2.5], requires_grad=True, **_kw(mod))
        y = x * x
        alias = y
        y = _augmented(op, y, o)
        y.sum().backward()
        return (y is alias, y.grad_fn.name(), y._version, _np(y).tolist(),
                _np(x.grad).tolist(), _np(o.grad).tolist())

    ours, theirs = run(engine), run(torch)
    assert ours[:3] == theirs[:3]
    for a, b in zip(ours[3:], theirs[3:]):
        np.testing.assert_allclose(a, b, rtol=1e-12)


@needs_torch
def test_an_augmented_assignment_without_grad_changes_every_alias() -> None:
    def run(mod: Any) -> list[Any]:
        t = mod.tensor([1.0, 2.0], **_kw(mod))
        alias = t
        t += 1
        t *= 3
        return [t is alias, t._version, _np(alias).tolist()]

    assert run(engine) == run(torch)


# --- clearing .grad ------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("clear", ["zero_", "None", "keep"])
def test_clearing_grad_between_two_backwards(clear: str) -> None:
    def run(mod: Any) -> tuple[Any, ...]:
        w = mod.tensor([1.0, -2.0], requires_grad=True, **_kw(mod))
        (w * w).sum().backward()
        first = w.grad
        if clear == "zero_":
            w.grad.zero_()
        elif clear == "None":
            w.grad = None
        (w * 3).sum().backward()
        return w.grad is first, _np(w.grad).tolist(), _np(first).tolist()

    assert run(engine) == run(torch)


# --- assigning .grad --------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("value", ["wrong size", "not a tensor", "right size"])
def test_assigning_grad_is_checked_as_pytorch_checks_it(value: str) -> None:
    def run(mod: Any) -> Any:
        x = mod.tensor([1.0, 2.0, 3.0], requires_grad=True, **_kw(mod))
        g = {"wrong size": lambda: mod.tensor([1.0, 1.0], **_kw(mod)),
             "not a tensor": lambda: 3,
             "right size": lambda: mod.tensor([1.0, 1.0, 1.0], **_kw(mod))}[value]()

        def assign() -> None:
            x.grad = g

        if value == "right size":
            assign()
            return _np(x.grad).tolist()
        return _raised(assign), x.grad

    ours, theirs = run(engine), run(torch)
    assert ours == theirs
    if value == "wrong size":
        assert ours[0] == (RuntimeError, "attempting to assign a gradient of size '[2]' to a "
                           "tensor of size '[3]'. Please ensure that the gradient and the "
                           "tensor are the same size")


# --- reading a non-leaf's .grad ------------------------------------------------------------
def _warnings_on_reading(mod: Any, retain: bool, leaf: bool,
                         assigned: bool = False) -> list[tuple[type, str]]:
    x = mod.tensor([1.0, 2.0], requires_grad=True, **_kw(mod))
    y = x if leaf else x * 2
    if retain:
        y.retain_grad()
    if assigned:
        y.grad = mod.tensor([1.0, 1.0], **_kw(mod))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert (y.grad is None) is not assigned
    # PyTorch's C++ warning ends with where ATen was built; the message is before it
    return [(w.category, str(w.message).split(" (Triggered internally at ")[0])
            for w in caught]


@needs_torch
@pytest.mark.parametrize("retain, leaf, assigned", [
    (False, False, False), (True, False, False), (False, True, False), (False, False, True),
], ids=["non-leaf", "retain_grad", "leaf", "non-leaf-assigned"])
def test_reading_grad_of_a_non_leaf_warns_as_pytorch_warns(retain: bool, leaf: bool,
                                                          assigned: bool) -> None:
    ours = _warnings_on_reading(engine, retain, leaf, assigned)
    assert ours == _warnings_on_reading(torch, retain, leaf, assigned)
    assert len(ours) == (0 if retain or leaf or assigned else 1)
    if ours:
        assert ours[0] == (UserWarning, NONLEAF_GRAD)


# --- retain_grad through an in-place op ----------------------------------------------------
@needs_torch
@pytest.mark.parametrize("inplace", ["mul_", "*=", "add_", "zero_", "copy_"])
def test_retain_grad_follows_the_tensor_through_an_in_place_op(inplace: str) -> None:
    def run(mod: Any) -> tuple[Any, ...]:
        x = mod.tensor([1.0, 2.0, 3.0], requires_grad=True, **_kw(mod))
        s = mod.tensor([4.0, 5.0, 6.0], requires_grad=True, **_kw(mod))
        a = x * 1
        a.retain_grad()
        if inplace == "mul_":
            a.mul_(2)
        elif inplace == "*=":
            a *= 2
        elif inplace == "add_":
            a.add_(s)
        elif inplace == "zero_":
            a.zero_()
        else:
            a.copy_(s)
        (a * a).sum().backward()
        return (_np(a.grad).tolist(), _np(x.grad).tolist(),
                None if s.grad is None else _np(s.grad).tolist())

    assert run(engine) == run(torch)


# --- optim.SGD -----------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("set_to_none", [True, False, None])
def test_sgd_zero_grad(set_to_none: bool | None) -> None:
    def run(mod: Any) -> Any:
        w = mod.tensor([1.0, 2.0], requires_grad=True, **_kw(mod))
        opt = mod.optim.SGD([w], lr=0.5)
        (w * w).sum().backward()
        opt.step()
        if set_to_none is None:
            opt.zero_grad()
        else:
            opt.zero_grad(set_to_none=set_to_none)
        return _np(w).tolist(), w._version, None if w.grad is None else _np(w.grad).tolist()

    assert run(engine) == run(torch)


@needs_torch
def test_sgd_refuses_what_pytorch_refuses() -> None:
    for kw in ({"lr": -1.0}, {"lr": 0.1, "momentum": -0.5}, {"lr": 0.1, "nesterov": True}):
        def make(mod: Any, kw: dict[str, Any] = kw) -> Any:
            return mod.optim.SGD([mod.tensor([1.0], requires_grad=True)], **kw)

        assert _raised(lambda: make(engine))[0] is _raised(lambda: make(torch))[0] is ValueError


# --- the lesson ----------------------------------------------------------------------------
@needs_torch
def test_the_lessons_loss_per_step_is_torchs() -> None:
    scenario = scenarios.get("training-loop")
    params = dict(scenario.resolve_params(), steps=6)
    run = Run(scenario, params)
    try:
        run.run()
    finally:
        assert run.close()
    assert run.finished and run.error is None
    assert sum(e.kind == "completion" for e in run.events) == 6  # one backward per step
    ours = run.result
    assert scenario.torch_program is not None
    theirs = scenario.torch_program(torch, **params)
    assert ours is not None and set(ours) == set(theirs)
    losses = [ours[f"loss at step {k}"].item() for k in range(1, 7)]
    for k in range(1, 7):
        np.testing.assert_allclose(losses[k - 1], theirs[f"loss at step {k}"].item(),
                                   rtol=1e-12, atol=1e-14, err_msg=f"step {k}")
    for name in ("w", "b"):
        np.testing.assert_allclose(ours[name].item(), theirs[name].item(), rtol=1e-12)
    assert all(a > b for a, b in zip(losses, losses[1:]))  # the loss goes down
