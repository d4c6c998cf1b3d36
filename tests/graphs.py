"""Graph programs used by the controller tests: each builds a forward graph, runs
backward, and returns the gradients (as NumPy arrays, on the CPU).

Most are built-in scenarios (``scenarios/*.py``) run with fixed parameters, so the
tests step through the graphs a person steps through in the app; only the graphs
that no scenario defines are written out here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from autograd_tui import engine, scenarios
from autograd_tui.scenarios.reentrant_deep import _reentrant


def _arrays(grads: dict[str, engine.Tensor]) -> list[np.ndarray]:
    return [g.to("cpu").numpy().copy() for g in grads.values()]


def from_scenario(name: str, **params: Any) -> Callable[[], list[np.ndarray]]:
    """The built-in scenario ``name`` with ``params`` over its defaults, as a program
    that returns the scenario's results in its order."""
    scenario = scenarios.get(name)
    scenario.resolve_params(params)  # an unknown parameter fails at import

    def program() -> list[np.ndarray]:
        return _arrays(scenario.run(params))

    program.__name__ = program.__qualname__ = name.replace("-", "_")
    program.__doc__ = f"scenarios/{scenario.source.rpartition('.')[2]}.py {params or ''}"
    return program


# --- graphs of the scenarios ----------------------------------------------------------------
#: The seeds' worked example: Linear1 feeds ReLU and Linear2, summed, indexed; results
#: input, linear1.weight, linear1.bias, linear2.weight, linear2.bias.
linear_relu = from_scenario("linear-relu")
diamond = from_scenario("diamond")
chain = from_scenario("chain", n=20)
fan_in = from_scenario("fan-in")
tied_leaves = from_scenario("tied-leaves")
#: cpu -> cuda:0 -> cuda:1 and back to cpu.
multi_device = from_scenario("multi-device")
#: MyFunction and a Reentrant chain from 4: PyTorch's test_reentrant_priority.
reentrant_priority = from_scenario("reentrant-priority", start=4)

# Programs that deadlock under one engine variant (the scenario's ENGINE) and complete
# under the default engine.
#: A Function on the CPU whose backward calls backward (deadlocks with reentrant="block").
reentrant_on_owner = from_scenario("deadlock-reentrant-block")
#: The last nodes (the leaves' AccumulateGrads) run on cuda:0 and cuda:1, not on the owner
#: (deadlocks with wake_owner=False).
device_last = from_scenario("deadlock-no-wakeup")
#: PyTorch issues 18566/18568: a user lock held across a nested backward; the parent's
#: other task takes the same lock (deadlocks with depth_priority=False).
user_lock_across_backward = from_scenario("deadlock-lock-steal")
#: A chain of 8 nested backwards (deadlocks with reentrant_pool_size=1, max_recursion_depth=2).
deep_reentrant = from_scenario("deadlock-pool-exhausted")
#: A backward on the CPU waits for a signal that a node on cuda:0 sets, but that node needs
#: the waiting node's output first (deadlocks under every engine).
waits_on_device_thread = from_scenario("deadlock-wait-on-device")


# --- graphs no scenario defines -------------------------------------------------------------
def _grads(*leaves: engine.Tensor) -> list[np.ndarray]:
    return [leaf.grad.to("cpu").numpy().copy() for leaf in leaves]


def reentrant_on_device(depth: float = 4.0) -> list[np.ndarray]:
    """reentrant-deep's chain with its nodes on cuda:0, beside a cpu -> cuda:1 branch (run
    with a small depth limit to see pool threads)."""
    v = engine.tensor(depth, requires_grad=True)
    x = engine.tensor([1.0, 3.0], requires_grad=True)
    y = _reentrant(engine, device="cuda:0").apply(v.to("cuda:0")).to("cpu")
    ((x * y).to("cuda:1").exp().to("cpu")).sum().backward()
    return _grads(v, x)


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
    "reentrant-priority": reentrant_priority,
    "reentrant-on-device": reentrant_on_device,
}
