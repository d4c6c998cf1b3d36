"""``autograd-tui show``: a scenario's title, parameters, engine options and notes."""

from __future__ import annotations

import argparse
from typing import Any

from autograd_tui.commands.common import EXIT_OK, FORMATTER, console, examples, load_scenario


def add_parser(sub: Any) -> None:
    p = sub.add_parser("show", help="show a scenario's teaching notes", formatter_class=FORMATTER,
                       description="Print a scenario's teaching notes (Markdown, rendered).",
                       epilog=examples("autograd-tui show linear-relu",
                                       "autograd-tui show my_scenario.py"))
    p.add_argument("scenario", metavar="NAME|PATH")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.markdown import Markdown

    s = load_scenario(args.scenario)
    con = console(soft_wrap=False)
    con.print(f"[bold]{s.name}[/bold]: {s.title}")
    if s.params:
        con.print("parameters: " + ", ".join(f"{k}={p.default!r} ({p.help})" if p.help
                                             else f"{k}={p.default!r}"
                                             for k, p in s.params.items()))
    if s.engine:
        con.print("engine: " + ", ".join(f"{k}={v!r}" for k, v in s.engine.items()))
    con.print(Markdown(s.notes or "_(no notes)_"))
    return EXIT_OK
