"""The programs ``bench_engine`` times: ``chain``, ``wide`` and ``random`` graphs of tiny
float64 vectors, each replayed with our tensors and with PyTorch's (the same nodes and
edges).  See ``bench_engine``'s docstring for what each shape stresses."""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from autograd_tui import engine

SEED = 20170907
SHAPES = ("chain", "wide", "random")

# Operand choice (see make_program)
P_CHAIN = 0.75   # first operand: the value just made (a chain) ...
WINDOW = 256     # ... else a random one among the last WINDOW values (a fork)
P_LEAF = 0.5     # second operand of an "avg": a random leaf, else any earlier value
P_MUL = 0.4      # share of "mul by a leaf" among the ops
LEAF_SHARE = 20  # one leaf per LEAF_SHARE nodes (random, chain)
BRANCH = 3       # muls per branch of the wide graph


# --- the graph -------------------------------------------------------------------------
@dataclass
class Program:
    """A forward computation to replay with either library.

    Values are numbered: ``0 .. n_leaves-1`` are the leaves, then one value per op.
    Ops: ``("avg", a, b)`` is ``(v[a] + v[b]) * 0.5`` (AddBackward0 + MulBackward0);
    ``("mul", a, leaf)`` is ``v[a] * v[leaf]`` (MulBackward0); ``("add", a, b)`` is
    ``v[a] + v[b]`` (AddBackward0; only in the final reduction).  The loss is
    ``v[-1].sum()`` (SumBackward0)."""

    leaves: np.ndarray  # (n_leaves, 2) float64
    ops: list[tuple[str, int, int]]
    n_nodes: int  # backward nodes: AccumulateGrads + op nodes + SumBackward0


def make_program(target: int, seed: int = SEED, shape: str = "random") -> Program:
    """About ``target`` backward nodes of ``shape`` (``SHAPES``); every value reaches the loss."""
    return _MAKERS[shape](target, seed)


def make_chain(target: int, seed: int = SEED) -> Program:
    """A chain: each op multiplies the value just made by a leaf (``MulBackward0``), so
    the backward pass is one long path (the ready queue holds a node or two) and each
    leaf's ``AccumulateGrad`` sums the gradients of about ``LEAF_SHARE`` muls."""
    rng = np.random.default_rng(seed)
    n_leaves = max(4, target // LEAF_SHARE)
    leaves = rng.uniform(0.9, 1.1, size=(n_leaves, 2))
    n_ops = target - n_leaves - 1  # + the loss's SumBackward0
    ops: list[tuple[str, int, int]] = []
    last = 0
    for i in range(n_ops):  # every leaf used (the first n_leaves ops), then random ones
        b = i if i < n_leaves else int(rng.integers(0, n_leaves))
        ops.append(("mul", last, b))
        last = n_leaves + i
    return Program(leaves, ops, n_leaves + n_ops + 1)


def make_wide(target: int, seed: int = SEED) -> Program:
    """Many short independent branches (a leaf times ``BRANCH`` leaves), summed by a
    chain of adds made after every branch: the backward pass walks the adds first (the
    highest sequence numbers) and leaves every branch's tail waiting in the ready queue
    (a queue as wide as the number of branches), then drains them."""
    rng = np.random.default_rng(seed)
    per = 1 + BRANCH + 1  # its leaf, its muls, its add into the sum (+ the loss's sum
    n_branches = max(2, target // per)  # - the first branch's add: per * n_branches)
    leaves = rng.uniform(0.9, 1.1, size=(n_branches, 2))
    ops: list[tuple[str, int, int]] = []
    n_values = n_branches
    tails = []
    for b in range(n_branches):
        v = b
        for k in range(BRANCH):
            ops.append(("mul", v, (b + k + 1) % n_branches))
            v = n_values
            n_values += 1
        tails.append(v)
    acc = tails[0]
    for v in tails[1:]:
        ops.append(("add", acc, v))
        acc = n_values
        n_values += 1
    return Program(leaves, ops, n_branches * (1 + BRANCH) + n_branches - 1 + 1)


def make_random(target: int, seed: int = SEED) -> Program:
    """A random DAG: chains with forks (``P_CHAIN``, ``WINDOW``), leaves reused."""
    rng = np.random.default_rng(seed)
    n_leaves = max(4, target // LEAF_SHARE)
    # Values near 1: long chains of products neither overflow nor underflow.
    leaves = rng.uniform(0.9, 1.1, size=(n_leaves, 2))
    ops: list[tuple[str, int, int]] = []
    unused = set(range(n_leaves))  # values not yet an operand
    n_values = n_leaves
    op_nodes = 0
    last = n_leaves - 1
    # total = n_leaves + op_nodes + (len(unused) - 1 adds) + 1 sum
    while n_leaves + op_nodes + len(unused) < target:
        if rng.random() < P_CHAIN:
            a = last
        else:
            a = int(rng.integers(max(0, n_values - WINDOW), n_values))
        if rng.random() < P_MUL:
            b = int(rng.integers(0, n_leaves))
            ops.append(("mul", a, b))
            op_nodes += 1
        else:
            if rng.random() < P_LEAF:
                b = int(rng.integers(0, n_leaves))
            else:
                b = int(rng.integers(0, n_values))
            ops.append(("avg", a, b))
            op_nodes += 2
        unused.discard(a)
        unused.discard(b)
        unused.add(n_values)
        last = n_values
        n_values += 1
    # Reduce what nobody used yet, so that every node is reachable from the loss.
    rest = sorted(unused)
    acc = rest[0]
    for v in rest[1:]:
        ops.append(("add", acc, v))
        acc = n_values
        n_values += 1
    if acc != n_values - 1:
        raise AssertionError("the last value must be the reduction")
    return Program(leaves, ops, n_leaves + op_nodes + len(rest) - 1 + 1)




_MAKERS: dict[str, Callable[[int, int], Program]] = {
    "chain": make_chain, "wide": make_wide, "random": make_random}


def replay(program: Program, leaf: Callable[[np.ndarray], Any]) -> tuple[Any, list[Any]]:
    """Run ``program`` forward; ``leaf(row)`` makes a leaf tensor that requires grad.
    The cyclic GC is off meanwhile (it would halve the build speed at 100k nodes)."""
    gc.disable()
    try:
        return _replay(program, leaf)
    finally:
        gc.enable()


def _replay(program: Program, leaf: Callable[[np.ndarray], Any]) -> tuple[Any, list[Any]]:
    leaves = [leaf(row) for row in program.leaves]
    v: list[Any] = list(leaves)
    append = v.append
    for kind, a, b in program.ops:
        if kind == "avg":
            append((v[a] + v[b]) * 0.5)
        elif kind == "mul":
            append(v[a] * v[b])
        else:
            append(v[a] + v[b])
    return v[-1].sum(), leaves


def build_ours(program: Program) -> tuple[engine.Tensor, list[engine.Tensor]]:
    return replay(program, lambda row: engine.tensor(row, requires_grad=True))


def build_torch(program: Program, torch: Any) -> tuple[Any, list[Any]]:
    return replay(program, lambda row: torch.tensor(row, dtype=torch.float64,
                                                    requires_grad=True))


def count_nodes(root: Any, edges: Callable[[Any], Sequence[tuple[Any, int]]]) -> int:
    seen = {root}
    stack = [root]
    while stack:
        for fn, _ in edges(stack.pop()):
            if fn is not None and fn not in seen:
                seen.add(fn)
                stack.append(fn)
    return len(seen)
