"""The 2017 ``ExecutionEngine.run_backward`` loop, run over *our* engine's nodes.

A reference point for ``bench_engine``: the smallest single-threaded Python
scheduler that can run a backward pass, written in the style of PyTorch's
first (2017, pure Python) ``torch/autograd/engine.py``:

- the dependency counts are computed first, by a walk from the root;
- ``ready`` is a plain list used as a stack (``ready.pop()``);
- ``not_ready`` maps a node to the list of gradients received so far, one
  slot per input of the node, until its last dependency is freed.

It calls the very same ``Node`` objects that ``engine.Engine`` runs
(``node.apply(list_of_grads)`` returns one gradient per ``node.next_edges()``
entry; ``AccumulateGrad`` nodes accumulate into the leaf's ``.grad``), so the
time difference between the two measures scheduling overhead, not the ops.

Departures from the 2017 code, each to keep the loop minimal or correct on our
nodes:

- dependencies are one ``int`` per node (as in today's engine.cpp) rather than
  a ``Counter`` of consumers per output;
- gradients are summed out of place (``old.data + new.data``, exactly what
  ``InputBuffer.add`` does with grad mode off) instead of ``add_``: our nodes
  may hand the same gradient tensor to several consumers (``AddBackward0``
  returns ``g`` twice), so an in-place add would corrupt them;
- a node that sends ``None`` to a valid edge still frees the dependency (the
  2017 code asserted this could not happen);
- nothing else of the modern engine: no priority queue, no locks, no
  GraphTask, no hooks, no ``validate_outputs``, no release of saved tensors
  (the graph is always kept, like ``retain_graph=True``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from autograd_tui.engine import no_grad, ones_like
from autograd_tui.engine.graph import Node
from autograd_tui.engine.tensor import Tensor


def compute_dependencies(root: Node) -> dict[Node, int]:
    """``_compute_dependencies``: for every node below ``root``, how many edges lead to it."""
    dependencies: dict[Node, int] = {}
    seen = {root}
    queue = [root]
    while queue:
        fn = queue.pop()
        for prev_fn, _input_nr in fn.next_edges():
            if prev_fn is None:
                continue
            dependencies[prev_fn] = dependencies.get(prev_fn, 0) + 1
            if prev_fn not in seen:
                seen.add(prev_fn)
                queue.append(prev_fn)
    return dependencies


def run_backward(variable: Tensor, grad: Tensor | None = None) -> None:
    """``ExecutionEngine.run_backward(variable, grad)``: accumulate into the leaves' ``.grad``."""
    root = variable.grad_fn
    if root is None:
        raise RuntimeError("run_backward needs a non-leaf tensor")
    if grad is None:
        grad = ones_like(variable)
    with no_grad():  # as the engine runs nodes (create_graph=False)
        root_grads: list[Tensor | None] = [None] * root.num_inputs()
        root_grads[variable.output_nr] = grad
        ready: list[tuple[Node, list[Tensor | None]]] = [(root, root_grads)]
        not_ready: dict[Node, list[Tensor | None]] = {}
        dependencies = compute_dependencies(root)

        while ready:
            fn, grads = ready.pop()
            grad_input = fn.apply(grads)
            for (prev_fn, input_nr), d_prev_fn in zip(fn.next_edges(), grad_input):
                if prev_fn is None:  # an input that does not require grad
                    continue
                count = dependencies[prev_fn] - 1
                dependencies[prev_fn] = count
                prev_grad = not_ready.get(prev_fn)
                if prev_grad is None:
                    prev_grad = [None] * prev_fn.num_inputs()
                    if count:
                        not_ready[prev_fn] = prev_grad
                elif not count:
                    del not_ready[prev_fn]
                if d_prev_fn is not None:
                    old = prev_grad[input_nr]
                    if old is None:
                        prev_grad[input_nr] = d_prev_fn
                    else:
                        prev_grad[input_nr] = Tensor(old.data + d_prev_fn.data,
                                                     device=old.device)
                if not count:
                    ready.append((prev_fn, prev_grad))
        if not_ready:
            raise RuntimeError("could not compute gradients for some functions")


def assert_same_grads(ours: Sequence[Tensor | None], base: Sequence[Tensor | None],
                      rtol: float = 1e-9, atol: float = 1e-12) -> float:
    """Raise unless the two lists of leaf gradients match; return the largest difference.

    The two schedulers sum a node's incoming gradients in different orders, so the
    results may differ by a few ulps: hence a tolerance, not equality."""
    if len(ours) != len(base):
        raise AssertionError(f"{len(ours)} leaf gradients vs {len(base)}")
    worst = 0.0
    for i, (x, y) in enumerate(zip(ours, base)):
        if x is None or y is None:
            raise AssertionError(f"leaf {i}: gradient missing (engine {x is not None}, "
                                 f"baseline {y is not None})")
        a, b = np.asarray(x.data), np.asarray(y.data)
        if a.shape != b.shape or not np.allclose(a, b, rtol=rtol, atol=atol):
            raise AssertionError(f"leaf {i}: engine grad {a} != baseline grad {b}")
        worst = max(worst, float(np.max(np.abs(a - b), initial=0.0)))
    return worst


def check_same_leaf_grads(loss: Tensor, leaves: Sequence[Tensor]) -> float:
    """Run ``loss.backward(retain_graph=True)`` (our engine, the default or the one in
    ``engine.use_engine``) and ``run_backward(loss)`` on the same graph; raise unless
    every leaf gets the same gradient; return the largest difference.  The leaves'
    ``.grad`` are reset before each run and left as ``run_backward`` set them."""
    for t in leaves:
        t.grad = None
    loss.backward(retain_graph=True)
    ours = [t.grad for t in leaves]
    for t in leaves:
        t.grad = None
    run_backward(loss)
    return assert_same_grads(ours, [t.grad for t in leaves])
