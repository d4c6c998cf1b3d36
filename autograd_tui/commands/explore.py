"""``autograd-tui explore``: search a scenario's interleavings for deadlocks and
order-dependent results (``control/explore.py``).

Prints a table of the outcomes (how many schedules gave each, the shortest schedule
string of each and the command that replays it), the gradients of two completed
outcomes side by side when they differ, and how many schedules were covered; or,
with ``--json``, one JSON object.  Exit codes, the first that applies: 130 when Ctrl-C
stopped it (after the report), 3 when a schedule deadlocks, 1 when one ends in an error,
5 when the completed schedules disagree (more than one gradient fingerprint:
order-dependent gradients), else 0.  ``--jobs N`` runs the dfs search in N processes
(``control/explore_jobs.py``), with the same report as one.
"""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any

import numpy as np

from autograd_tui.commands.common import (
    EXIT_DEADLOCK,
    EXIT_DIFFER,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    FORMATTER,
    Failure,
    UsageError,
    check_run_args,
    console,
    examples,
    pairs,
    print_text,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "explore", help="search a scenario's thread interleavings for deadlocks and "
                        "order-dependent gradients",
        formatter_class=FORMATTER,
        description="Run a scenario under many schedules (exhaustive with a preemption bound, "
                    "random walks, or PCT) and report each outcome with the shortest schedule "
                    "that gives it, and the command that replays it. Ctrl-C stops the search "
                    "and reports what it found so far. Exit codes (the first that applies): "
                    "130 Ctrl-C, 3 a schedule deadlocks, 1 one ends in an error, 5 the "
                    "completed schedules disagree (order-dependent gradients: more than one "
                    "gradient fingerprint), 0 none of these.",
        epilog=examples(
            "autograd-tui explore race-lock-order",
            "autograd-tui explore race-accumulation-order --preemptions 1",
            "autograd-tui explore multi-device --no-reduction --json",
            "autograd-tui explore multi-device --no-reduction --jobs 2",
            "autograd-tui explore race-lock-order --strategy pct --depth 3 --schedules 500",
            "autograd-tui explore reentrant-deep --param depth=3 --engine max_recursion_depth=1"))
    p.add_argument("scenario", metavar="NAME|PATH")
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="set a scenario parameter (repeatable)")
    p.add_argument("--engine", action="append", default=[], metavar="K=V",
                   help="set an engine option (repeatable)")
    p.add_argument("--strategy", choices=["dfs", "random", "pct"], default="dfs",
                   help="dfs: exhaustive, preemption bound 0, 1, 2, ... (default); random: "
                        "seeded random walks; pct: probabilistic concurrency testing")
    p.add_argument("--preemptions", type=int, default=2, metavar="N",
                   help="dfs: the largest preemption bound (default 2)")
    p.add_argument("--schedules", type=int, default=2000, metavar="N",
                   help="stop after N distinct schedules (default 2000; 0: no limit)")
    p.add_argument("--seconds", type=float, default=120.0, metavar="S",
                   help="stop after S seconds (default 120; 0: no limit)")
    p.add_argument("--seed", type=int, default=0, help="random, pct: the first walk's seed")
    p.add_argument("--depth", type=int, default=3, metavar="D",
                   help="pct: the bug depth d (d - 1 priority changes; default 3)")
    p.add_argument("--no-reduction", action="store_true",
                   help="dfs: explore interleavings that only swap commuting steps too")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="dfs: split the search over N processes, with the same report as "
                        "one (default 1; 0: one per core)")
    p.add_argument("--json", action="store_true", help="print one JSON object, no table")
    p.set_defaults(func=run)


def _check(args: argparse.Namespace) -> None:
    if args.preemptions < 0:
        raise UsageError("--preemptions must be 0 or more")
    if args.schedules < 0 or args.seconds < 0:
        raise UsageError("--schedules and --seconds must be 0 (no limit) or more")
    if args.depth < 1:
        raise UsageError("--depth must be 1 or more")
    if args.jobs < 0:
        raise UsageError("--jobs must be 0 (one per core) or more")
    if args.jobs != 1 and args.strategy != "dfs":
        raise UsageError(f"--jobs splits the dfs search only; --strategy {args.strategy} "
                         "runs in one process")
    if args.schedules == 0 and args.seconds == 0 and args.strategy != "dfs":
        raise UsageError(f"--strategy {args.strategy} needs --schedules or --seconds")


