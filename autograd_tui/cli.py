"""The command line: ``autograd-tui`` (also ``python -m autograd_tui``).

Every command has ``--help`` with examples.  Exit codes: 0 the run completed
(or the command did its job), 1 an error in the scenario's program or a file,
2 bad usage, 3 a deadlock was detected.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from autograd_tui import __version__

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_DEADLOCK = 0, 1, 2, 3



class UsageError(Exception):
    """Bad usage caught after parsing (exit code 2)."""


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="autograd-tui", formatter_class=fmt,
        description="Step through a re-implementation of PyTorch's autograd engine and watch "
                    "the backward pass run. With no command, opens the app on linear-relu.",
        epilog=_examples("autograd-tui", "autograd-tui list",
                         "autograd-tui run linear-relu --headless",
                         "autograd-tui run deadlock-reentrant-block --headless",
                         "autograd-tui replay run.jsonl"),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("list", help="list the built-in scenarios", formatter_class=fmt,
                       description="List the built-in scenarios.",
                       epilog=_examples("autograd-tui list", "autograd-tui list --names"))
    p.add_argument("--names", action="store_true", help="print only the names, one a line")

    p = sub.add_parser("show", help="show a scenario's teaching notes", formatter_class=fmt,
                       description="Print a scenario's teaching notes (Markdown, rendered).",
                       epilog=_examples("autograd-tui show linear-relu",
                                        "autograd-tui show my_scenario.py"))
    p.add_argument("scenario", metavar="NAME|PATH")

    p = sub.add_parser(
        "run", help="run a scenario (the app, or --headless for a text trace)",
        formatter_class=fmt,
        description="Run a scenario under the controller. Without --headless, opens the app; "
                    "with it, runs to the end and prints the trace and a summary.",
        epilog=_examples(
            "autograd-tui run linear-relu --headless",
            "autograd-tui run chain --param n=10 --headless",
            "autograd-tui run multi-device --policy random --seed 3 --headless",
            "autograd-tui run multi-device --policy schedule:0:40,1:12,0:5 --headless",
            "autograd-tui run reentrant-deep --engine max_recursion_depth=10 --headless",
            "autograd-tui run linear-relu --headless --record run.jsonl.gz",
            "autograd-tui run ./my_scenario.py --headless"))
    p.add_argument("scenario", metavar="NAME|PATH")
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="set a scenario parameter (repeatable)")
    p.add_argument("--policy", default="round-robin",
                   help="round-robin (default), random, or schedule:STRING")
    p.add_argument("--seed", type=int, default=0, help="seed for --policy random (default 0)")
    p.add_argument("--engine", action="append", default=[], metavar="K=V",
                   help="set an engine option, e.g. reentrant=block, wake_owner=false "
                        "(repeatable)")
    p.add_argument("--record", metavar="FILE", help="write a recording (.jsonl or .jsonl.gz)")
    p.add_argument("--full-tensors", action="store_true",
                   help="store whole tensors in the recording, not summaries")
    p.add_argument("--headless", action="store_true", help="no app: print a trace")
    p.add_argument("--quiet", action="store_true", help="--headless: the summary only")
    p.add_argument("--timings", action="store_true", help="also print how long it took")

    p = sub.add_parser("replay", help="open (or print) a recording", formatter_class=fmt,
                       description="Open a recording in the app, or print it with --headless. "
                                   "--reexecute runs the real engine again under the "
                                   "recorded schedule and reports the first divergence.",
                       epilog=_examples("autograd-tui replay run.jsonl",
                                        "autograd-tui replay run.jsonl.gz --headless",
                                        "autograd-tui replay run.jsonl --reexecute"))
    p.add_argument("file", metavar="FILE")
    p.add_argument("--headless", action="store_true", help="no app: print the trace")
    p.add_argument("--reexecute", action="store_true",
                   help="run the engine again under the recorded schedule and compare")

    p = sub.add_parser("chrome-trace", help="export a Chrome/Perfetto trace",
                       formatter_class=fmt,
                       description="Write a run (a scenario, run now, or a recording) in "
                                   "Chrome's Trace Event Format, for Perfetto or "
                                   "chrome://tracing.",
                       epilog=_examples("autograd-tui chrome-trace reentrant -o trace.json",
                                        "autograd-tui chrome-trace run.jsonl -o trace.json"))
    p.add_argument("source", metavar="NAME|FILE")
    p.add_argument("-o", "--output", required=True, metavar="OUT.json")
    p.add_argument("--policy", default="round-robin")
    p.add_argument("--seed", type=int, default=0)

    p = sub.add_parser("export", help="export Graphviz snapshots (DOT, SVG, PNG, PDF, frames)",
                       formatter_class=fmt)
    from autograd_tui import export_cmd

    export_cmd.add_arguments(p)
    return parser


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise UsageError(f"{what} {item!r} must look like KEY=VALUE")
        out[k.strip()] = v
    return out


def _console(stream: Any = None, soft_wrap: bool = True) -> Any:
    from rich.console import Console

    return Console(file=stream or sys.stdout, highlight=False, soft_wrap=soft_wrap)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``) and run; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from autograd_tui.history.recordings import TraceError
    from autograd_tui.scenarios import ScenarioError

    try:
        if args.command is None:
            return _open_app(None)
        return {"list": cmd_list, "show": cmd_show, "run": cmd_run, "replay": cmd_replay,
                "chrome-trace": cmd_chrome_trace, "export": cmd_export}[args.command](args)
    except UsageError as e:
        print(f"autograd-tui: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (ScenarioError, TraceError) as e:
        print(f"autograd-tui: {e}", file=sys.stderr)
        return EXIT_USAGE if getattr(e, "usage", False) else EXIT_ERROR
    except KeyboardInterrupt:
        print("autograd-tui: interrupted", file=sys.stderr)
        return 130


# --- commands ---------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    from autograd_tui import scenarios

    items = scenarios.builtins()
    if args.names:
        for s in items:
            print(s.name)
        return EXIT_OK
    from rich.table import Table

    table = Table(title="Built-in scenarios", title_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("summary")
    table.add_column("threads")
    table.add_column("deadlocks", no_wrap=True)
    for s in items:
        table.add_row(s.name, s.summary, ", ".join(s.threads),
                      "yes" if s.expect == "deadlock" else "no")
    _console().print(table)
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    from rich.markdown import Markdown

    from autograd_tui import scenarios

    s = scenarios.load(args.scenario)
    con = _console(soft_wrap=False)
    con.print(f"[bold]{s.name}[/bold]: {s.title}")
    if s.params:
        con.print("parameters: " + ", ".join(f"{k}={p.default!r} ({p.help})" if p.help
                                             else f"{k}={p.default!r}"
                                             for k, p in s.params.items()))
    if s.engine:
        con.print("engine: " + ", ".join(f"{k}={v!r}" for k, v in s.engine.items()))
    con.print(Markdown(s.notes or "_(no notes)_"))
    return EXIT_OK


def _make_run(args: argparse.Namespace) -> Any:
    from autograd_tui import scenarios
    from autograd_tui.control import make_policy
    from autograd_tui.runner import Run

    try:
        make_policy(args.policy, args.seed)
    except ValueError as e:
        raise UsageError(str(e)) from None
    scenario = scenarios.load(args.scenario)
    return Run(scenario, _pairs(args.param, "--param"), policy=args.policy, seed=args.seed,
               engine_overrides=_pairs(args.engine, "--engine"),
               full_tensors=getattr(args, "full_tensors", False))


def cmd_run(args: argparse.Namespace) -> int:
    run = _make_run(args)
    if not args.headless:
        run.close()
        return _open_app(args)
    from autograd_tui.control import ScheduleDivergence

    t0 = time.perf_counter()
    try:
        try:
            result = run.run()
        except ScheduleDivergence as e:
            raise UsageError(f"--policy schedule: {e}") from None
        elapsed = time.perf_counter() - t0
        con = _console()
        if not args.quiet:
            print_trace(con, run.events)
        status = _summary(con, run, result)
        if args.record:
            run.save(args.record)
            con.print(f"recorded {len(run.events)} events to {args.record}")
        if args.timings:
            con.print(f"time: {elapsed:.3f} s")
        return status
    finally:
        run.close()


def print_trace(con: Any, events: list[Any]) -> None:
    from rich.text import Text

    from autograd_tui.words import KIND_STYLE, format_event

    names: dict[int, str] = {}
    for e in events:
        if e.kind == "dependencies_computed":
            for n in e.data["nodes"]:
                names[n["id"]] = n["name"]
    for e in events:
        con.print(Text(format_event(e, names), style=KIND_STYLE.get(e.kind, "")))


def _summary(con: Any, run: Any, result: Any) -> int:
    threads = sorted({e.thread for e in run.events if e.thread != "controller"})
    con.print()
    con.print(f"scenario: {run.scenario.name}")
    con.print(f"events: {len(run.events)}")
    con.print(f"threads: {', '.join(threads)}")
    if result.status == "deadlock":
        con.print("[bold red]deadlock detected[/bold red]")
        con.print(result.report.explanation)
        con.print("cycle: " + " -> ".join(result.report.cycle))
        code = EXIT_DEADLOCK
    elif run.error is not None:
        err = run.error
        con.print(f"[bold red]error in the scenario's program[/bold red] "
                  f"({run.scenario.source}): {type(err).__name__}: {err}")
        code = EXIT_ERROR
    elif result.status == "finished":
        con.print("[bold green]completed[/bold green]")
        for k, v in run.gradients().items():
            con.print(f"grad {k} = {_fmt_array(v)}")
        code = EXIT_OK
    else:
        con.print(f"stopped: {result.status}"
                  + (f": {result.report.explanation}" if result.report else ""))
        code = EXIT_ERROR
    con.print(f"schedule: {run.controller.schedule_string()}")
    return code


def _fmt_array(v: Any) -> str:
    import numpy as np

    return np.array2string(np.asarray(v), precision=6, separator=", ",
                           suppress_small=True).replace("\n", "")


BIG_RECORDING = 8 * 2**20  # bytes: say what is happening while a file this big loads


def load_recording(path: str) -> Any:
    """``recordings.load``, with a line on stderr before and after a big file (a
    million events take a few seconds)."""
    from autograd_tui.history import recordings as trace

    size = os.path.getsize(path) if os.path.isfile(path) else 0
    if size < BIG_RECORDING:
        return trace.load(path)
    print(f"loading {path} ({size / 2**20:.0f} MiB): reading, checking and folding every "
          "event...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    rec = trace.load(path)
    print(f"loaded {len(rec.events):,} events in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr, flush=True)
    return rec


def cmd_replay(args: argparse.Namespace) -> int:
    rec = load_recording(args.file)
    if args.reexecute:
        from autograd_tui.runner import reexecute

        run, divergence = reexecute(rec)
        try:
            con = _console()
            if divergence is None:
                con.print(f"re-executed {rec.scenario}: {len(run.events)} events, identical "
                          "to the recording")
                return EXIT_OK
            con.print(f"[bold red]diverged[/bold red] at event {divergence.index}:")
            con.print(f"  expected: {divergence.expected}")
            con.print(f"  got:      {divergence.got}")
            return EXIT_ERROR
        finally:
            run.close()
    if not args.headless:
        return _open_app(args, recording=rec)
    con = _console()
    print_trace(con, rec.events)
    con.print()
    con.print(f"recording: {args.file}")
    con.print(f"scenario: {rec.scenario}")
    con.print(f"events: {len(rec.events)}")
    status = rec.footer.get("status", "completed")
    con.print(f"status: {status}")
    for k, v in (rec.footer.get("gradients") or {}).items():
        if v is not None:
            con.print(f"grad {k} = {v['values']} (shape {v['shape']}, norm {v['norm']:.6g})")
    con.print(f"schedule: {rec.footer.get('schedule', '')}")
    return EXIT_DEADLOCK if status == "deadlock" else EXIT_OK


def cmd_chrome_trace(args: argparse.Namespace) -> int:
    from autograd_tui.history.chrome_trace import write_chrome_trace

    src = args.source
    if os.path.exists(src) and not src.endswith(".py"):
        rec = load_recording(src)
        events, header = rec.events, rec.header
    else:
        ns = argparse.Namespace(scenario=src, param=[], policy=args.policy, seed=args.seed,
                                engine=[], full_tensors=False)
        run = _make_run(ns)
        try:
            run.run()
            events, header = run.events, run.header()
        finally:
            run.close()
    write_chrome_trace(args.output, events, header)
    print(f"wrote {args.output} ({len(events)} events); open it in https://ui.perfetto.dev "
          "or chrome://tracing")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from autograd_tui import export_cmd

    return export_cmd.run(args)


def _open_app(args: argparse.Namespace | None, recording: Any = None) -> int:
    # Imported lazily so that the other commands stay fast.
    from autograd_tui.app import AutogradApp

    if recording is not None:
        app = AutogradApp(recording=recording)
    elif args is not None and getattr(args, "scenario", None):
        app = AutogradApp(args.scenario, params=_pairs(args.param, "--param"),
                          policy=args.policy, seed=args.seed,
                          engine_overrides=_pairs(args.engine, "--engine"))
    else:
        app = AutogradApp()
    app.run()
    return app.return_code or 0
