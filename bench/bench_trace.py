"""Recordings at a million events: write speed, size, load time and seek time.

The recording is made cheaply but from a real run.  One backward pass of a
generated graph (a few parallel branches of ``AddBackward0``/``MulBackward0``
over 2-element float64 vectors, one branch on ``cuda:0``, forks and merges so
that gradients accumulate in input buffers and wait in ``not_ready``) runs
free-running on a fresh ``engine.Engine()`` with a ``ListObserver``: about
50,000 real events from two threads.  That stream is then *replicated* until it
has at least 1,000,000 events: copy ``r`` gets fresh ``seq`` numbers (contiguous),
fresh GraphTask ids and fresh node ids (offset by ``r`` times the largest id,
inside ``data`` too: roots, dependencies, nodes, ``order``, ``from_node``), as if
the program had run backward on a new graph ``r`` times, one after the other,
like a training loop.  The stream folds validly (``engine.state.fold`` is run
over all of it below and would raise ``StateError`` otherwise).

Measured (one process, cyclic GC on as in the app unless said otherwise; CPU time
of the process, since the machine may be shared, with wall clock beside it):

1. write: ``engine.trace.save`` of all 1M events, plain and ``.gz``: events/s;
2. size: bytes per event of the whole file (header and footer included), plain
   and gzip;
3. load: ``engine.trace.load`` with its defaults (parse, check, checksum, fold
   into a ``History`` with a snapshot every 256 events) at 100,000 and 200,000
   events, and once with the GC off; parsing and checking only
   (``validate_state=False``) at 200,000 events; the fold alone
   (``engine.state.fold``, no snapshots) over all 1M events.  A full load of 1M
   events is *not* run: its snapshots grow with the square of the length (about
   50 GB here); the table gives the projection from the two measured sizes;
4. seek: ``History.state_at(i)`` for 1,000 random ``i`` on the 200,000-event
   load (also after ``gc.freeze()``), and at 1M from its two parts measured at
   1M: ``fold(events[k:i], snapshot)`` = one copy of the state plus 128 (median
   case) or 255 (worst case) folds.

A calibration line (``json.loads`` of one typical event line) helps compare
machines.  Goals (printed pass/fail): median seek well under (= under half of)
50 ms, max seek under 100 ms, load under 2 s per million events.  When a goal is
missed, ``trace.load`` is profiled (cProfile, GC off) at 100,000 events, the top
functions are printed, and a diagnosis with proposed fixes.
"""

from __future__ import annotations

import contextlib
import cProfile
import gc
import json
import os
import pstats
import random
import resource
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

import engine
from engine import trace
from engine.events import Event, ListObserver, make_event
from engine.state import EngineState, History, fold

SEED = 20240601
TARGET_EVENTS = 1_000_000
BASE_OPS = 4_000  # forward ops of the real run: about 47,000 events
BRANCHES = 4  # parallel branches in the generated graph (the last on cuda:0)
P_MERGE = 0.05  # share of steps that merge two branches (then fork them again)
FULL_LOAD_SIZES = (100_000, 200_000)  # the full load grows with N^2: not at 1M
PROFILE_TOP = 14
SEEKS = 1_000
GOAL_SEEK_MEDIAN_MS = 50.0
GOAL_SEEK_MAX_MS = 100.0
GOAL_LOAD_S_PER_M = 2.0
SNAPSHOT_EVERY = 256  # History's default

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STATE_DICTS = ("nodes", "node_states", "dependencies", "queues", "buffers", "not_ready",
               "graph_tasks", "threads", "leaf_grads", "outputs")


