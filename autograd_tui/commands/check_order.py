"""``autograd-tui check-order``: does our engine run a PyTorch graph as PyTorch does?

Runs the script's forward pass once, then the backward with PyTorch's own
engine (the order recorded with node pre-hooks) and with ours driving
PyTorch's nodes; prints whether the node orders and every leaf's ``.grad``
agree (exit 0) or the first difference (exit 1).  A program's hooks run in
both backward passes.
"""

from __future__ import annotations

import argparse
from typing import Any

from autograd_tui.commands.common import (
    EXIT_ERROR,
    EXIT_OK,
    FORMATTER,
    Failure,
    console,
    examples,
    print_text,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "check-order", help="compare our engine's order and gradients with PyTorch's",
        formatter_class=FORMATTER,
        description="Run SCRIPT's backward pass with PyTorch's engine and with ours (driving "
                    "PyTorch's nodes); print whether the node orders and the gradients agree "
                    "(exit 0) or the first difference (exit 1).",
        epilog=examples("autograd-tui check-order my_model.py"))
    p.add_argument("script", metavar="SCRIPT.py")
    p.add_argument("--entry", default="main",
                   help="the function that returns the loss (default: main)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from autograd_tui.engine.torch_bridge import TorchBridgeError
    from autograd_tui.session.torch_script import check_order, load_entry, max_rel

    entry, _ = load_entry(args.script, args.entry)
    try:
        res = check_order(entry)
    except TorchBridgeError:
        raise
    except Exception as e:  # noqa: BLE001 - the script's or a node's error: one message
        where = getattr(e, "_autograd_node", None)
        raise Failure(f"{args.script}: {type(e).__name__}"
                      + (f" in {where}" if where else "") + f": {e}") from None
    con = console()
    print_text(con, f"PyTorch ran {len(res.torch_order)} nodes, ours {len(res.our_order)}")
    diff = res.order_difference()
    print_text(con, "node order: agrees" if diff is None else f"node order differs at {diff}")
    bad = res.grad_differences()
    if bad:
        print_text(con, f"gradients differ: {bad[0]}")
    else:
        worst = max((max_rel(t, o) for t, o in res.grads.values()
                     if t is not None and o is not None), default=0.0)
        print_text(con, f"gradients: {len(res.grads)} leaves agree (rtol {res.rtol:g}; max "
                        f"relative difference {worst:.3g})")
    return EXIT_OK if res.agrees else EXIT_ERROR
