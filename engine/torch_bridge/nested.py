"""For check-order: the order of the nested (reentrant) backward passes, in both engines.

A reentrant checkpoint (``checkpoint(..., use_reentrant=True)``) runs its block's
backward inside its node: ``CheckpointFunction.backward`` (``torch/utils/checkpoint.py``)
recomputes the block and calls ``torch.autograd.backward`` on the graph it has just made,
a nested ``GraphTask`` (``Engine::execute`` called from a worker thread: reentrant).
No pre-hook can be put on that graph before the backward starts: it does not exist yet.
So, while PyTorch's backward runs, ``recording_nested`` wraps ``torch.autograd.backward``
and ``grad`` (the names that code looks up at the call): each call first puts an
order-recording pre-hook on every node of the graph it was given, then runs PyTorch's.
Under our engine the same calls are GraphTasks 2, 3, ... (``bridge.reentrant_calls``):
``our_nested`` reads their orders from the events.

The calls the bridge leaves to PyTorch's engine (``create_graph``, batched or materialized
grads: ``bridge._backward``/``_grad``) are not recorded, as ours has no GraphTask for them.
A nested graph is made anew by each backward's recompute, so its sequence numbers differ
between the two runs by a constant: a node is compared by its name and its sequence
number relative to its GraphTask's smallest (``AccumulateGrad``'s UINT64_MAX as it is).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

from ..graph import UINT64_MAX
from .convert import torch_module, traced

Order = list[tuple[str, int]]


@contextlib.contextmanager
def recording_nested(skip: Iterable[Any] = ()) -> Iterator[list[Order]]:
    """While the block runs (PyTorch's backward), each ``torch.autograd.backward``/``grad``
    call's order, in call order; ``skip``: nodes already recorded (the outer graph's).
    ``torch.autograd``'s functions are the originals again afterwards, however it ends."""
    ag = torch_module().autograd
    orig_backward, orig_grad = ag.backward, ag.grad
    hooked = {id(fn) for fn in skip}
    orders: list[Order] = []

    def recorded(roots: Any, call: Any) -> Any:
        order: Order = []
        orders.append(order)
        handles = []
        for fn in _graph(roots):
            if id(fn) not in hooked:
                handles.append(fn.register_prehook(
                    lambda _, fn=fn: order.append((type(fn).__name__, int(fn._sequence_nr())))))
        try:
            return call()
        finally:
            for h in handles:
                h.remove()

    def backward(tensors: Any, grad_tensors: Any = None, retain_graph: Any = None,
                 create_graph: bool = False, grad_variables: Any = None, inputs: Any = None
                 ) -> Any:
        def call() -> Any:
            return orig_backward(tensors, grad_tensors, retain_graph, create_graph,
                                 grad_variables, inputs)

        return call() if create_graph or traced(tensors) else recorded(tensors, call)

    def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: Any = None,
             create_graph: bool = False, only_inputs: bool = True, allow_unused: Any = None,
             is_grads_batched: bool = False, materialize_grads: bool = False) -> Any:
        def call() -> Any:
            return orig_grad(outputs, inputs, grad_outputs, retain_graph, create_graph,
                             only_inputs, allow_unused, is_grads_batched, materialize_grads)

        mine = not (create_graph or is_grads_batched or materialize_grads or traced(outputs))
        return recorded(outputs, call) if mine else call()

    ag.backward, ag.grad = backward, grad
    try:
        yield orders
    finally:
        ag.backward, ag.grad = orig_backward, orig_grad


def _graph(roots: Any) -> list[Any]:
    """Every node reachable from ``roots``' ``grad_fn`` through ``next_functions``."""
    torch = torch_module()
    todo = [t.grad_fn for t in ([roots] if isinstance(roots, torch.Tensor) else roots or ())
            if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    seen: dict[int, Any] = {}
    while todo:
        fn = todo.pop()
        if fn is None or id(fn) in seen:
            continue
        seen[id(fn)] = fn
        todo.extend(nxt for nxt, _ in fn.next_functions)
    return list(seen.values())


def our_nested(events: Iterable[Any]) -> list[Order]:
    """Our GraphTasks after the first (the nested ones, in the order they were made): each
    one's nodes in the order they started, by name and sequence number."""
    seqs: dict[int, tuple[str, int]] = {}
    orders: dict[int, Order] = {}
    for e in events:
        if e.kind == "dependencies_computed":
            seqs.update((n.id, (n.name, n.seq)) for n in e.nodes)
        elif e.kind == "graph_task_created" and e.graph_task != 1:
            orders[e.graph_task] = []
        elif e.kind == "node_start" and e.graph_task in orders and \
                seqs[e.node][0] != "GraphRoot":  # PyTorch's has none for one root
            orders[e.graph_task].append(seqs[e.node])
    return [orders[k] for k in sorted(orders)]


def _relative(order: Order) -> Order:
    base = min((s for _, s in order if s < UINT64_MAX), default=0)
    return [(n, s - base if s < UINT64_MAX else s) for n, s in order]


def nested_difference(theirs: list[Order], ours: list[Order]) -> str | None:
    """The first difference between the nested backward passes' orders, saying which one
    (``GraphTask 2``: the first nested, as our engine numbers them), or None."""
    if len(theirs) != len(ours):
        return (f"nested backward passes: PyTorch ran {len(theirs)}, ours {len(ours)} "
                "(GraphTask 2 on)")
    for k, (t, o) in enumerate(zip(theirs, ours), start=2):
        rt, ro = _relative(t), _relative(o)
        for i, (a, b, sa, sb) in enumerate(zip(rt, ro, t, o)):
            if a != b:
                return (f"node {i + 1} of GraphTask {k} (a nested backward): PyTorch ran "
                        f"{a[0]} (sequence_nr {sa[1]}), ours ran {b[0]} (sequence_nr {sb[1]})")
        if len(t) != len(o):
            return f"GraphTask {k} (a nested backward): PyTorch ran {len(t)} nodes, ours {len(o)}"
    return None
