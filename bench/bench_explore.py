"""Schedules per second of the schedule explorer, with and without the reduction.

For each scenario the exhaustive search (``--strategy dfs``) runs to preemption bound
2 twice: with the partial-order reduction (sleep sets, ``control/dependence.py``) and
without it.  Each row: the schedules covered, the engine runs it took (a run the
reduction cuts short counts as a run, not a schedule), schedules and runs per second,
the events per run, and how many schedules the reduction saved.

* ``two-devices`` (40 events): about the smallest program with two threads, built
  here: ``(x.to("cuda:0") * 3).to("cpu").sum().backward()`` (issue 32 asks 5,000
  schedules per wall-second with the reduction: a run of about 200 us in all);
* ``multi-device`` (105 events, three threads);
* ``reentrant-deep`` with ``depth=3, max_recursion_depth=1`` (123 events: the owner
  and two reentrant-pool threads; at its default depth, 4,537 events a run, bound 2
  is out of reach of any budget).

Every run is a fresh Engine.  Each search is measured twice, one after the other in this
process: ``before`` (the base commit's explorer: a Controller and a History a run, real
threads started, handed the turn and joined, every run run) and ``after`` (the default
for a built-in scenario: the same engine code, its threads greenlets on one OS thread, no
History, lean events (no tensor summaries, no graph in ``dependencies_computed``:
``control/lean.py``), ``control/fastrun.py``; runs the trie knows not run again,
``runtrie.py``);
``x``: after over before, from the same process.  The
cost of a schedule is the cost of a whole run (``bench.md`` and ``docs/explore.md`` say
where it goes).  On a loaded machine, read the ratios, not the rates.
"""

from __future__ import annotations

import gc
import sys
import time
from typing import Any

from autograd_tui import engine, scenarios
from autograd_tui.control.explore import Budget, Explorer
from autograd_tui.scenarios import Scenario
from autograd_tui.session.run import RunSpec
from bench import _cli

BOUND = 2


def _two_devices() -> dict[str, Any]:
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    (x.to("cuda:0") * 3.0).to("cpu").sum().backward()  # 40 events
    return {"x": x.grad}


def _one_device() -> dict[str, Any]:
    """The same graph on the CPU alone (the breakdown's baseline for the device path)."""
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    (x * 3.0).sum().backward()
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


#: before: the explorer of the base commit (real threads, every run run); after: greenlets
#: and the run trie (``control/runtrie.py``), the explorer's default for a built-in scenario
SUBSTRATES = {"before": ("threads", False), "after": ("cooperative", True)}


def measure(scenario: Scenario, params: dict[str, Any], opts: dict[str, Any],
            reduce: bool, seconds: float | None = 300.0, at_least: float = 1.0,
            substrate: str = "cooperative", memo: bool = True) -> dict[str, Any]:
    """One whole search (repeated until ``at_least`` seconds have passed, for a rate
    worth reading on a small search; the counts are those of one search)."""
    gc.collect()
    repeats, dt, cpu = 0, 0.0, 0.0
    while dt < at_least:
        ex = Explorer(RunSpec(scenario, params, opts), scenario.name,
                      budget=Budget(schedules=None, seconds=seconds, preemptions=BOUND),
                      reduce=reduce, substrate=substrate)
        ex.memo = memo
        t0, c0 = time.perf_counter(), time.process_time()
        report = ex.run("dfs")
        dt += time.perf_counter() - t0
        cpu += time.process_time() - c0
        repeats += 1
    events = sum(s.shortest.events for s in report.outcomes.values()) / len(report.outcomes)
    return {"schedules": report.explored, "runs": report.runs, "seconds": dt / repeats,
            "complete": report.complete, "events": events,
            "per_s": report.explored * repeats / dt, "runs_per_s": report.runs * repeats / dt,
            "per_cpu_s": report.explored * repeats / cpu,
            "table": sorted((str(o), s.count, s.shortest.schedule)
                            for o, s in report.outcomes.items())}


