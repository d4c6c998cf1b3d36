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
like a training loop.  The stream folds validly (``autograd_tui.history.state.fold`` is run
over all of it below and would raise ``StateError`` otherwise).

Measured in one process, one run (CPU time of the process, since the machine may
be shared, with wall clock beside it):

1. write: ``autograd_tui.history.recordings.save`` of all the events, plain and ``.gz``: events/s;
2. size: bytes per event of the whole file (header and footer included), plain
   and gzip;
3. load: ``autograd_tui.history.recordings.load`` with its defaults (read, decode and type-check
   every line, checksum, fold every event into a ``History`` that keeps a delta
   every 1,024 events and checkpoints) of the whole plain file, then of the gzip
   file; and, to show where the time goes, the same load without the fold
   (``validate_state=False``) and the fold alone (``History(events)``, with the
   cyclic collector off as in ``trace.load``);
4. seek: ``History.state_at(i)`` on the loaded history for 1,000 random ``i``
   (median and max).

A calibration line (msgspec decoding of one typical event line) helps compare
machines.  Goals (printed pass/fail): median seek well under (= under half of)
50 ms, max seek under 100 ms, load under 2 s per million events.  When a goal is
missed (or with ``--profile``), ``trace.load`` is profiled (cProfile) on a
100,000-event prefix and the top functions are printed.

Run: ``.venv/bin/python -m bench.bench_trace`` (``--events N``, ``--profile``).
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
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from autograd_tui import engine
from autograd_tui.engine.events import Event, ListObserver, make_event
from autograd_tui.history import EngineState, History
from autograd_tui.history import recordings as trace
from bench import _cli

SEED = 20240601
TARGET_EVENTS = 1_000_000
BASE_OPS = 4_000  # forward ops of the real run: about 47,000 events
BRANCHES = 4  # parallel branches in the generated graph (the last on cuda:0)
P_MERGE = 0.05  # share of steps that merge two branches (then fork them again)
PROFILE_TOP = 14
SEEKS = 1_000
GOAL_SEEK_MEDIAN_MS = 50.0
GOAL_SEEK_MAX_MS = 100.0
GOAL_LOAD_S_PER_M = 2.0
GOAL_RSS_MB = 1024

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
    if kind in ("push", "pop"):
        return {**d, "gone": [a + g for a in d["gone"]]}
    if kind in ("dependency_decrement", "buffer_accumulate"):
        return {**d, "from_node": d["from_node"] + n}
    if kind == "reentrant_handoff" and d.get("parent_graph_task") is not None:
        return {**d, "parent_graph_task": d["parent_graph_task"] + g}
    if kind in ("thread_wait", "thread_wake") and d.get("on") == "future":
        return {**d, "target": f"GraphTask {int(d['target'].split()[-1]) + g}"}
    return d


_SHIFTED = {"graph_task_created", "dependencies_computed", "exec_info", "push", "pop",
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
                out.append(make_event(len(out) + 1, e.kind, e.thread, gt, node, e.queue,
                                      _shift(e.kind, e.data, g, n)))
            else:
                out.append(msgspec.structs.replace(e, seq=len(out) + 1, graph_task=gt,
                                                   node=node))
        copies += 1
    for e in tail:
        out.append(msgspec.structs.replace(e, seq=len(out) + 1))
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
    """cProfile ``trace.load(path)``; print the top functions by own time."""
    prof = cProfile.Profile()
    prof.runcall(trace.load, path)
    stats = pstats.Stats(prof)
    total = stats.total_tt  # type: ignore[attr-defined]
    entries = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])  # type: ignore[attr-defined]
    print(f"cProfile of trace.load, {n:,} events: {total:.2f} s under the profiler; "
          f"top {top} by own time:")
    head = f"{'ncalls':>9} {'tottime s':>9} {'%':>5} {'cumtime s':>9}  function"
    print(head)
    print("-" * len(head))
    for key, (_cc, nc, tt, ct, _callers) in entries[:top]:
        print(f"{nc:>9,} {tt:>9.2f} {100 * tt / total:>5.1f} {ct:>9.2f}  {_where(key)}")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


# --- before and after, each in a fresh process ----------------------------------------------
#: the commit "before" is measured at: main before recordings were kept as lines
BASE_COMMIT = "913ed97"
#: the base's cap was on the file (128 MB by default): it needs this to open 147 MB at all
BASE_CAP_MB = "1024"


