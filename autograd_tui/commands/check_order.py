"""``autograd-tui check-order``: does our engine run a PyTorch graph as PyTorch does?

Runs the script's forward pass once, then the backward with PyTorch's own
engine (the order recorded with node pre-hooks) and with ours driving
PyTorch's nodes; prints whether the node orders (a reentrant checkpoint's nested
backward passes too) and every leaf's ``.grad`` agree (exit 0) or the first
difference (exit 1).  Gradients are compared as
``torch.testing.assert_close`` does (``session/grad_compare.py``), or bitwise
with ``--exact``; the worst element is named.  A program's hooks run in
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
    exit_call,
    print_text,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "check-order", help="compare our engine's order and gradients with PyTorch's",
        formatter_class=FORMATTER,
        description="Run SCRIPT's backward pass with PyTorch's engine and with ours (driving "
                    "PyTorch's nodes); print whether the node orders and the gradients agree "
                    "(exit 0) or the first difference (exit 1).",
        epilog=examples("autograd-tui check-order my_model.py",
                        "autograd-tui check-order train.py --exact --backward 2 -- --epochs 1"))
    p.add_argument("script", metavar="SCRIPT.py")
    from autograd_tui.session.plain_script import add_script_options

    add_script_options(p)
    p.add_argument("--exact", action="store_true",
                   help="gradients must be bitwise equal (default: as torch.testing."
                        "assert_close, with its tolerances for each dtype)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from autograd_tui.engine.torch_bridge import TorchBridgeError
    from autograd_tui.scenarios import ScenarioError
    from autograd_tui.session.grad_compare import mkl_note
    from autograd_tui.session.plain_script import check_usage
    from autograd_tui.session.torch_script import check_order

    check_usage(args.entry, args.backward)
    try:  # a script with no main() returning the loss: run as it is, to its Nth backward
        entry, namespace = checked_entry(args.script, args.entry, args.backward,
                                         args.script_args)
        res = check_order(entry, args.exact, namespace)
    except (TorchBridgeError, ScenarioError):  # already one plain message
        raise
    except SystemExit as e:  # the script's own (argparse's error at import): not a scenario's
        raise Failure(f"{args.script}: the script called {exit_call(e)}") from None
    except Exception as e:  # noqa: BLE001 - the script's or a node's error: one message
        where = getattr(e, "_autograd_node", None)
        if where is None:  # the script's, at its line, as `autograd-tui torch` says it
            from autograd_tui.session.program_errors import locate

            raise Failure(locate(e, file=args.script).headline()) from None
        raise Failure(f"{args.script}: {type(e).__name__} in {where}: {e}") from None
    con = console()
    for note in entry.notes() if hasattr(entry, "notes") else ():  # a plain script's
        print_text(con, f"note: {note}")
    print_text(con, f"PyTorch ran {len(res.torch_order)} nodes, ours {len(res.our_order)}")
    theirs, ours = res.nested
    if theirs or ours:  # a reentrant checkpoint's backward, run inside its node
        print_text(con, "nested backward passes (called inside a node, as a reentrant "
                        f"checkpoint does; GraphTask 2 on): PyTorch ran {len(theirs)} with "
                        f"{sum(map(len, theirs))} nodes, ours {len(ours)} with "
                        f"{sum(map(len, ours))}")
    diff = res.order_difference()
    print_text(con, "node order: agrees" if diff is None else f"node order differs at {diff}")
    if res.compile_note:
        print_text(con, f"note: {res.compile_note}")
    if res.fresh_note:
        print_text(con, f"note: {res.fresh_note}")
    if res.same_error is not None:  # e.g. anomaly mode's NaN check: PyTorch's error too
        print_text(con, f"both backward passes raised the same error: {res.same_error}")
        print_text(con, "gradients: not compared (each backward stopped at the error)")
        return EXIT_OK if res.agrees else EXIT_ERROR
    bad = res.grad_differences()
    how = ("bitwise" if args.exact else "as torch.testing.assert_close, by dtype")
    if bad:
        print_text(con, f"gradients differ ({how}): {bad[0]}")
        for more in bad[1:4]:
            print_text(con, f"  also: {more}")
        if args.exact and (note := mkl_note()) is not None:
            print_text(con, f"note: {note}")
    else:
        worst = res.worst()
        closest = f"; closest: {worst[0].text()}" if worst else ""
        # a frozen or unreached leaf agrees vacuously: say how many were compared
        none = sum(t is None and o is None for t, o in res.grads.values())
        have = "has" if none == 1 else "have"
        also = f"; {none} of them {have} no .grad in either run" if none else ""
        print_text(con, f"gradients: {len(res.grads)} leaves agree ({how}){closest}{also}")
    return EXIT_OK if res.agrees else EXIT_ERROR


def checked_entry(path: str, entry: str | None, backward: int | None,
                  argv: list[str]) -> tuple[Any, dict[str, Any] | None]:
    """What check-order runs: the entry function and the script's namespace, or the whole
    script up to its Nth backward call (no namespace: nothing of it runs before)."""
    from autograd_tui.session.plain_script import is_plain, script_entry
    from autograd_tui.session.torch_script import load_entry

    if is_plain(path, entry, backward):
        return script_entry(path, argv, backward or 1), None
    fn, mod = load_entry(path, entry or "main", argv)
    return fn, vars(mod)

