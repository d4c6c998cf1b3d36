"""``autograd-tui run``: a scenario under the controller, in the app or headless.

Without ``--headless`` the arguments are checked here (one message, exit 2, for
a mistake) and the app builds the one Run; with it, the run goes to the end here
and prints the trace, the gradients and the schedule that replays it.  An error
in the scenario's program is exit 1 (its ``sys.exit(5)`` included: the code the
program chose is not ours to return), after the trace and the recording.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from autograd_tui.commands.common import (
    EXIT_DEADLOCK,
    EXIT_ERROR,
    EXIT_OK,
    FORMATTER,
    add_run_options,
    add_stop_option,
    app_only_options,
    check_run_args,
    console,
    examples,
    exit_call,
    make_run,
    open_app,
    outcome_problem,
    output_file,
    pairs,
    print_text,
    program_error_text,
    report_headless,
    run_to_end,
    say,
    say_program_error,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run", help="run a scenario (the app, or --headless for a text trace)",
        formatter_class=FORMATTER,
        description="Run a scenario under the controller. Without --headless, opens the app; "
                    "with it, runs to the end and prints the trace and a summary.",
        epilog=examples(
            "autograd-tui run linear-relu --headless",
            "autograd-tui run chain --param n=10 --headless",
            "autograd-tui run multi-device --policy random --seed 3 --headless",
            "autograd-tui run multi-device --policy schedule:1:40,2:6,1:5 --headless",
            "autograd-tui run reentrant-deep --engine max_recursion_depth=10 --headless",
            "autograd-tui run linear-relu --headless --record run.jsonl.gz",
            "autograd-tui run ./my_scenario.py --headless",
            "autograd-tui run anomaly-nan --headless --stop-at nonfinite",
            "autograd-tui run linear-relu --headless --stop-at \"node_start ReluBackward0\""))
    p.add_argument("scenario", metavar="NAME|PATH")
    add_run_options(p)
    p.add_argument("--record", metavar="FILE", help="write a recording (.jsonl or .jsonl.gz)")
    p.add_argument("--full-tensors", action="store_true",
                   help="store whole tensors in the recording, not summaries")
    p.add_argument("--headless", action="store_true", help="no app: print a trace")
    p.add_argument("--quiet", action="store_true", help="--headless: the summary only")
    p.add_argument("--timings", action="store_true", help="also print how long it took")
    add_stop_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    record = output_file(args.record, "--record")
    if not args.headless:
        app_only_options(args, record)
        check_run_args(args.scenario, args)
        return open_app(args.scenario, params=pairs(args.param, "--param"),
                        policy=args.policy, seed=args.seed,
                        engine_overrides=pairs(args.engine, "--engine"))
    r = make_run(args.scenario, args, full_tensors=args.full_tensors)
    try:
        t0 = time.perf_counter()
        result = run_to_end(r, args.stop_at)
        elapsed = time.perf_counter() - t0
        con = console()
        status = report_headless(con, r, result, args, record, _summary)
        if isinstance(r.error, SystemExit):  # a message where the shell sees it, not only a code
            say(f"{r.scenario.source}: the scenario's program called {exit_call(r.error)}")
        if args.timings:
            con.print(f"time: {elapsed:.3f} s")
        return status
    finally:
        r.close()


def _summary(con: Any, run: Any, result: Any) -> int:
    """The lines after the trace; returns the exit code the run deserves."""
    threads = sorted(t for t in run.events.thread_names() if t != "controller")
    con.print()
    # print_text where the words come from the program or the engine (a scenario file's
    # names, an error's message): a "[...]" in them is text, not a style
    print_text(con, f"scenario: {run.scenario.name}")
    con.print(f"events: {len(run.events)}")
    if threads:  # none when the program failed before any backward: no empty line
        print_text(con, f"threads: {', '.join(threads)}")
    if result.status == "deadlock":
        con.print("[bold red]deadlock detected[/bold red]")
        print_text(con, result.report.explanation)
        print_text(con, "cycle: " + " -> ".join(result.report.cycle))
        code = EXIT_DEADLOCK
    elif run.error is not None:
        located = say_program_error(run)  # file, line and source line, on stderr
        con.print("[bold red]error in the scenario's program[/bold red]", end=" ")
        where = located.where if located is not None and located.where else run.scenario.source
        print_text(con, f"({where}): {program_error_text(run.error)}")
        code = EXIT_ERROR
    elif (problem := outcome_problem(run, result)) is not None:
        say(problem)  # on stderr; the summary says it too, for a reader of the trace
        con.print("[bold red]not what the scenario says[/bold red]", end=" ")
        print_text(con, problem)
        code = EXIT_ERROR
    elif result.status == "finished":
        con.print("[bold green]completed[/bold green]")
        for k, v in run.gradients().items():
            print_text(con, f"grad {k} = {_fmt_array(v)}")
        code = EXIT_OK
    else:
        print_text(con, f"stopped: {result.status}"
                   + (f": {result.report.explanation}" if result.report else ""))
        code = EXIT_ERROR
    con.print(f"schedule: {run.controller.schedule_string()}")
    return code


def _fmt_array(v: Any) -> str:
    import numpy as np

    return np.array2string(np.asarray(v), precision=6, separator=", ",
                           suppress_small=True).replace("\n", "")