def breakdown(reps: int = 5, n: int = 200) -> list[tuple[str, float]]:
    """Where a two-devices run's CPU time goes on greenlets, by taking parts away (first
    the same graph on the CPU alone, forward and unobserved run: what the device path
    adds is the difference): the forward alone; the run with the engine unobserved (no
    events, no gates: the engine's work, the substrate's waits and switches); with events
    (built, kept, no gate); with gates and a trivial policy; and the explorer's own run
    (its policy, the footprints, the outcome), per run of the search.  Best of ``reps``,
    microseconds of CPU."""
    from autograd_tui.control.fastrun import Cooperative

    class First:
        def choose(self, eligible: list[Any]) -> Any:
            return eligible[0]

    def forward() -> None:
        x = engine.tensor([1.0, 2.0], requires_grad=True)
        (x.to("cuda:0") * 3.0).to("cpu").sum()

    def forward_cpu() -> None:
        x = engine.tensor([1.0, 2.0], requires_grad=True)
        (x * 3.0).sum()

    def run(observe: str, program: Any = _two_devices) -> None:
        c = Cooperative(program, {}, lean=True)  # as the explorer runs it: no summaries
        c.policy = First()
        if observe == "none":
            c.engine._observers = ()
        elif observe == "events":
            c.engine._observers = (c.events.append,)
        c.run()
        c.close()

    def search(substrate: str, memo: bool) -> None:
        ex = Explorer(RunSpec(TWO_DEVICES), "two-devices", budget=Budget(None, None, BOUND),
                      substrate=substrate)
        ex.memo = memo
        ex.run("dfs")

    parts: list[tuple[str, Any, int]] = [
        ("one device: forward only", forward_cpu, 1),
        ("one device: engine unobserved", lambda: run("none", _one_device), 1),
        ("forward only", forward, 1),
        ("greenlets: engine unobserved", lambda: run("none"), 1),
        ("  + events built (lean)", lambda: run("events"), 1),
        ("  + gates (a trivial policy)", lambda: run("gates"), 1),
        ("  + the explorer (dfs, no trie)", lambda: search("cooperative", False), 25),
        ("  + the run trie (after, per run)", lambda: search("cooperative", True), 25),
        ("before: threads (per run)", lambda: search("threads", False), 25),
    ]
    best = {label: float("inf") for label, _, _ in parts}
    for _ in range(reps):
        for label, fn, per in parts:
            k = n if per == 1 else max(1, n // 25)
            c0 = time.process_time()
            for _ in range(k):
                fn()
            best[label] = min(best[label], (time.process_time() - c0) / k / per * 1e6)
    return list(best.items())


def main(argv: list[str] | None = None) -> None:
    ap = _cli.parser("python -m bench.bench_explore", __doc__,
                     "a few minutes (each search is repeated for at least a second)")
    ap.add_argument("--jobs", type=int, nargs="?", const=2, default=None, metavar="N",
                    help="only the rows of the parallel search with N jobs (default 2)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.jobs is not None:
        jobs_rows(args.jobs)
        return
    print(f"exhaustive search to preemption bound {BOUND}; every run a fresh engine; "
          "x: after over before (sched/s, sched/cpu-s), measured in this process")
    head = (f"{'scenario':<16}{'reduction':<10}{'substrate':<11}{'schedules':>10}{'runs':>7}"
            f"{'events':>7}{'seconds':>9}{'sched/s':>9}{'runs/s':>8}{'sched/cpu-s':>12}"
            f"{'x':>6}{'x cpu':>6}")
    print(head)
    print("-" * len(head))
    for label, sc, params, opts in CASES:
        scenario = sc if isinstance(sc, Scenario) else scenarios.get(sc)
        secs: dict[bool, float] = {}
        for reduce in (True, False):
            rows = {}
            for name, (substrate, memo) in SUBSTRATES.items():
                r = measure(scenario, params, opts, reduce, substrate=substrate, memo=memo)
                rows[name] = r
                x = (f"{r['per_s'] / rows['before']['per_s']:>6.1f}"
                     f"{r['per_cpu_s'] / rows['before']['per_cpu_s']:>6.1f}"
                     if name != "before" else "")
                print(f"{label:<16}{'on' if reduce else 'off':<10}{name:<11}"
                      f"{r['schedules']:>10}{r['runs']:>7}{r['events']:>7.0f}"
                      f"{r['seconds']:>9.3f}{r['per_s']:>9.0f}{r['runs_per_s']:>8.0f}"
                      f"{r['per_cpu_s']:>12.0f}{x}"
                      + ("" if r["complete"] else "  (budget hit)"))
            if rows["before"]["table"] != rows["after"]["table"]:
                print(f"{'':<16}OUTCOME TABLES DIFFER between the substrates")
            secs[reduce] = rows["after"]["seconds"]
            if reduce:
                on = rows["after"]
            else:
                off = rows["after"]
        saved = off["schedules"] - on["schedules"]
        print(f"{'':<16}the reduction saves {saved} of {off['schedules']} schedules "
              f"({100 * saved / max(1, off['schedules']):.0f}%), "
              f"{secs[False] / max(secs[True], 1e-9):.1f}x less time (after)")
    print("\nwhere a two-devices run's CPU time goes (us, best of 5):")
    for label, us in breakdown():
        print(f"  {label:<34}{us:>8.0f}")
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
            ex = (Explorer(make.spec(), name, budget=budget, reduce=reduce) if n == 1 else
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
    main()
