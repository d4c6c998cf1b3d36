"""Schedules per second of the schedule explorer, with and without the reduction.

For each scenario the exhaustive search (``--strategy dfs``) runs to preemption bound
2 twice: with the partial-order reduction (sleep sets, ``control/dependence.py``) and
without it.  Each row: the schedules covered, the engine runs it took (a run the
reduction cuts short counts as a run, not a schedule), schedules and runs per second,
the events per run, and how many schedules the reduction saved.

* ``two-devices`` (40 events): about the smallest program with two threads, built
  here: ``(x.to("cuda:0") * 3).to("cpu").sum().backward()`` (the target: 500
  schedules/s);
* ``multi-device`` (105 events, three threads);
* ``reentrant-deep`` with ``depth=3, max_recursion_depth=1`` (123 events: the owner
  and two reentrant-pool threads; at its default depth, 4,537 events a run, bound 2
  is out of reach of any budget).

Every run is a fresh Engine, Controller and History, its threads started and joined:
the cost of a schedule is the cost of a whole run (``bench.md`` and ``docs/explore.md``
say where it goes).
"""

from __future__ import annotations

import gc
import time
from typing import Any

from autograd_tui import engine, scenarios
from autograd_tui.control.explore import Budget, Explorer
from autograd_tui.scenarios import Scenario
from autograd_tui.session.run import Run

BOUND = 2


def _two_devices() -> dict[str, Any]:
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    (x.to("cuda:0") * 3.0).to("cpu").sum().backward()  # 40 events
    return {"x": x.grad}


TWO_DEVICES = Scenario(
    name="two-devices", title="bench: two threads", summary="", notes="", params={},
    engine={}, threads=("cpu (owner)", "cuda:0"), expect="complete", program=_two_devices,
    torch_program=None, source="bench.bench_explore")

CASES: list[tuple[str, Scenario | str, dict[str, Any], dict[str, Any]]] = [
    ("two-devices", TWO_DEVICES, {}, {}),
    ("multi-device", "multi-device", {}, {}),
    ("reentrant-deep", "reentrant-deep", {"depth": 3}, {"max_recursion_depth": 1}),
]


def measure(scenario: Scenario, params: dict[str, Any], opts: dict[str, Any],
            reduce: bool, seconds: float | None = 300.0, at_least: float = 1.0
            ) -> dict[str, Any]:
    """One whole search (repeated until ``at_least`` seconds have passed, for a rate
    worth reading on a small search; the counts are those of one search)."""
    gc.collect()
    repeats, dt = 0, 0.0
    while dt < at_least:
        ex = Explorer(lambda: Run(scenario, params, engine_overrides=opts), scenario.name,
                      budget=Budget(schedules=None, seconds=seconds, preemptions=BOUND),
                      reduce=reduce)
        t0 = time.perf_counter()
        report = ex.run("dfs")
        dt += time.perf_counter() - t0
        repeats += 1
    events = sum(s.shortest.events for s in report.outcomes.values()) / len(report.outcomes)
    return {"schedules": report.explored, "runs": report.runs, "seconds": dt / repeats,
            "complete": report.complete, "events": events,
            "per_s": report.explored * repeats / dt, "runs_per_s": report.runs * repeats / dt}


def main() -> None:
    print(f"exhaustive search to preemption bound {BOUND}; every run a fresh engine")
    head = (f"{'scenario':<16}{'reduction':<11}{'schedules':>10}{'runs':>8}{'events':>8}"
            f"{'seconds':>9}{'sched/s':>9}{'runs/s':>8}")
    print(head)
    print("-" * len(head))
    for label, sc, params, opts in CASES:
        scenario = sc if isinstance(sc, Scenario) else scenarios.get(sc)
        rows = {}
        for reduce in (True, False):
            r = measure(scenario, params, opts, reduce)
            rows[reduce] = r
            print(f"{label:<16}{'on' if reduce else 'off':<11}{r['schedules']:>10}"
                  f"{r['runs']:>8}{r['events']:>8.0f}{r['seconds']:>9.2f}{r['per_s']:>9.0f}"
                  f"{r['runs_per_s']:>8.0f}" + ("" if r["complete"] else "  (budget hit)"))
        on, off = rows[True], rows[False]
        saved = off["schedules"] - on["schedules"]
        print(f"{'':<16}the reduction saves {saved} of {off['schedules']} schedules "
              f"({100 * saved / max(1, off['schedules']):.0f}%), "
              f"{off['seconds'] / max(on['seconds'], 1e-9):.1f}x less time")
    jobs_rows()