# --- the recording --------------------------------------------------------------------------
def build_graph(n_ops: int, seed: int = SEED) -> engine.Tensor:
    """A forward graph of ``n_ops`` ops over ``BRANCHES`` parallel branches; the loss."""
    rng = np.random.default_rng(seed)
    n_leaves = max(4, n_ops // 20)
    leaves = [engine.tensor(rng.uniform(0.9, 1.1, 2), requires_grad=True)
              for _ in range(n_leaves)]
    br = [leaves[i % n_leaves] * 1.0 for i in range(BRANCHES)]
    br[-1] = br[-1].to("cuda:0")
    for _ in range(n_ops):
        i = int(rng.integers(0, BRANCHES))
        leaf = leaves[int(rng.integers(0, n_leaves))]
        if br[i].device != "cpu":
            leaf = leaf.to(br[i].device)
        if rng.random() < P_MERGE:  # merge j into i, then fork: j continues from i's value
            j = (i + 1 + int(rng.integers(0, BRANCHES - 1))) % BRANCHES
            other = br[j] if br[j].device == br[i].device else br[j].to(br[i].device)
            y = br[i] + other
            br[i] = y
            br[j] = (y if y.device == br[j].device else y.to(br[j].device)) * 0.5
        elif rng.random() < 0.5:
            br[i] = br[i] * leaf
        else:
            br[i] = br[i] + leaf
    total = br[0]
    for b in br[1:]:
        total = total + b.to("cpu")
    return total.sum()


def record_base(n_ops: int = BASE_OPS) -> list[Event]:
    """One real backward pass, free-running, every event collected (sorted by seq)."""
    loss = build_graph(n_ops)
    obs = ListObserver()
    with engine.Engine() as eng, engine.use_engine(eng):
        eng.add_observer(obs)
        loss.backward()
    return sorted(obs.events, key=lambda e: e.seq)


def _shift(kind: str, d: dict[str, Any], g: int, n: int) -> dict[str, Any]:
    """``data`` of an event with GraphTask ids shifted by ``g`` and node ids by ``n``."""
    def node(x: int | None) -> int | None:
        return None if x is None else x + n

    if kind == "graph_task_created":
        return {**d, "roots": [r + n for r in d["roots"]], "graph_root": d["graph_root"] + n}
    if kind == "dependencies_computed":
        return {**d, "dependencies": [[a + n, c] for a, c in d["dependencies"]],
                "nodes": [{**x, "id": x["id"] + n,
                           "next": [[node(a), b] for a, b in x["next"]]}
                          for x in d["nodes"]]}
    if kind == "exec_info":
        return {**d, "needed": [a + n for a in d["needed"]],
                "captures": [[a + n, b, c] for a, b, c in d["captures"]]}
    if kind == "push":
        return {**d, "order": [[None if a is None else a + g, node(b), c, s]
                               for a, b, c, s in d["order"]]}
    if kind in ("dependency_decrement", "buffer_accumulate"):
        return {**d, "from_node": d["from_node"] + n}
    if kind == "reentrant_handoff" and d.get("parent_graph_task") is not None:
        return {**d, "parent_graph_task": d["parent_graph_task"] + g}
    if kind in ("thread_wait", "thread_wake") and d.get("on") == "future":
        return {**d, "target": f"GraphTask {int(d['target'].split()[-1]) + g}"}
    return d


_SHIFTED = {"graph_task_created", "dependencies_computed", "exec_info", "push",
            "dependency_decrement", "buffer_accumulate", "reentrant_handoff", "thread_wait",
            "thread_wake"}


def replicate(base: Sequence[Event], target: int) -> tuple[list[Event], int]:
    """Copies of ``base`` one after the other, renumbered, until ``target`` events;
    returns the events and the number of copies.  Thread starts appear once (the
    threads live on), thread exits once at the very end."""
    body = [e for e in base if e.kind != "thread_exit"]
    tail = [e for e in base if e.kind == "thread_exit"]
    max_gt = max(e.graph_task or 0 for e in body)
    max_node = max(e.node or 0 for e in body)
    for e in body:
        if e.kind == "dependencies_computed":
            max_node = max(max_node, *(x["id"] for x in e.data["nodes"]))
    out: list[Event] = []
    copies = 0
    while len(out) + len(tail) < target:
        g, n = copies * max_gt, copies * max_node
        for e in body:
            if copies and e.kind == "thread_start":
                continue
            gt = None if e.graph_task is None else e.graph_task + g
            node = None if e.node is None else e.node + n
            if copies and e.kind in _SHIFTED:
                out.append(make_event(len(out), e.kind, e.thread, gt, node, e.queue,
                                      _shift(e.kind, e.data, g, n)))
            else:
                out.append(msgspec.structs.replace(e, seq=len(out), graph_task=gt, node=node))
        copies += 1
    for e in tail:
        out.append(msgspec.structs.replace(e, seq=len(out)))
    return out, copies


def header_for(events: Sequence[Event]) -> dict[str, Any]:
    return trace.make_header(scenario=None, params={"base_ops": BASE_OPS},
                             engine_options={}, policy=None, seed=SEED, serialized=False,
                             events=events)


# --- measuring ------------------------------------------------------------------------------
class Timing:
    """Wall-clock and CPU time (this process) of one call."""

    def __init__(self, wall: float, cpu: float) -> None:
        self.wall, self.cpu = wall, cpu

    def per_m(self, n: int) -> str:
        """Seconds per million events: CPU (wall)."""
        return f"{self.cpu / n * 1e6:8.2f} s/1M events (wall {self.wall / n * 1e6:.2f})"


def timed(fn: Callable[..., Any], *args: Any, **kw: Any) -> tuple[Timing, Any]:
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args, **kw)
    return Timing(time.perf_counter() - w0, time.process_time() - c0), out


