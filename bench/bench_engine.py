"""Backward-pass overhead per node: our engine vs. PyTorch (and a 2017-style loop).

For each graph shape and size (about 1,000 / 10,000 / 100,000 backward nodes) a
seeded generator writes one *program* over 2-element float64 vectors, made of
cheap ops only (``AddBackward0``, ``MulBackward0``):

- ``chain``: each op multiplies the value just made by a leaf: one long path,
  a ready queue of a node or two, leaves whose ``AccumulateGrad`` sums many
  gradients;
- ``wide``: many independent short branches (a leaf times three leaves), summed
  by a chain of adds: the backward pass leaves every branch's tail waiting in
  the ready queue (a queue as wide as the number of branches);
- ``random``: a random DAG mixing long chains with fan-out in the forward pass
  (= gradient fan-in in the backward pass, accumulated in input buffers) and
  leaves reused many times.

The program is replayed once with ``engine`` tensors and once with ``torch``
tensors, so both graphs have exactly the same nodes and edges (checked).  The
goal: ours at most ``GOAL`` (2) times torch at every shape and size.  The graphs
are freed on a thread with a deep stack (``free_deep``).

Timed, per shape and size, in one run:

1. ours: ``loss.backward(retain_graph=True)`` on a fresh ``engine.Engine()``
   with no observer (``with engine.use_engine(eng):``, closed afterwards);
2. 2017: ``bench.baseline_2017.run_backward(loss)``, the 2017 pure-Python
   ``ExecutionEngine`` loop calling the *same* Node objects' ``apply()``;
3. torch: ``loss.backward(retain_graph=True)`` on the torch copy.

The graphs are built once per size, outside the timed region, and reused by
every repetition (``retain_graph=True``; the baseline never frees anything).
Leaf ``.grad`` are reset to ``None`` between calls, outside the timed region.
The three contenders take turns, repetition by repetition, so that a busy
machine slows them alike; the cyclic GC is collected once per size and off
while the repetitions run (as in ``timeit``).  Each call is timed by the wall
clock and by the calling thread's CPU time (all three run the whole backward on
the calling thread).  The tables report the best repetition, then the median.
In the first repetition (1), (2) and (3) must give the same leaf gradients.

Then ours is profiled (cProfile, one backward on the 10k graph) and the top
functions by own time are printed.
"""

from __future__ import annotations

import contextlib
import cProfile
import functools
import gc
import os
import pstats
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from autograd_tui import engine
from autograd_tui.engine.sync import start_thread
from bench import _cli, baseline_2017
from bench.engine_graphs import (  # noqa: F401  (re-exported: the programs' API)
    SEED,
    SHAPES,
    Program,
    build_ours,
    build_torch,
    count_nodes,
    make_program,
)