# --- --jobs: the same search in one process and in N (control/explore_jobs.py) ------------------
JOBS_CASES: list[tuple[str, str, bool]] = [
    ("multi-device", "multi-device", True),  # 187 schedules, 432 runs
    ("multi-device", "multi-device", False),  # 1,519 schedules
]


def measure_jobs(name: str, reduce: bool, jobs: int, repeats: int = 5) -> dict[str, Any]:
    """The whole search with one job and then with ``jobs``, ``repeats`` pairs in this
    process (a pair sees about the same load from other work); per mode the best time and
    its CPU (this process's and, for ``jobs``, its workers', joined when the search ends),
    and the median of the pairs' ratios."""
    import resource
    import statistics

    from autograd_tui.control.explore_jobs import ParallelExplorer, ScenarioRun

    make, budget = ScenarioRun(name), Budget(schedules=None, seconds=None, preemptions=BOUND)
    best: dict[int, dict[str, Any]] = {}
    ratios: list[float] = []
    balance: list[float] = []  # one job's CPU / the busiest worker's
    for _ in range(repeats):
        pair = {}
        for n in (1, jobs):
            gc.collect()
            ex = (Explorer(make, name, budget=budget, reduce=reduce) if n == 1 else
                  ParallelExplorer(make, name, jobs=n, budget=budget, reduce=reduce))
            kids = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0, c0 = time.perf_counter(), time.process_time()
            report = ex.run("dfs")
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            k = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu += (k.ru_utime + k.ru_stime) - (kids.ru_utime + kids.ru_stime)
            pair[n] = dt
            # the busiest worker's CPU: the search's length on a machine with a core each
            pair[-n] = max(ex.pool.cpu) if isinstance(ex, ParallelExplorer) else cpu
            if n not in best or dt < best[n]["seconds"]:
                best[n] = {"schedules": report.explored, "runs": report.runs, "seconds": dt,
                           "cpu": cpu, "per_s": report.explored / dt}
        ratios.append(pair[1] / pair[jobs])
        balance.append(pair[-1] / pair[-jobs])
    assert best[1]["schedules"] == best[jobs]["schedules"]  # the same search
    best[jobs]["ratio"] = statistics.median(ratios)
    best[jobs]["ratios"] = ratios
    best[jobs]["balance"] = statistics.median(balance)
    return best


def jobs_rows(jobs: int = 2) -> None:
    """``--jobs 1`` against ``--jobs N``: schedules per wall-second on the same search."""
    print(f"\n--jobs 1 against --jobs {jobs}, bound {BOUND}: 5 pairs in this process, the best"
          " time of each (its CPU with the workers'), the median of the pairs' ratios")
    head = (f"{'scenario':<16}{'reduction':<11}{'jobs':>5}{'schedules':>10}{'runs':>7}"
            f"{'seconds':>9}{'cpu s':>8}{'sched/s':>9}{'ratio':>7}")
    print(head)
    print("-" * len(head))
    for label, name, reduce in JOBS_CASES:
        rows = measure_jobs(name, reduce, jobs)
        for n, r in sorted(rows.items()):
            ratio = f"{r['ratio']:>6.2f}x" if "ratio" in r else ""
            print(f"{label:<16}{'on' if reduce else 'off':<11}{n:>5}{r['schedules']:>10}"
                  f"{r['runs']:>7}{r['seconds']:>9.2f}{r['cpu']:>8.2f}{r['per_s']:>9.0f}"
                  f"{ratio}")
        print(f"{'':<16}the pairs' ratios: "
              + ", ".join(f"{x:.2f}" for x in rows[jobs]["ratios"])
              + f"; CPU of one job / of the busiest worker: {rows[jobs]['balance']:.2f}x "
              "(the ratio on an otherwise idle machine, waits aside)")

if __name__ == "__main__":
    import sys

    if "--jobs" in sys.argv:  # python -m bench.bench_explore --jobs [N]: the jobs rows only
        i = sys.argv.index("--jobs")
        jobs_rows(int(sys.argv[i + 1]) if len(sys.argv) > i + 1 else 2)
    else:
        main()