def replay_command(scenario: str, schedule: str, params: dict[str, str],
                   engine: dict[str, str]) -> str:
    parts = ["autograd-tui", "run", scenario, "--policy", f"schedule:{schedule}"]
    for k, v in params.items():
        parts += ["--param", f"{k}={v}"]
    for k, v in engine.items():
        parts += ["--engine", f"{k}={v}"]
    return shlex.join(parts)


def run(args: argparse.Namespace) -> int:
    from autograd_tui.control.explore import Budget, Explorer, Nondeterministic
    from autograd_tui.control.explore_jobs import (
        JobFailed,
        ParallelExplorer,
        ScenarioRun,
        default_jobs,
    )
    from autograd_tui.session.run import RunSpec

    _check(args)
    args.policy = "round-robin"  # what check_run_args checks: each run gets our policy
    scenario = check_run_args(args.scenario, args)
    params, engine = pairs(args.param, "--param"), pairs(args.engine, "--engine")
    name = scenario.name if scenario.source.startswith("scenarios.") else args.scenario
    budget = Budget(args.schedules or None, args.seconds or None, args.preemptions)

    make_run = RunSpec(scenario, params, engine)  # a recipe: the explorer runs it on greenlets
    jobs = default_jobs(args.jobs)
    progress = _Progress(args.json, budget)
    if jobs > 1:
        explorer: Explorer = ParallelExplorer(
            ScenarioRun(args.scenario, params, engine, loaded=scenario), name, jobs=jobs,
            budget=budget, reduce=not args.no_reduction, on_schedule=progress.update)
        explorer.start()  # before the progress bar's thread: the workers can be forked
    else:
        explorer = Explorer(make_run, name, budget=budget, reduce=not args.no_reduction,
                            seed=args.seed, pct_depth=args.depth, on_schedule=progress.update)
    with progress:
        try:
            report = explorer.run(args.strategy)
        except (Nondeterministic, JobFailed) as e:
            raise Failure(f"{args.scenario}: {e}") from None
    replay = {o: replay_command(name, s.shortest.schedule, params, engine)
              for o, s in report.outcomes.items()}
    if args.json:
        print(json.dumps(to_json(report, replay)))
    else:
        show(console(), report, replay)
    if report.stopped == "interrupted":
        return EXIT_INTERRUPTED
    if report.of_kind("deadlock"):
        return EXIT_DEADLOCK
    if report.of_kind("error") or report.of_kind("stuck"):
        return EXIT_ERROR
    if len(report.of_kind("completed")) > 1:
        return EXIT_DIFFER
    return EXIT_OK


class _Progress:
    """The search's progress bar (``autograd_tui.commands.progress``: on a terminal only, never with
    --json): schedules done, of the budget when it has one, and the outcomes so far."""

    def __init__(self, quiet: bool, budget: Any) -> None:
        from autograd_tui.commands.progress import Bar, progress

        self._quiet, self._total = quiet, budget.schedules
        self._context: Any = None
        self.bar: Bar = Bar()
        self._done = 0
        self._progress = progress

    def __enter__(self) -> _Progress:
        if not self._quiet:
            self._context = self._progress(self._total, "exploring")
            self.bar = self._context.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._context is not None:
            self._context.__exit__(*exc)

    def update(self, report: Any, result: Any) -> None:
        kinds: dict[str, int] = {}
        for s in report.outcomes.values():
            kinds[s.outcome.kind] = kinds.get(s.outcome.kind, 0) + s.count
        note = ", ".join(f"{n} {k}" for k, n in kinds.items())
        if report.bound is not None:
            note += f", bound {report.bound}"
        self.bar.update(description=f"exploring: {note}")
        self.bar.advance(report.explored - self._done)
        self._done = report.explored


# --- the report ---------------------------------------------------------------------------------
def _gradient_words(v: np.ndarray) -> str:
    """Every digit: two results that differ in the last bit read differently."""
    a = np.asarray(v)
    if a.ndim == 0:
        return repr(float(a)) if a.dtype.kind == "f" else repr(a.item())
    return np.array2string(a, precision=17, separator=", ", floatmode="unique")


