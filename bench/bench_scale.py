"""Scale: does watching a run cost the same per event however wide the queue or long the run?

Runs ``autograd-tui run ... --headless --record FILE`` in a fresh process for each size:
a wide ready queue (``bench/scenarios/wide_queue.py``: the CPU queue holds about w tasks)
at w = 250, 1,000 and 4,000, and a chain (one task at a time) at n = 2,000 and 8,000,
each with ``--quiet`` (record only) and the chain also printing every event into a pipe,
then a 100,001-node chain (n = 50,000: 700,008 events) recorded with ``--quiet``, run to
the end: its time, peak RSS and file size.
For each it prints the time per event, wall and CPU (user + system: on a loaded machine the
one to read) (the whole command, less the time and memory of the same command on a 2-leaf
graph: the interpreter's start-up and imports), the
recording's bytes per event and the peak memory per event (peak RSS above that baseline).
The goal: at w=4,000 each of the three is within 1.5x of its
value at w=250, and a recorded chain costs at most 20 us per event.

Issue 32's goal line: the recorded chain n = 8,000 with ``--quiet`` at most ``CHAIN_GOAL_US``
us per event (printed with its verdict).  ``BENCH_SCALE_SIZES=goal`` runs only the rows
the goals read (the wide runs at w = 250 and 4,000, the chain n = 8,000 with ``--quiet``).

``BENCH_SCALE_SIZES=small`` runs smaller sizes (a quick look); ``BENCH_SCALE_TIMEOUT``
(seconds, default 600) stops a run that takes longer.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import _cli

HERE = Path(__file__).resolve().parent
WIDE = HERE / "scenarios" / "wide_queue.py"
CLI = [sys.executable, "-m", "autograd_tui"]


def run_once(target: str, param: str, quiet: bool, out: Path) -> dict[str, float]:
    """One command in a fresh process: seconds, events, bytes, peak RSS (bytes)."""
    args = [*CLI, "run", target, "--headless", "--param", param, "--record", str(out)]
    if quiet:
        args.append("--quiet")
    env = {**os.environ, "AUTOGRAD_TUI_MAX_RECORDING_MB": "2048"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    limit = float(os.environ.get("BENCH_SCALE_TIMEOUT", "600"))
    try:
        stdout, stderr = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"timeout": limit}
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n"
                         f"{stderr.decode(errors='replace')[-2000:]}")
    # measure() runs this in a process of its own: its only child is the command
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss, cpu = ru.ru_maxrss * 1024.0, ru.ru_utime + ru.ru_stime
    with open(out, "rb") as f:
        f.seek(max(out.stat().st_size - 4096, 0))
        last = f.read().splitlines()[-1]
    events = json.loads(last)["footer"]["events"]
    return {"seconds": seconds, "cpu": cpu, "events": events, "bytes": out.stat().st_size,
            "rss": rss}


def measure(target: str, param: str, quiet: bool) -> dict[str, float]:
    """``run_once`` in a child process of its own, so that its peak RSS is its own."""
    code = ("import json,sys; from pathlib import Path; sys.path.insert(0, %r); "
            "import bench.bench_scale as b; "
            "print(json.dumps(b.run_once(%r, %r, %r, Path(%r))))")
    with tempfile.TemporaryDirectory() as tmp:
        src = code % (str(HERE.parent), target, param, quiet, str(Path(tmp) / "r.jsonl"))
        out = subprocess.run([sys.executable, "-c", src], capture_output=True, check=False)
        if out.returncode != 0:
            raise SystemExit(out.stderr.decode(errors="replace")[-2000:])
        return json.loads(out.stdout.splitlines()[-1])


CHAIN_GOAL_US = 10.0
CHAIN_GOAL_N = 8_000


def main(argv: list[str] | None = None) -> None:
    _cli.parser("python -m bench.bench_scale", __doc__,
                "one to a few minutes (one fresh process per size)").parse_args(
        sys.argv[1:] if argv is None else argv)
    sizes = os.environ.get("BENCH_SCALE_SIZES")
    small, goal = sizes == "small", sizes == "goal"
    widths = (100, 200, 400) if small else (250, 4_000) if goal else (250, 1_000, 4_000)
    chains = (500, 2_000) if small else (CHAIN_GOAL_N,) if goal else (2_000, CHAIN_GOAL_N)
    b = measure(str(WIDE), "w=2", True)
    base, start, start_cpu = b["rss"], b["seconds"], b["cpu"]
    print(f"baseline (w=2): {start:.2f} s ({start_cpu:.2f} s CPU), peak RSS "
          f"{base / 2**20:.0f} MB")
    print(f"{'run':<40} {'events':>8} {'s':>7} {'us/event':>9} {'CPU us/ev':>10} "
          f"{'B/event':>8} {'peak MB':>8} {'KB/event':>9}")
    rows: dict[str, dict[str, float]] = {}
    runs = [(f"wide w={w:,} --quiet", str(WIDE), f"w={w}", True) for w in widths]
    runs += [(f"chain n={n:,} --quiet", "chain", f"n={n}", True) for n in chains]
    big = 5_000 if small else 50_000  # 2n + 1 nodes: 100,001
    big_label = f"chain n={big:,} ({2 * big + 1:,} nodes) --quiet"
    if not goal:
        runs += [(f"chain n={n:,} (events to a pipe)", "chain", f"n={n}", False)
                 for n in chains]
        runs.append((big_label, "chain", f"n={big}", True))
    for label, target, param, quiet in runs:
        r = measure(target, param, quiet)
        if "timeout" in r:
            print(f"{label:<40} did not finish in {r['timeout']:.0f} s", flush=True)
            continue
        r["us"] = max(r["seconds"] - start, 0.0) / r["events"] * 1e6
        r["cpu_us"] = max(r["cpu"] - start_cpu, 0.0) / r["events"] * 1e6
        r["bpe"] = r["bytes"] / r["events"]
        r["kb"] = max(r["rss"] - base, 0.0) / r["events"] / 1024
        rows[label] = r
        print(f"{label:<40} {r['events']:>8,} {r['seconds']:>7.2f} {r['us']:>9.1f} "
              f"{r['cpu_us']:>10.1f} {r['bpe']:>8.0f} {r['rss'] / 2**20:>8.0f} "
              f"{r['kb']:>9.2f}", flush=True)
    chain_label = f"chain n={CHAIN_GOAL_N:,} --quiet"
    if chain_label in rows:
        for key, what in (("us", "wall"), ("cpu_us", "CPU")):
            us = rows[chain_label][key]
            print(f"goal: {chain_label}, {us:.1f} us of {what} per event <= "
                  f"{CHAIN_GOAL_US:.0f}: {'ok' if us <= CHAIN_GOAL_US else 'MISSED'}")
    if big_label in rows:
        r = rows[big_label]
        print(f"{2 * big + 1:,}-node chain recorded to the end: {r['seconds']:.1f} s, "
              f"{r['events']:,} events, peak RSS {r['rss'] / 2**20:.0f} MB, file "
              f"{r['bytes'] / 2**20:.1f} MB")
    elif not goal:
        print(f"{2 * big + 1:,}-node chain: did not finish")
    lo, hi = f"wide w={widths[0]:,} --quiet", f"wide w={widths[-1]:,} --quiet"
    if lo in rows and hi in rows:
        for key, what in (("us", "time per event"), ("cpu_us", "CPU time per event"),
                          ("bpe", "bytes per event"),
                          ("kb", "peak memory per event")):
            ratio = rows[hi][key] / rows[lo][key] if rows[lo][key] else float("inf")
            verdict = "ok" if ratio <= 1.5 else "over 1.5x"
            print(f"w={widths[-1]:,} / w={widths[0]:,}, {what}: {ratio:.2f}x ({verdict})")


if __name__ == "__main__":
    main()
