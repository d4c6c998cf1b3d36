"""``autograd-tui chrome-trace``: a run in Chrome's Trace Event Format (Perfetto)."""

from __future__ import annotations

import argparse
from typing import Any

from autograd_tui.commands.common import (
    EXIT_OK,
    FORMATTER,
    add_run_options,
    examples,
    is_recording,
    load_recording,
    make_run,
    output_file,
    program_error_text,
    run_to_end,
    say,
)
from autograd_tui.files import shown


def add_parser(sub: Any) -> None:
    p = sub.add_parser("chrome-trace", help="export a Chrome/Perfetto trace",
                       formatter_class=FORMATTER,
                       description="Write a run (a scenario, run now, or a recording) in "
                                   "Chrome's Trace Event Format, for Perfetto or "
                                   "chrome://tracing.",
                       epilog=examples("autograd-tui chrome-trace reentrant -o trace.json",
                                       "autograd-tui chrome-trace run.jsonl -o trace.json"))
    p.add_argument("source", metavar="NAME|FILE")
    p.add_argument("-o", "--output", required=True, metavar="OUT.json")
    add_run_options(p, what="for a scenario: ")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from autograd_tui.export.chrome_trace import write_chrome_trace

    output = output_file(args.output, "-o/--output")
    if is_recording(args.source):
        rec = load_recording(args.source)
        events, header = rec.events, rec.header
    else:
        r = make_run(args.source, args)
        try:
            run_to_end(r)
            if r.error is not None:
                say(f"note: the scenario's program stopped ({program_error_text(r.error)}); "
                    "writing the events up to there")
            events, header = r.events, r.header()
        finally:
            r.close()
    write_chrome_trace(output, events, header)
    print(f"wrote {shown(output)} ({len(events)} events); open it in https://ui.perfetto.dev "
          "or chrome://tracing")
    return EXIT_OK
