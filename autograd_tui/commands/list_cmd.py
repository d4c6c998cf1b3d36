"""``autograd-tui list``: the built-in scenarios, as a table or one name a line."""

from __future__ import annotations

import argparse
from typing import Any

from autograd_tui.commands.common import EXIT_OK, FORMATTER, console, examples


def add_parser(sub: Any) -> None:
    p = sub.add_parser("list", help="list the built-in scenarios", formatter_class=FORMATTER,
                       description="List the built-in scenarios.",
                       epilog=examples("autograd-tui list", "autograd-tui list --names"))
    p.add_argument("--names", action="store_true", help="print only the names, one a line")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
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
    con = console()
    con.print(table)
    for s in scenarios.builtins(everything=True):
        why = s.missing()
        if why is not None:  # a PyTorch example where torch is absent: say why it is not here
            con.print(f"skipped {s.name}: {why}", markup=False)  # [torch] is no markup
    return EXIT_OK
