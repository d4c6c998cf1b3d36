"""Small graph programs used by the controller tests: each builds a forward
graph, runs backward, and returns the leaf gradients (as NumPy arrays)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from autograd_tui import engine
from autograd_tui.control import Signal, TrackedLock
from autograd_tui.engine import Function

F = engine.functional


def _grads(*leaves: engine.Tensor) -> list[np.ndarray]:
    return [leaf.grad.to("cpu").numpy().copy() for leaf in leaves]


def linear_relu() -> list[np.ndarray]:
    """The seeds' worked example: Linear1 feeds ReLU and Linear2, summed, indexed."""
    x = engine.tensor([[1.0]], requires_grad=True)
    w1 = engine.tensor([[0.5]], requires_grad=True)
    b1 = engine.tensor([0.1], requires_grad=True)
    w2 = engine.tensor([[-0.3]], requires_grad=True)
    b2 = engine.tensor([0.2], requires_grad=True)
    h = F.linear(x, w1, b1)
    out = (h.relu() + F.linear(h, w2, b2))[0].sum()
    out.backward()
    return _grads(x, w1, b1, w2, b2)


def diamond() -> list[np.ndarray]:
    x = engine.tensor([0.5, -1.0], requires_grad=True)
    e = x.exp()
    ((e * 2) + (e * x)).sum().backward()
    return _grads(x)


def chain(n: int = 20) -> list[np.ndarray]:
    x = engine.tensor(0.3, requires_grad=True)
    y = x
    for _ in range(n):
        y = (y * 1.1).tanh()
    y.backward()
    return _grads(x)


def fan_in(n: int = 5) -> list[np.ndarray]:
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    total = x * 1.0
    for k in range(n):
        total = total + x * (k + 1)
    total.sum().backward()
    return _grads(x)


def tied_leaves(n: int = 6) -> list[np.ndarray]:
    leaves = [engine.tensor(float(i + 1), requires_grad=True) for i in range(n)]
    prod = leaves[0]
    for leaf in leaves[1:]:
        prod = prod + leaf * leaves[0]
    prod.backward()
    return _grads(*leaves)


def multi_device() -> list[np.ndarray]:
    """cpu -> cuda:0 -> cuda:1 and back to cpu."""
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    w = engine.tensor([0.5, -0.25], requires_grad=True, device="cuda:1")
    y = (x * 2).to("cuda:0").exp().to("cuda:1")
    loss = (y * w).to("cpu").sum() + (x * x).sum()
    loss.backward()
    return _grads(x, w)


class MyFunction(Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class Reentrant(Function):
    """Each backward runs a nested backward of a fresh Reentrant, until ctx.x < 0."""

    @staticmethod
    def forward(ctx, x):
        with engine.enable_grad():
            ctx.x = engine.tensor(float(x.detach()), requires_grad=True, device=x.device) - 1
        return ctx.x.detach()

    @staticmethod
    def backward(ctx, g):
        if ctx.x < 0:
            return g
        with engine.enable_grad():
            Reentrant.apply(ctx.x).sum().backward()
        return g


def reentrant() -> list[np.ndarray]:
    a = MyFunction.apply(engine.tensor(6.0, requires_grad=True))
    v = engine.tensor(4.0, requires_grad=True)
    b = Reentrant.apply(v)
    (a * b).backward()
    return _grads(v)


def reentrant_on_device(depth: float = 4.0) -> list[np.ndarray]:
    """A reentrant chain whose nodes live on cuda:0 (run with a small depth limit
    to see pool threads)."""
    v = engine.tensor(depth, requires_grad=True)
    x = engine.tensor([1.0, 3.0], requires_grad=True)
    y = Reentrant.apply(v.to("cuda:0")).to("cpu")
    ((x * y).to("cuda:1").exp().to("cpu")).sum().backward()
    return _grads(v, x)




# --- programs that deadlock under one engine variant -------------------------------------
def reentrant_on_owner() -> list[np.ndarray]:
    """A Function on the CPU whose backward calls backward (deadlocks with reentrant='block')."""
    v = engine.tensor(1.0, requires_grad=True)
    Reentrant.apply(v).sum().backward()
    return _grads(v)


def device_last() -> list[np.ndarray]:
    """The last node (the only leaf's AccumulateGrad) runs on cuda:1, not on the owner."""
    w = engine.tensor([0.5, -0.25], requires_grad=True, device="cuda:1")
    (w.to("cuda:0").exp() * 3).to("cpu").sum().backward()
    return _grads(w)


def user_lock_across_backward() -> list[np.ndarray]:
    """PyTorch issues 18566/18568: a user lock held across a nested backward; the
    parent's other task B takes the same lock.  With depth priority the nested
    tasks run first; without it B jumps in, on the same thread, and waits on a
    lock its own thread holds."""
    lock = TrackedLock("user lock")
    p = engine.tensor(2.0, requires_grad=True)
    inner = (p * 3).sum()  # built first: the lowest sequence numbers

    class TakesLock(Function):  # B: middle sequence number
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            with lock:
                return g

    class HoldsLockAcrossBackward(Function):  # A: highest sequence number, runs first
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            with lock, engine.enable_grad():
                inner.backward()
            return g

    x = engine.tensor(1.0, requires_grad=True)
    b = TakesLock.apply(x)
    a = HoldsLockAcrossBackward.apply(x)
    (a + b).backward()
    return _grads(x, p)


def deep_reentrant(depth: float = 8.0) -> list[np.ndarray]:
    v = engine.tensor(depth, requires_grad=True)
    Reentrant.apply(v).sum().backward()
    return _grads(v)


def waits_on_device_thread() -> list[np.ndarray]:
    """A backward on the CPU waits for a signal that a node on cuda:0 sets, but that
    node needs the waiting node's output first."""
    sig = Signal("cuda:0 has run MulBackward0", set_by="cuda:0")

    class WaitsForDevice(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            sig.wait()
            return g

    x = engine.tensor([1.0, 2.0], requires_grad=True, device="cuda:0")
    y = x * 2
    y.grad_fn.register_prehook(lambda grads: sig.set())
    WaitsForDevice.apply(y.to("cpu")).sum().backward()
    return _grads(x)


def two_devices() -> list[np.ndarray]:
    """Two independent branches, one on cuda:0 and one on cuda:1, summed on the CPU."""
    x0 = engine.tensor([1.0, 2.0], requires_grad=True, device="cuda:0")
    x1 = engine.tensor([3.0, 4.0], requires_grad=True, device="cuda:1")
    loss = (x0 * 2).to("cpu").sum() + (x1 * 3).to("cpu").sum()
    loss.backward()
    return _grads(x0, x1)


GRAPHS: dict[str, Callable[[], Any]] = {
    "linear-relu": linear_relu,
    "diamond": diamond,
    "chain": chain,
    "fan-in": fan_in,
    "tied-leaves": tied_leaves,
    "multi-device": multi_device,
    "two-devices": two_devices,
    "reentrant": reentrant,
    "reentrant-on-device": reentrant_on_device,
}