@contextlib.contextmanager
def base_tree(commit: str = BASE_COMMIT) -> Iterator[Path | None]:
    """The project's sources at ``commit`` in a temporary directory, importable as
    ``autograd_tui`` (PYTHONPATH first: it wins over the editable install); None when
    git cannot give them (not a checkout)."""
    with tempfile.TemporaryDirectory(prefix="bench-base-") as tmp:
        try:
            archive = subprocess.run(["git", "-C", REPO, "archive", commit],
                                     capture_output=True, check=True, timeout=120).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            yield None
            return
        for pkg in ("engine", "scenarios"):  # the package-dir mapping of pyproject.toml
            os.symlink(os.path.join(tmp, pkg), os.path.join(tmp, "autograd_tui", pkg))
        yield Path(tmp)


#: a fresh process loads a recording with the default settings and says what it took
LOAD_SCRIPT = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from autograd_tui.history import recordings as trace
rec = trace.load(sys.argv[1])
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
assert len(rec.history) == int(sys.argv[2])
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(json.dumps({"load_s": wall, "cpu_s": cpu, "rss_mb": int(status["VmRSS"].split()[0]) / 1024,
                  "peak_mb": int(status["VmHWM"].split()[0]) / 1024}))
"""


def in_subprocess(script: str, args: Sequence[str], base: Path | None = None,
                  env: dict[str, str] | None = None, timeout: float = 600) -> dict[str, Any]:
    """Run ``script`` in a fresh interpreter (this tree, or ``base``'s sources); its last
    line of output, JSON.  A failure: {"error": what it printed last}."""
    full = {k: v for k, v in os.environ.items() if k != "AUTOGRAD_TUI_MAX_RECORDING_MB"}
    full.update(env or {})
    full["PYTHONPATH"] = os.pathsep.join([str(base), REPO] if base else [REPO])
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                         text=True, timeout=timeout, env=full, cwd=str(base or REPO))
    lines = out.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": tail[:300]}


def load_before_after(path: Path, n: int) -> list[tuple[str, str]]:
    """The default load of ``path`` in a fresh process, here and at ``BASE_COMMIT``."""
    rows = []
    with base_tree() as base:
        for name, tree, env in (("before", base, {"AUTOGRAD_TUI_MAX_RECORDING_MB": BASE_CAP_MB}),
                                ("after", None, {})):
            if name == "before" and tree is None:
                continue
            r = in_subprocess(LOAD_SCRIPT, [str(path), str(n)], tree, env)
            what = f"load in a fresh process, {name}" + (
                f" ({BASE_COMMIT}, cap raised to {BASE_CAP_MB} MB)" if name == "before"
                else " (default settings)")
            rows.append((what, r["error"] if "error" in r else
                         f"{r['load_s']:8.2f} s wall ({r['cpu_s']:.2f} CPU), RSS "
                         f"{r['rss_mb']:,.0f} MB (peak {r['peak_mb']:,.0f} MB), "
                         f"{r['rss_mb'] * 2**20 / n:,.0f} B/event"))
    return rows


# --- the report -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    ap = _cli.parser("python -m bench.bench_trace", __doc__,
                     "a few minutes (a million-event recording written, loaded, sought)")
    ap.add_argument("--events", type=int, default=TARGET_EVENTS,
                    help=f"events in the recording (default {TARGET_EVENTS:,})")
    ap.add_argument("--profile", action="store_true", help="profile trace.load in any case")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    t_start = time.perf_counter()
    t, base = timed(record_base)
    threads = sorted({e.thread for e in base})
    print(f"real run: {len(base):,} events from {len(threads)} threads ({', '.join(threads)}), "
          f"{sum(e.kind == 'node_start' for e in base):,} backward nodes, {t.wall:.1f} s")
    t, (events, copies) = timed(replicate, base, args.events)
    n = len(events)
    print(f"replicated: {copies} copies, {n:,} events, {t.wall:.1f} s")
    line = trace.event_line(next(e for e in base if e.kind == "node_end"))
    cal = min(timeit.repeat(lambda: trace._DECODER.decode(line), number=20_000,
                            repeat=3)) / 20_000
    print(f"calibration: decoding one {len(line)}-byte node_end line: {cal * 1e6:.2f} us")
    print("times are CPU time of this process (the machine may be shared), wall clock in "
          "parentheses", flush=True)
    del base

    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-trace-") as tmp:
        d = Path(tmp)
        header = header_for(events)
        plain, gz = d / "big.jsonl", d / "big.jsonl.gz"
        t_save, nbytes = timed(trace.save, plain, header, events, {"status": "completed"})
        t_save_gz, _ = timed(trace.save, gz, header, events, {"status": "completed"})
        size, size_gz = plain.stat().st_size, gz.stat().st_size
        rows += [
            ("write plain (trace.save)", f"{n / t_save.cpu:>10,.0f} events/s "
                                         f"(wall {n / t_save.wall:,.0f})"),
            ("write gzip (trace.save)", f"{n / t_save_gz.cpu:>10,.0f} events/s "
                                        f"(wall {n / t_save_gz.wall:,.0f})"),
            ("size plain", f"{size / n:>10.1f} bytes/event ({size / 2**20:.0f} MiB; event "
                           f"lines {nbytes / n:.1f} B/event, header {(size - nbytes) / 2**20:.1f}"
                           " MiB: the graph)"),
            ("size gzip", f"{size_gz / n:>10.1f} bytes/event ({size_gz / 2**20:.0f} MiB, "
                          f"{size / size_gz:.1f}x smaller)"),
        ]
        del events
        gc.collect()

        t_load, rec = timed(trace.load, plain)
        history = rec.history
        assert history is not None and len(history) == n
        snaps = len(history._snaps)
        ckpts = sum(isinstance(x, EngineState) for x in history._snaps)
        entries = history.head.size()
        ms = seek_times(history)
        gc.disable()  # as in trace.load
        t_fold, _ = timed(History, rec.events)
        gc.enable()
        del rec, history, _
        gc.collect()
        t_load_gz, rec = timed(trace.load, gz)
        del rec
        gc.collect()
        t_parse, rec = timed(trace.load, plain, validate_state=False)
        del rec
        gc.collect()
        fresh = load_before_after(plain, n)
        rows += [
            ("load plain (trace.load)", t_load.per_m(n) + f"; {snaps:,} snapshots, "
                                                          f"{ckpts} checkpoints, state "
                                                          f"{entries:,} entries"),
            ("load gzip (trace.load)", t_load_gz.per_m(n)),
            ("  of which: read, decode, check", t_parse.per_m(n)),
            ("  of which: fold (History)", t_fold.per_m(n)),
            (f"seek {n:,}: median / max", f"{statistics.median(ms):8.2f} / {max(ms):.2f} ms "
                                          f"({SEEKS:,} random i)"),
            *fresh,
        ]
        print()
        print(f"recording of {n:,} events ({copies} copies of a real run):")
        width = max(len(k) for k, _ in rows)
        for k, v in rows:
            print(f"  {k:<{width}}  {v}")

        load_1m = t_load.cpu / n * 1e6
        goals = [
            (f"median seek well under {GOAL_SEEK_MEDIAN_MS:g} ms", statistics.median(ms), "ms",
             statistics.median(ms) < GOAL_SEEK_MEDIAN_MS / 2),
            (f"max seek under {GOAL_SEEK_MAX_MS:g} ms", max(ms), "ms", max(ms) < GOAL_SEEK_MAX_MS),
            (f"load under {GOAL_LOAD_S_PER_M:g} s per 1M events (plain)", load_1m, "s/1M",
             load_1m < GOAL_LOAD_S_PER_M),
        ]
        after = in_subprocess(LOAD_SCRIPT, [str(plain), str(n)])
        if "rss_mb" in after:
            goals.append((f"loaded with the default settings, RSS under {GOAL_RSS_MB:,} MB "
                          "(fresh process)", after["rss_mb"], "MB",
                          after["rss_mb"] < GOAL_RSS_MB))
        print()
        print(f"goals (\"well under\" = under half; CPU time; {n:,} events):")
        gw = max(len(g[0]) for g in goals)
        for name, value, unit, ok in goals:
            print(f"  {name:<{gw}}  {value:9.2f} {unit:<5} {verdict(ok)}")
        if args.profile or not all(g[3] for g in goals):
            small = d / "part.jsonl"
            part = trace.load(plain).events[:100_000]
            trace.save(small, header_for(part), part, {"status": "completed"})
            print()
            profile_load(small, len(part))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    print(f"(bench_trace took {time.perf_counter() - t_start:.0f} s, peak RSS {peak:.1f} GiB)")


if __name__ == "__main__":
    main()