SIZES = (1_000, 10_000, 100_000)
# Repetitions per size: a 1k backward takes milliseconds, so more of them cost under a
# second and give the best-of a fair chance on a busy machine (a time slice lost to
# another process lands in a repetition).  About 50 s in all on an idle machine.
REPS = {1_000: 31, 10_000: 6, 100_000: 2}
PROFILE_SIZE = 10_000
PROFILE_TOP = 15
GOAL = 2.0  # ours <= GOAL x torch, at every size and shape

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- timing -----------------------------------------------------------------------------
def timed(fn: Callable[[], Any], wall: list[int], cpu: list[int]) -> None:
    """Run ``fn()`` once; append its wall-clock and its thread CPU time (ns) to ``wall``
    and ``cpu``.  Call it inside ``no_gc()``."""
    c0 = time.thread_time_ns()
    t0 = time.perf_counter_ns()
    fn()
    t1 = time.perf_counter_ns()
    c1 = time.thread_time_ns()
    wall.append(t1 - t0)
    cpu.append(c1 - c0)


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """The cyclic GC collected once, then off (as in ``timeit``): a full collection
    walks the whole 100k-node graph and would land in a random repetition."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def reset(leaves: Sequence[Any]) -> None:
    for t in leaves:
        t.grad = None


@dataclass
class Row:
    shape: str
    size: int
    nodes: int
    reps: int
    ours: list[int]
    base: list[int]
    ours_cpu: list[int]
    base_cpu: list[int]
    torch: list[int] | None
    torch_cpu: list[int] | None
    diff_base: float
    diff_torch: float | None


def measure(shape: str, size: int, torch: Any) -> Row:
    """Time the three contenders on one program, repetition by repetition in turn."""
    program = make_program(size, shape=shape)
    reps = REPS[size]
    loss, leaves = build_ours(program)
    nodes = count_nodes(loss.grad_fn, lambda n: n.next_edges())
    if nodes != program.n_nodes:
        raise AssertionError(f"expected {program.n_nodes} nodes, built {nodes}")
    tloss: Any = None
    tleaves: list[Any] = []
    if torch is not None:
        tloss, tleaves = build_torch(program, torch)
        tnodes = count_nodes(tloss.grad_fn, lambda n: n.next_functions)
        if tnodes != nodes:
            raise AssertionError(f"torch graph has {tnodes} nodes, ours {nodes}")

    row = Row(shape, size, nodes, reps, [], [], [], [], [] if torch is not None else None,
              [] if torch is not None else None, float("nan"), None)
    eng = engine.Engine()
    try:
        with engine.use_engine(eng), no_gc():
            assert not eng._observers, "ours is timed with no observer attached"
            run_ours = functools.partial(loss.backward, retain_graph=True)
            run_base = functools.partial(baseline_2017.run_backward, loss)
            run_torch = (functools.partial(tloss.backward, retain_graph=True)
                         if tloss is not None else None)
            for rep in range(reps):
                reset(leaves)
                timed(run_ours, row.ours, row.ours_cpu)
                ours_grads = [t.grad for t in leaves]
                reset(leaves)
                timed(run_base, row.base, row.base_cpu)
                if rep == 0:  # the leaf gradients must agree (checked once per size)
                    row.diff_base = baseline_2017.assert_same_grads(
                        ours_grads, [t.grad for t in leaves])
                reset(leaves)
                if run_torch is not None:
                    reset(tleaves)
                    timed(run_torch, row.torch, row.torch_cpu)
                    if rep == 0:
                        row.diff_torch = baseline_2017.assert_same_grads(
                            ours_grads, [engine.tensor(t.grad.numpy()) for t in tleaves])
                    reset(tleaves)
    finally:
        eng.close()
    graphs = [loss, leaves, tloss, tleaves, run_ours, run_base, run_torch]
    del loss, leaves, tloss, tleaves, run_ours, run_base, run_torch
    free_deep(graphs)
    return row


def free_deep(graphs: list[Any]) -> None:
    """Drop the last references to ``graphs`` on a thread with the engine's deep stack
    (``sync.start_thread``): freeing a 100,000-node torch chain recurses in C++, one
    frame per node, and overflows the main thread's 8 MiB stack (a segfault)."""
    thread = threading.Thread(target=graphs.clear, name="bench free", daemon=True)
    start_thread(thread)
    thread.join()
    gc.collect()


# --- report -----------------------------------------------------------------------------
def per_node(times: Sequence[int] | None, nodes: int, how: Callable[[Sequence[int]], float]
             ) -> float | None:
    return how(times) / nodes if times else None


def fmt(x: float | None, spec: str) -> str:
    return "n/a" if x is None else format(x, spec)


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _table(rows: Sequence[Row], clock: str, pick: Callable[[Sequence[int]], float]) -> bool:
    """One table; True if every shape and size meets the goal (ours <= GOAL x torch)."""
    head = (f"{'shape':>6} {'size':>8} {'nodes':>8} {'reps':>4} {'ours':>7} {'2017 loop':>9} "
            f"{'torch':>7} {'ours/2017':>9} {'ours/torch':>10} {f'goal<={GOAL:g}x':>8}")
    print(head)
    print("-" * len(head))
    all_met = True
    for r in rows:
        cpu = clock == "cpu"
        o = per_node(r.ours_cpu if cpu else r.ours, r.nodes, pick)
        b = per_node(r.base_cpu if cpu else r.base, r.nodes, pick)
        t = per_node(r.torch_cpu if cpu else r.torch, r.nodes, pick)
        rt = ratio(o, t)
        met = rt is not None and rt <= GOAL
        all_met = all_met and met
        print(f"{r.shape:>6} {r.size:>8,} {r.nodes:>8,} {r.reps:>4} {fmt(o, '7.0f')} "
              f"{fmt(b, '9.0f')} {fmt(t, '7.0f')} {fmt(ratio(o, b), '8.2f')}x "
              f"{fmt(rt, '9.2f')}x {'met' if met else 'NOT met':>8}")
    return all_met


