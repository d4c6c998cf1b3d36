"""A wide ready queue: w leaves, each times a constant, summed left to right.

Every product is made before the first sum, so every ``MulBackward0`` has a lower
sequence number than every ``AddBackward0``: the backward runs the whole chain of
sums first, pushing one ``MulBackward0`` per sum, and the CPU queue holds about w
tasks before the first of them pops.  ``bench/bench_scale.py`` runs it at w = 250,
1,000 and 4,000 to show that watching a run costs the same per event however wide
the queue.
"""

from __future__ import annotations

from typing import Any

from autograd_tui import engine
from autograd_tui.scenarios import Param, ScenarioError

NAME = "wide-queue"
TITLE = "A wide ready queue (benchmark)"
SUMMARY = "w leaves times a constant, summed left to right: the queue holds about w tasks"
THREADS = ("cpu (owner)",)
EXPECT = "complete"
ENGINE: dict[str, Any] = {}
PARAMS = {"w": Param(250, "number of leaves (the queue's width)")}
NOTES = """\
# A wide ready queue

`sum(leaf_i * 2.0)`, with every product made first: the backward pushes every
`MulBackward0` while it runs the chain of `AddBackward0`s, so the ready queue
holds about w tasks.  A benchmark, not a lesson.
"""


def program(w: int) -> dict[str, engine.Tensor]:
    if w < 2:
        raise ScenarioError(f"{__name__}: parameter 'w' must be at least 2, not {w}")
    leaves = [engine.tensor(float(i), requires_grad=True) for i in range(w)]
    products = [leaf * 2.0 for leaf in leaves]
    total = products[0]
    for p in products[1:]:
        total = total + p
    total.backward()
    return {"x0.grad": leaves[0].grad}
