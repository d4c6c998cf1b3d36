"""``autograd-tui show``: a scenario's title, parameters, engine options and notes; with
``--nodes``, the table of its backward graph's nodes (sequence_nr, name, forward op) that a
lesson author copies into ``FORWARD``.

On a terminal the notes are Markdown rendered by Rich; in a pipe or a file they are the
Markdown text itself, every line without trailing spaces (Rich pads a rendered line to the
width), so that ``show NAME > notes.md`` or ``| grep`` gets plain text.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from autograd_tui.commands.common import (
    EXIT_OK,
    FORMATTER,
    console,
    examples,
    load_scenario,
    pairs,
    print_text,
    run_to_end,
)
from autograd_tui.commands.progress import is_terminal
from autograd_tui.words import seq_text


def add_parser(sub: Any) -> None:
    p = sub.add_parser("show", help="show a scenario's teaching notes", formatter_class=FORMATTER,
                       description="Print a scenario's teaching notes (Markdown, rendered on a "
                                   "terminal, plain text in a pipe); with --nodes, run it and "
                                   "print each node's sequence_nr, name and forward op "
                                   "(FORWARD's keys and labels).",
                       epilog=examples("autograd-tui show linear-relu",
                                       "autograd-tui show my_scenario.py",
                                       "autograd-tui show my_scenario.py --nodes"))
    p.add_argument("scenario", metavar="NAME|PATH")
    p.add_argument("--nodes", action="store_true",
                   help="run the scenario and print its nodes: sequence_nr, name, forward op")
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="--nodes: set a scenario parameter (repeatable)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    s = load_scenario(args.scenario)
    if args.nodes:
        return _nodes(s, pairs(args.param, "--param"))
    terminal = is_terminal(sys.stdout)
    con = console(soft_wrap=not terminal)  # in a pipe: no wrapping, so no padding
    if terminal:
        con.print(f"[bold]{s.name}[/bold]: {s.title}")
    else:
        print_text(con, f"{s.name}: {s.title}")
    if s.params:
        print_text(con, "parameters: " + ", ".join(f"{k}={p.default!r} ({p.help})" if p.help
                                                   else f"{k}={p.default!r}"
                                                   for k, p in s.params.items()))
    if s.engine:
        print_text(con, "engine: " + ", ".join(f"{k}={v!r}" for k, v in s.engine.items()))
    if terminal:
        from rich.markdown import Markdown

        con.print(Markdown(s.notes or "_(no notes)_"))
    else:
        print_text(con, "")
        for line in (s.notes or "_(no notes)_").strip("\n").splitlines():
            print_text(con, line.rstrip())
    return EXIT_OK


def node_rows(scenario: Any, params: dict[str, str]
              ) -> tuple[list[tuple[int, str, str]], int]:
    """``(sequence_nr, name, forward op)`` of each node of a run of ``scenario``, by
    sequence_nr (AccumulateGrad's is the largest, as in PyTorch: it never leads; the
    leaves' share one row), and how many nodes there are."""
    from autograd_tui.history.recordings import graph_of
    from autograd_tui.session.run import Run

    r = Run(scenario, params)
    try:
        run_to_end(r)
        nodes = graph_of(r.events)["nodes"]
    finally:
        r.close()
    rows = {(n["seq"], n["name"]) for n in nodes}
    return [(seq, name, ", ".join(scenario.forward.get(seq, ())) or "-")
            for seq, name in sorted(rows)], len(nodes)


def _nodes(scenario: Any, params: dict[str, str]) -> int:
    con = console(soft_wrap=True)
    rows, n_nodes = node_rows(scenario, params)
    width = max([len("node")] + [len(name) for _, name, _ in rows])
    # AccumulateGrad's UINT64_MAX reads "max", as in the trace (it has no FORWARD key)
    digits = max([len("sequence_nr")] + [len(seq_text(seq)) for seq, _, _ in rows])
    print_text(con, f"{'sequence_nr':>{digits}}  {'node':<{width}}  forward op (FORWARD)")
    for seq, name, label in rows:
        print_text(con, f"{seq_text(seq):>{digits}}  {name:<{width}}  {label}".rstrip())
    shared = "" if n_nodes == len(rows) else f" in {len(rows)} rows (AccumulateGrads share one)"
    print_text(con, f"{n_nodes} nodes{shared}; FORWARD = {{sequence_nr: (op name, input "
               "names...)} (docs/scenarios.md)")
    return EXIT_OK