def print_table(rows: Sequence[Row]) -> bool:
    """The tables; True if the goal is met on the best wall-clock times."""
    print("backward time per node, ns: best of reps, wall clock "
          "(graph built once, retain_graph=True)")
    met = _table(rows, "wall", min)
    print()
    print("the same, median of reps, wall clock")
    _table(rows, "wall", statistics.median)
    print()
    print("the same, best of reps, CPU time of the calling thread "
          "(less sensitive to a busy machine)")
    met_cpu = _table(rows, "cpu", min)
    print()
    print("leaf gradients, max |difference| from ours:")
    for r in rows:
        print(f"{r.shape:>6} {r.size:>8,}  2017 loop {r.diff_base:.1e}  "
              f"torch {fmt(r.diff_torch, '.1e')}")
    print()
    verdict = {True: "MET", False: "NOT MET"}
    print(f"goal: ours <= {GOAL:g}x torch at every size and shape: {verdict[met]} "
          f"(best wall clock); {verdict[met_cpu]} (best CPU time)")
    return met


def _where(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    if filename == "~":  # a builtin
        return name
    path = os.path.relpath(filename, REPO) if filename.startswith(REPO) else \
        os.path.basename(filename)
    return f"{path}:{line}({name})"


def profile(size: int | None = None, top: int | None = None) -> None:
    """cProfile one backward of ours; print the top functions by own time."""
    size = PROFILE_SIZE if size is None else size
    top = PROFILE_TOP if top is None else top
    program = make_program(size)
    loss, leaves = build_ours(program)
    nodes = program.n_nodes
    eng = engine.Engine()
    try:
        with engine.use_engine(eng):
            plain: list[int] = []
            with no_gc():
                timed(functools.partial(loss.backward, retain_graph=True), plain, [])
                reset(leaves)
                prof = cProfile.Profile()
                prof.runcall(loss.backward, retain_graph=True)
    finally:
        eng.close()
    stats = pstats.Stats(prof)
    total = stats.total_tt  # type: ignore[attr-defined]
    entries = sorted(stats.stats.items(), key=lambda kv: (-kv[1][2], _where(kv[0])))  # type: ignore[attr-defined]
    print(f"cProfile of ours, one loss.backward(retain_graph=True), {nodes:,} nodes: "
          f"{total * 1e3:.0f} ms under the profiler ({total * 1e9 / nodes:.0f} ns/node), "
          f"{plain[0] / 1e6:.0f} ms without")
    print("(the profiler's cost is per call: functions called many times per node, like a "
          "dict lookup, are over-weighted)")
    print(f"top {top} by own time (tottime):")
    head = (f"{'ncalls':>9} {'calls/node':>10} {'tottime ms':>10} {'%':>5} {'ns/node':>8} "
            f"{'cumtime ms':>10}  function")
    print(head)
    print("-" * len(head))
    for key, (_cc, nc, tt, ct, _callers) in entries[:top]:
        print(f"{nc:>9,} {nc / nodes:>10.2f} {tt * 1e3:>10.1f} {100 * tt / total:>5.1f} "
              f"{tt * 1e9 / nodes:>8.0f} {ct * 1e3:>10.1f}  {_where(key)}")


def main(argv: list[str] | None = None) -> None:
    _cli.parser("python -m bench.bench_engine", __doc__,
                "about a minute (the 100,000-node graphs dominate)").parse_args(
        sys.argv[1:] if argv is None else argv)
    try:
        import torch
    except ImportError:  # the table still has ours and the 2017 loop
        torch = None
        print("torch is not installed: the torch column is n/a")
    print(f"seed {SEED}; 2-element float64 values; ops: (a+b)*0.5, a*leaf; "
          f"{'torch ' + torch.__version__ if torch is not None else 'no torch'}")
    t0 = time.perf_counter()
    rows = [measure(shape, size, torch) for shape in SHAPES for size in SIZES]
    print_table(rows)
    print()
    profile()
    print()
    print(f"bench_engine: {time.perf_counter() - t0:.1f} s in all")


if __name__ == "__main__":
    main()