@contextlib.contextmanager
def gc_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def snapshot_bytes(h: History) -> int:
    """Bytes of the hash tables the snapshots own (the values are shared)."""
    return sum(sys.getsizeof(getattr(s, f)) for s in h._snaps for f in STATE_DICTS)


def state_entries(s: EngineState) -> int:
    return sum(len(getattr(s, f)) for f in STATE_DICTS)


def save_prefix(path: Path, events: Sequence[Event], n: int) -> None:
    part = events[:n]
    trace.save(path, header_for(part), part, {"status": "completed"})


def seek_times(h: History, seeks: int = SEEKS) -> list[float]:
    """CPU ms of ``h.state_at(i)`` for ``seeks`` random ``i``."""
    rng = random.Random(SEED)
    out = []
    for _ in range(seeks):
        i = rng.randint(0, len(h))
        c0 = time.process_time()
        h.state_at(i)
        out.append((time.process_time() - c0) * 1e3)
    return out


def _where(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    if filename == "~":
        return name
    path = os.path.relpath(filename, REPO) if filename.startswith(REPO) else \
        os.path.basename(filename)
    return f"{path}:{line}({name})"


def profile_load(path: Path, n: int, top: int = PROFILE_TOP) -> None:
    """cProfile ``trace.load(path)`` with the GC off (else a collection's cost lands on
    whichever function happened to allocate); print the top functions by own time."""
    prof = cProfile.Profile()
    with gc_off():
        prof.runcall(trace.load, path)
    stats = pstats.Stats(prof)
    total = stats.total_tt  # type: ignore[attr-defined]
    entries = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])  # type: ignore[attr-defined]
    print(f"cProfile of trace.load, {n:,} events, GC off: {total:.2f} s under the profiler; "
          f"top {top} by own time:")
    head = f"{'ncalls':>9} {'tottime s':>9} {'%':>5} {'cumtime s':>9}  function"
    print(head)
    print("-" * len(head))
    for key, (_cc, nc, tt, ct, _callers) in entries[:top]:
        print(f"{nc:>9,} {tt:>9.2f} {100 * tt / total:>5.1f} {ct:>9.2f}  {_where(key)}")


