"""``autograd-tui replay``: a recording in the app, as text, or re-executed.

A recording is untrusted data: everything printed from it is printed as text
(``print_text``: no Rich markup, control characters made visible), and
``--reexecute`` runs a built-in scenario by the name the file gives, or the
scenario the person names with ``--scenario NAME|PATH`` (``runner.reexecute``):
never a file the recording names.  Several ranks' recordings (files, or the folder
``torch --ranks N --record DIR`` wrote) open side by side, a debugger per rank.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from autograd_tui.commands.common import (
    EXIT_DEADLOCK,
    EXIT_ERROR,
    EXIT_OK,
    FORMATTER,
    Failure,
    UsageError,
    console,
    examples,
    load_recording,
    open_app,
    print_text,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("replay", help="open (or print) a recording", formatter_class=FORMATTER,
                       description="Open a recording in the app, or print it with --headless. "
                                   "--reexecute runs the real engine again under the "
                                   "recorded schedule and reports the first divergence.",
                       epilog=examples("autograd-tui replay run.jsonl",
                                       "autograd-tui replay run.jsonl.gz --headless",
                                       "autograd-tui replay run.jsonl --reexecute",
                                       "autograd-tui replay run.jsonl --reexecute "
                                       "--scenario ./my_scenario.py",
                                       "autograd-tui replay runs/    # torch --ranks 2 "
                                       "--record runs/"))
    p.add_argument("files", metavar="FILE", nargs="+",
                   help="a recording; or several ranks' recordings (files, or a folder of "
                        "rank*.jsonl.gz): side by side, < and > go from rank to rank")
    p.add_argument("--headless", action="store_true", help="no app: print the trace")
    p.add_argument("--reexecute", action="store_true",
                   help="run the engine again under the recorded schedule and compare")
    p.add_argument("--scenario", metavar="NAME|PATH",
                   help="--reexecute: the scenario to run (a built-in name or a .py file); "
                        "needed when the recording's scenario is not a built-in one: a "
                        "recording never chooses a file to run")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.scenario is not None and not args.reexecute:
        raise UsageError("--scenario goes with --reexecute (it names the scenario to run)")
    from autograd_tui.commands.torch_ranks import rank_files

    files = rank_files(args.files)
    if files is not None:
        if args.reexecute:
            raise UsageError("--reexecute takes one recording, not several ranks'")
        recs = [load_recording(f, background=not args.headless) for f in files]
        if not args.headless:
            return open_app(recordings=recs)
        codes = [_print(f, rec) for f, rec in zip(files, recs, strict=True)]
        return max(codes)
    # the app checks the fold in the background, as it shows the recording
    file = args.files[0]
    rec = load_recording(file, background=not (args.headless or args.reexecute))
    if args.reexecute:
        return _reexecute(rec, args.scenario)
    if not args.headless:
        return open_app(recording=rec)
    return _print(file, rec)


def _print(file: str, rec: Any) -> int:
    """``--headless``: the recording's trace and summary; the exit code."""
    from autograd_tui.export.text import print_trace
    from autograd_tui.history.ddp import never_ready_lines

    con = console()
    print_trace(rec.events, con)
    con.print()
    lines = [f"recording: {file}", f"scenario: {rec.scenario}",
             f"events: {len(rec.events)}"]
    status = rec.footer.get("status", "completed")
    d = rec.header.get("distributed")
    if isinstance(d, dict):
        lines.append(f"rank: {d.get('rank')} of {d.get('world_size')}")
    lines.append(f"status: {status}")
    error = rec.footer.get("error")
    if isinstance(error, str) and error:  # what the run said, as it said it (escaped)
        lines.append(f"error: {error}")
    grads = rec.footer.get("gradients")
    for k, v in (grads.items() if isinstance(grads, dict) else ()):
        if v is not None:
            lines.append(_grad_line(k, v))
    missing = rec.footer.get("no_gradient")
    for k, why in (missing.items() if isinstance(missing, dict) else ()):
        lines.append(f"no grad {k}: {why}")
    lines += [f"ddp: {line}" for line in never_ready_lines(rec.events)]
    lines.append(f"schedule: {rec.footer.get('schedule', '')}")
    for line in lines:
        print_text(con, line)
    return EXIT_DEADLOCK if status == "deadlock" else EXIT_OK


def _grad_line(name: str, v: Any) -> str:
    """A gradient summary from the footer, whatever the file holds (a NaN norm is the
    string "nan": JSON has no NaN)."""
    if not isinstance(v, dict):
        return f"grad {name} = {v!r}"
    norm = v.get("norm")
    if isinstance(norm, (int, float)) and not isinstance(norm, bool):
        norm = f"{norm:.6g}"
    return f"grad {name} = {v.get('values')} (shape {v.get('shape')}, norm {norm})"


def _reexecute(rec: Any, scenario: str | None) -> int:
    from autograd_tui.commands.progress import progress
    from autograd_tui.control import ScheduleDivergence
    from autograd_tui.session.run import reexecute

    # Only a scenario the person names on the command line may be a file.
    named = _named(scenario, rec.header) if scenario else None
    try:
        with progress(len(rec.events), f"re-executing {rec.scenario or 'the recording'}") as bar:
            done = [0]

            def on_events(n: int) -> None:
                bar.advance(n - done[0])
                done[0] = n

            r, divergence = reexecute(rec, named, on_events=on_events)
    except ScheduleDivergence as e:  # the file's schedule is data, and may not fit
        raise Failure(f"the recorded schedule does not fit the run: {e}") from None
    try:
        con = console()
        if divergence is None:
            print_text(con, f"re-executed {r.scenario.name}: {len(r.events)} events, "
                            "identical to the recording")
            return EXIT_OK
        from autograd_tui.words import node_names

        head, *rest = divergence.lines(node_names(rec.events))
        print_text(con, head, style="bold red")
        for line in rest:
            print_text(con, line)
        if "torch" in sys.modules:  # the scenario ran PyTorch's kernels: theirs may vary
            from autograd_tui.session.grad_compare import mkl_note

            if (note := mkl_note()) is not None:
                print_text(con, f"note: {note}")
        return EXIT_ERROR
    finally:
        r.close()


def _named(source: str, header: Any) -> Any:
    """The scenario ``--scenario`` names: a built-in, a scenario file, or a PyTorch script
    (a file that imports torch: run as ``autograd-tui torch`` ran it for the recording,
    with the entry or Nth backward call and the script's arguments its header keeps)."""
    from pathlib import Path

    from autograd_tui import scenarios
    from autograd_tui.session.program_errors import load_scenario
    from autograd_tui.session.torch_script import folder_on_path

    try:
        if not Path(source).is_file():
            return load_scenario(source)
        with folder_on_path(Path(source)):  # a sibling module it imports, as `torch` finds it
            return load_scenario(source)
    except scenarios.ImportsTorch:
        from autograd_tui.session.plain_script import recorded_script
        from autograd_tui.session.torch_script import script_scenario

        entry, backward, argv = recorded_script(header)
        return script_scenario(source, entry, backward, argv)
