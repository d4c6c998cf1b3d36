"""``autograd-tui chrome-trace``: a run in Chrome's Trace Event Format (Perfetto).

Given several recordings, or a folder of them (``torch --ranks N --record DIR``), it
merges them: one Chrome-trace process per rank (``export/chrome_ranks.py``)."""

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
from autograd_tui.commands.torch_ranks import rank_files
from autograd_tui.files import shown


def add_parser(sub: Any) -> None:
    p = sub.add_parser("chrome-trace", help="export a Chrome/Perfetto trace",
                       formatter_class=FORMATTER,
                       description="Write a run (a scenario, run now, or a recording) in "
                                   "Chrome's Trace Event Format, for Perfetto or "
                                   "chrome://tracing.",
                       epilog=examples("autograd-tui chrome-trace reentrant -o trace.json",
                                       "autograd-tui chrome-trace run.jsonl -o trace.json",
                                       "autograd-tui chrome-trace runs/ -o ranks.json",
                                       "autograd-tui chrome-trace rank0.jsonl.gz "
                                       "rank1.jsonl.gz -o ranks.json"))
    p.add_argument("source", metavar="NAME|FILE", nargs="+",
                   help="a scenario, a recording, or several ranks' recordings (files, "
                        "or the folder torch --ranks N --record DIR wrote): one process "
                        "per rank")
    p.add_argument("-o", "--output", required=True, metavar="OUT.json")
    add_run_options(p, what="for a scenario: ")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from autograd_tui.export.chrome_trace import write_chrome_trace

    output = output_file(args.output, "-o/--output")
    files = rank_files(args.source)
    if files is not None:
        return _merge([load_recording(f) for f in files], output)
    source = args.source[0]
    if is_recording(source):
        rec = load_recording(source)
        if isinstance(rec.header.get("distributed"), dict):  # one rank: its process too
            return _merge([rec], output)
        events, header = rec.events, rec.header
    else:
        r = make_run(source, args)
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


def _merge(recs: list[Any], output: str | None) -> int:
    from autograd_tui.export.chrome_ranks import merge_chrome_traces
    from autograd_tui.export.chrome_trace import write_trace_object

    trace = merge_chrome_traces([(r.events, r.header) for r in recs])
    assert output is not None
    write_trace_object(output, trace)
    ranks = ", ".join(str(r["rank"]) for r in trace["metadata"]["ranks"])
    what = f"{len(recs)} ranks: {ranks}, a process each" if len(recs) > 1 else f"rank {ranks}"
    print(f"wrote {shown(output)} ({sum(len(r.events) for r in recs)} events of {what}); "
          "open it in https://ui.perfetto.dev or chrome://tracing")
    return EXIT_OK