def fit_quadratic(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """``y = a*n + b*n^2`` through the two largest points."""
    (n1, y1), (n2, y2) = sorted(points)[-2:]
    b = (y2 / n2 - y1 / n1) / (n2 - n1)
    a = y1 / n1 - b * n1
    return a, b


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


# --- the report -----------------------------------------------------------------------------
def main() -> None:
    t_start = time.perf_counter()
    t, base = timed(record_base)
    threads = sorted({e.thread for e in base})
    print(f"real run: {len(base):,} events from {len(threads)} threads ({', '.join(threads)}), "
          f"{sum(e.kind == 'node_start' for e in base):,} backward nodes, {t.wall:.1f} s")
    t, (events, copies) = timed(replicate, base, TARGET_EVENTS)
    n = len(events)
    print(f"replicated: {copies} copies, {n:,} events, {t.wall:.1f} s")
    line = trace.event_line(next(e for e in base if e.kind == "node_end"))
    cal = min(timeit.repeat(lambda: json.loads(line), number=20_000, repeat=3)) / 20_000
    print(f"calibration: json.loads of a {len(line)}-byte node_end line: {cal * 1e6:.2f} us")
    print("times are CPU time of this process (the machine may be shared), wall clock in "
          "parentheses", flush=True)

    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-trace-") as tmp:
        d = Path(tmp)
        header = header_for(events)
        plain, gz = d / "big.jsonl", d / "big.jsonl.gz"
        t_save, nbytes = timed(trace.save, plain, header, events, {"status": "completed"})
        t_save_gz, _ = timed(trace.save, gz, header, events, {"status": "completed"})
        size, size_gz = plain.stat().st_size, gz.stat().st_size
        rows += [
            ("write 1M plain (trace.save)", f"{n / t_save.cpu:>10,.0f} events/s "
                                            f"(wall {n / t_save.wall:,.0f})"),
            ("write 1M gzip (trace.save)", f"{n / t_save_gz.cpu:>10,.0f} events/s "
                                           f"(wall {n / t_save_gz.wall:,.0f})"),
            ("size plain", f"{size / n:>10.1f} bytes/event ({size / 2**20:.0f} MiB; event "
                           f"lines {nbytes / n:.1f} B/event, header {(size - nbytes) / 2**20:.1f}"
                           " MiB: the graph)"),
            ("size gzip", f"{size_gz / n:>10.1f} bytes/event ({size_gz / 2**20:.0f} MiB, "
                          f"{size / size_gz:.1f}x smaller)"),
        ]
        plain.unlink()
        gz.unlink()

        # The fold alone at 1M (it also proves the replicated stream valid), in two parts:
        # up to a snapshot boundary 256 events before the end, then the rest.
        mid = (n - SNAPSHOT_EVERY) // SNAPSHOT_EVERY * SNAPSHOT_EVERY
        t_fold1, state_mid = timed(fold, events[:mid])
        t_fold2, state = timed(fold, events[mid:], state_mid)
        t_fold = Timing(t_fold1.wall + t_fold2.wall, t_fold1.cpu + t_fold2.cpu)
        # Seek at 1M from its parts, as History.state_at does it: fold(events[k:i], snap)
        # is one copy of the snapshot's state + (i - k) folds, i - k <= every - 1.
        entries_1m = state_entries(state)
        copy_ms = statistics.median(timed(state_mid.copy)[0].cpu * 1e3 for _ in range(10))
        seek_1m = {k: statistics.median(timed(fold, events[mid:mid + k], state_mid)[0].cpu * 1e3
                                        for _ in range(5))
                   for k in (SNAPSHOT_EVERY // 2, SNAPSHOT_EVERY - 1)}
        seek_1m_median, seek_1m_max = seek_1m[SNAPSHOT_EVERY // 2], seek_1m[SNAPSHOT_EVERY - 1]
        del state_mid, state

        # The full default load (parse, check, checksum, fold into History) at two sizes.
        loads: list[tuple[int, Timing, int, int]] = []
        history: History | None = None
        for size_n in FULL_LOAD_SIZES:
            p = d / f"part{size_n}.jsonl"
            save_prefix(p, events, size_n)
            history = None
            gc.collect()
            t_load, rec = timed(trace.load, p)
            history = rec.history
            assert history is not None and len(history) == size_n
            loads.append((size_n, t_load, snapshot_bytes(history), state_entries(history.head)))
            del rec
        assert history is not None
        size_h = len(history)
        ms = seek_times(history)
        gc.freeze()  # what a loader could do: the loaded objects leave the GC's scans
        ms_frozen = seek_times(history)
        gc.unfreeze()
        del history
        gc.collect()

        small = d / f"part{FULL_LOAD_SIZES[0]}.jsonl"
        big = d / f"part{FULL_LOAD_SIZES[-1]}.jsonl"
        with gc_off():
            t_nogc, rec = timed(trace.load, small)
            del rec
        gc.collect()
        t_parse, rec = timed(trace.load, big, validate_state=False)
        del rec
        gc.collect()
        with gc_off():
            t_parse_nogc, rec = timed(trace.load, big, validate_state=False)
            del rec
        gc.collect()

        for size_n, t_load, snap, ent in loads:
            rows.append((f"load {size_n:,} (full: History)",
                         f"{t_load.per_m(size_n)}; snapshots {snap / 2**20:,.0f} MiB, "
                         f"state {ent:,} entries"))
        rows += [
            (f"load {FULL_LOAD_SIZES[0]:,} (full), GC off", t_nogc.per_m(FULL_LOAD_SIZES[0])),
            (f"load {FULL_LOAD_SIZES[-1]:,}, parse+check only", t_parse.per_m(size_h)),
            (f"load {FULL_LOAD_SIZES[-1]:,}, parse+check, GC off", t_parse_nogc.per_m(size_h)),
            ("fold alone (state.fold), 1M", t_fold.per_m(n)),
        ]
        a, b = fit_quadratic([(s, t.cpu) for s, t, _, _ in loads])
        load_1m = (a * n + b * n * n) / n * 1e6
        mem_1m = loads[-1][2] * (n / loads[-1][0]) ** 2
        rows += [
            ("load 1M (full), projected", f"{load_1m:8.1f} s/1M events; snapshots "
                                          f"~{mem_1m / 2**30:,.0f} GiB (not run)"),
            (f"seek {size_h:,}: median / max", f"{statistics.median(ms):8.2f} / "
                                               f"{max(ms):.2f} ms ({SEEKS:,} random i)"),
            (f"seek {size_h:,}, gc.freeze(): med / max",
             f"{statistics.median(ms_frozen):8.2f} / {max(ms_frozen):.2f} ms"),
            ("seek 1M from parts: median / max", f"{seek_1m_median:8.2f} / {seek_1m_max:.2f} ms"
                                                 f" (state copy {copy_ms:.1f} ms, "
                                                 f"{entries_1m:,} entries)"),
        ]
        print()
        print(f"recording of {n:,} events ({copies} copies of a real run):")
        width = max(len(k) for k, _ in rows)
        for k, v in rows:
            print(f"  {k:<{width}}  {v}")

        load_meas = loads[-1][1].cpu / loads[-1][0] * 1e6
        goals = [
            (f"median seek well under {GOAL_SEEK_MEDIAN_MS:g} ms, {size_h:,} measured",
             statistics.median(ms), "ms", statistics.median(ms) < GOAL_SEEK_MEDIAN_MS / 2),
            (f"max seek under {GOAL_SEEK_MAX_MS:g} ms, {size_h:,} measured", max(ms), "ms",
             max(ms) < GOAL_SEEK_MAX_MS),
            (f"median seek well under {GOAL_SEEK_MEDIAN_MS:g} ms, 1M from parts",
             seek_1m_median, "ms", seek_1m_median < GOAL_SEEK_MEDIAN_MS / 2),
            (f"max seek under {GOAL_SEEK_MAX_MS:g} ms, 1M from parts (no GC pause)",
             seek_1m_max, "ms", seek_1m_max < GOAL_SEEK_MAX_MS),
            (f"load under {GOAL_LOAD_S_PER_M:g} s per 1M events, {size_h:,} measured",
             load_meas, "s/1M", load_meas < GOAL_LOAD_S_PER_M),
            (f"load under {GOAL_LOAD_S_PER_M:g} s per 1M events, 1M projected", load_1m,
             "s/1M", load_1m < GOAL_LOAD_S_PER_M),
        ]
        print()
        print("goals (\"well under\" = under half; CPU time):")
        gw = max(len(g[0]) for g in goals)
        for name, value, unit, ok in goals:
            print(f"  {name:<{gw}}  {value:9.2f} {unit:<5} {verdict(ok)}")
        if not all(g[3] for g in goals):
            print()
            profile_load(small, FULL_LOAD_SIZES[0])
            print()
            print(DIAGNOSIS)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    print(f"(bench_trace took {time.perf_counter() - t_start:.0f} s, peak RSS {peak:.1f} GiB)")


DIAGNOSIS = """\
why the load misses its goal (engine/state.py, engine/trace.py):
  1. snapshots, O(N^2): History.append snapshots every 256 events with
     EngineState.copy(), a full copy of every dict of the state; and the state only
     grows: nodes, node_states, outputs, leaf_grads of every node ever seen, and
     dependencies keyed by (GraphTask, node) are never dropped.  Snapshot k copies
     O(k) entries, so a load of N events costs O(N^2 / 256) time and memory (see the
     snapshot MiB per size, and the ~GiB projected at 1M).  state.py:107 (copy) in
     the profile is this; it grows with N while everything else is per event.
  2. the cyclic GC: every parsed line and every snapshot are GC-tracked containers;
     full collections rescan the growing heap during the load (compare "GC off";
     with the GC on, its cost lands on whichever function allocates).
  3. parsing, per line in Python: trace.load's loop, json.loads on bytes (detect_encoding,
     decode, the re-based whitespace checks of decoder.py around the C scanner), then
     _event (isinstance checks, the SCHEMA field list comprehension) and Event(...),
     and one sha256.update: together more than the fold itself.
  4. the fold: _push rebuilds the queue (QueueTask(*t) per entry of "order") and sorts
     old and new to compare them; GraphTaskState/ThreadState are updated with
     NamedTuple._replace, which is slow.
proposed fixes (not applied):
  1. make snapshots cost O(changes), not O(state): persistent maps (a HAMT, e.g.
     immutables.Map, or pyrsistent), so that copy() is O(1) and a write copies one
     path; or keep per snapshot only the entries changed since the previous one, with
     a full checkpoint every few hundred snapshots.  Load becomes linear; a seek stays
     one checkpoint copy plus < 256 folds.  Cheaper, partial: when a GraphTask
     completes, drop its dependencies/buffers/not_ready entries (all zero or empty by
     then) so that at least those maps stay small.
  2. in trace.load: gc.disable() (or gc.freeze() once done) while loading; the objects
     it builds have no cycles.
  3. in trace.load: decode the file to str once and call a JSONDecoder's raw_decode
     (or parse blocks of lines with one json.loads of "[" + ",".join(lines) + "]"),
     or use orjson (about 2.4x faster than json.loads per line on this machine);
     hash the event block with fewer, larger sha256 updates; check the fields with a
     precomputed frozenset per kind (SCHEMA[kind].keys() <= data.keys()).
  4. in state.py: in _push compare lengths and look for the pushed task instead of
     sorting both queues; build the NamedTuples with their constructors, not _replace.
"""


if __name__ == "__main__":
    main()
