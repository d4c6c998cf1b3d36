"""``autograd-tui replay``: a recording in the app, as text, or re-executed.

A recording is untrusted data: everything printed from it is printed as text
(no rich markup), and ``--reexecute`` runs a built-in scenario by the name the
file gives, or a file the user names (``runner.reexecute``).
"""

from __future__ import annotations

import argparse
from typing import Any

from autograd_tui.commands.common import (
    EXIT_DEADLOCK,
    EXIT_ERROR,
    EXIT_OK,
    FORMATTER,
    console,
    examples,
    load_recording,
    open_app,
    print_trace,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("replay", help="open (or print) a recording", formatter_class=FORMATTER,
                       description="Open a recording in the app, or print it with --headless. "
                                   "--reexecute runs the real engine again under the "
                                   "recorded schedule and reports the first divergence.",
                       epilog=examples("autograd-tui replay run.jsonl",
                                       "autograd-tui replay run.jsonl.gz --headless",
                                       "autograd-tui replay run.jsonl --reexecute"))
    p.add_argument("file", metavar="FILE")
    p.add_argument("--headless", action="store_true", help="no app: print the trace")
    p.add_argument("--reexecute", action="store_true",
                   help="run the engine again under the recorded schedule and compare")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rec = load_recording(args.file)
    if args.reexecute:
        return _reexecute(rec)
    if not args.headless:
        return open_app(recording=rec)
    con = console()
    print_trace(con, rec.events)
    con.print()
    lines = [f"recording: {args.file}", f"scenario: {rec.scenario}",
             f"events: {len(rec.events)}"]
    status = rec.footer.get("status", "completed")
    lines.append(f"status: {status}")
    grads = rec.footer.get("gradients")
    for k, v in (grads.items() if isinstance(grads, dict) else ()):
        if v is not None:
            lines.append(_grad_line(k, v))
    lines.append(f"schedule: {rec.footer.get('schedule', '')}")
    for line in lines:
        con.print(line, markup=False)
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


def _reexecute(rec: Any) -> int:
    from autograd_tui.runner import reexecute

    r, divergence = reexecute(rec)
    try:
        con = console()
        if divergence is None:
            con.print(f"re-executed {rec.scenario}: {len(r.events)} events, identical "
                      "to the recording", markup=False)
            return EXIT_OK
        con.print(f"[bold red]diverged[/bold red] at event {divergence.index}:")
        con.print(f"  expected: {divergence.expected}", markup=False)
        con.print(f"  got:      {divergence.got}", markup=False)
        return EXIT_ERROR
    finally:
        r.close()