def _text(words: str) -> Any:
    """A table cell as plain text: an error's message is the program's words, not markup."""
    from rich.text import Text

    from autograd_tui.words import plain

    return Text(plain(words))


def show(con: Any, report: Any, replay: dict[Any, str]) -> None:
    from rich.table import Table

    table = Table(title=f"explore {report.scenario} ({report.strategy})")
    for col in ("outcome", "schedules", "first found", "preemptions", "events",
                "shortest schedule"):
        table.add_column(col, overflow="fold")
    for o, s in sorted(report.outcomes.items(), key=lambda kv: (kv[0].kind, -kv[1].count)):
        table.add_row(o.kind, str(s.count), f"#{s.first_after}, {s.first_seconds:.1f} s",
                      str(s.shortest.preemptions), str(s.shortest.events),
                      _text(s.shortest.schedule))
    con.print(table)
    for o, _ in sorted(report.outcomes.items(), key=lambda kv: (kv[0].kind, -kv[1].count)):
        what = "gradients " + o.detail if o.kind == "completed" else o.detail
        print_text(con, f"{o.kind} ({what}):")
        print_text(con, f"  {replay[o]}")
    completed = report.of_kind("completed")
    if len(completed) > 1:
        side_by_side(con, completed[:2])
    con.print(coverage(report))


def side_by_side(con: Any, two: list[Any]) -> None:
    """Two completed outcomes whose gradients differ: their gradients and schedules."""
    from rich.table import Table

    a, b = (s.shortest for s in two)
    table = Table(title="the gradients differ with the interleaving (bit-exact)")
    table.add_column("")
    table.add_column(f"A: {two[0].count} schedules", overflow="fold")
    table.add_column(f"B: {two[1].count} schedules", overflow="fold")
    table.add_row("schedule", _text(a.schedule), _text(b.schedule))
    for name in sorted(set(a.gradients) | set(b.gradients)):
        ga, gb = a.gradients.get(name), b.gradients.get(name)
        same = ga is not None and gb is not None and np.array_equal(ga, gb)
        table.add_row(_text(f"grad {name}" + ("" if same else " (differs)")),
                      _text("-" if ga is None else _gradient_words(ga)),
                      _text("-" if gb is None else _gradient_words(gb)))
    con.print(table)


def _count(n: int, word: str) -> str:
    """``1 run``, ``2 runs``, ``0 runs``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def coverage(report: Any) -> str:
    head = (f"explored {_count(report.explored, 'schedule')} ({report.pruned} pruned by the "
            f"reduction, {_count(report.runs, 'run')}) in {report.seconds:.1f} s")
    if report.strategy == "dfs" and report.bound is not None:
        if report.complete:
            head += f"; every schedule up to {_count(report.bound, 'preemption')} covered"
        else:
            head += f"; bound {report.bound} not finished"
    if report.stopped not in ("done",):
        head += f"; stopped: {'Ctrl-C' if report.stopped == 'interrupted' else report.stopped}"
        head += "" if report.stopped == "interrupted" else " budget reached"
    return head


def to_json(report: Any, replay: dict[Any, str]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "scenario": report.scenario, "strategy": report.strategy,
        "explored": report.explored, "pruned": report.pruned, "runs": report.runs,
        "bound": report.bound, "complete": report.complete, "stopped": report.stopped,
        "seconds": round(report.seconds, 3),
        "per_bound": {str(k): v for k, v in report.per_bound.items()}, "outcomes": []}
    for o, s in report.outcomes.items():
        r = s.shortest
        item: dict[str, Any] = {
            "kind": o.kind, "detail": o.detail, "count": s.count, "schedule": r.schedule,
            "preemptions": r.preemptions, "events": r.events, "replay": replay[o],
            "first_after": s.first_after, "first_seconds": round(s.first_seconds, 3)}
        if o.kind == "completed":
            item["gradients"] = {k: _plain(np.asarray(v).tolist())
                                 for k, v in r.gradients.items()}
        if o.kind == "deadlock":
            item["cycle"] = list(r.cycle)
        out["outcomes"].append(item)
    return out


def _plain(v: Any) -> Any:
    """JSON has no NaN or Infinity: a non-finite float is written as its name."""
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, float) and not np.isfinite(v):
        return str(v)
    return v
