"""``autograd-tui torch``: a PyTorch script's backward pass, scheduled by our engine.

The script's entry function (``main``, or ``--entry NAME``) builds the model,
runs the forward pass and returns the loss; its backward runs on our engine
under the controller, each node computed by PyTorch (``engine/torch_bridge/``).
Without ``--headless`` the app opens on it; with it, the trace and a summary
are printed, as ``run --headless`` does.  Without PyTorch installed, one
message says how to install it.  While a big forward pass is captured, standard
error says how many nodes it has made so far (``capture_progress``).

``--ranks N`` runs the script as N data-parallel ranks under PyTorch's own launcher
(``session/ranks.py``: gloo on 127.0.0.1), one recording per rank in ``--record DIR``
(or a temporary folder), then opens the app on them side by side, or with
``--headless`` prints each rank's outcome.  Under a launcher (``RANK`` set), ``{rank}`` in
``--record`` is the rank, and the recording's header says ``distributed: {rank,
world_size, backend}``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import IO, Any

from autograd_tui.commands.common import (
    EXIT_ERROR,
    EXIT_OK,
    FORMATTER,
    UsageError,
    add_stop_option,
    app_only_options,
    console,
    examples,
    open_app,
    output_file,
    print_text,
    program_error_text,
    report_headless,
    run_to_end,
    say,
    say_program_error,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "torch", help="step through a real PyTorch model's backward pass",
        formatter_class=FORMATTER,
        description="Run SCRIPT's entry function (it builds a model, runs the forward pass "
                    "and returns the loss), then its backward pass on our engine, each node "
                    "computed by PyTorch. A script with no main() returning the loss (a "
                    "training script as it is) runs as `python SCRIPT ARGS` would, up to its "
                    "first backward call (--backward N: its Nth), and is stopped there: that "
                    "backward is the one stepped. Opens the app, or with --headless prints "
                    "the trace.",
        epilog=examples("autograd-tui torch my_model.py",
                        "autograd-tui torch my_model.py --entry build_and_run",
                        "autograd-tui torch train.py --backward 3 -- --epochs 1 --lr 0.1",
                        "autograd-tui torch my_model.py --headless --record run.jsonl.gz",
                        "autograd-tui torch ddp_model.py --ranks 2 --record runs/",
                        "autograd-tui torch ddp_model.py --ranks 2 --headless",
                        "autograd-tui check-order my_model.py"))
    p.add_argument("script", metavar="SCRIPT.py")
    from autograd_tui.session.plain_script import add_script_options

    add_script_options(p)
    p.add_argument("--headless", action="store_true", help="no app: print a trace")
    p.add_argument("--quiet", action="store_true", help="--headless: the summary only")
    add_stop_option(p)
    p.add_argument("--record", metavar="FILE",
                   help="write a recording (.jsonl or .jsonl.gz; {rank}: the rank, under "
                        "torchrun); with --ranks, a folder for one recording per rank")
    p.add_argument("--ranks", type=int, metavar="N",
                   help="run N data-parallel ranks (torch.distributed.run, gloo on "
                        "127.0.0.1), record each; open the app on them side by side, or "
                        "with --headless print each rank's outcome")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from autograd_tui.commands.progress import progress
    from autograd_tui.session.plain_script import check_usage
    from autograd_tui.session.run import Run
    from autograd_tui.session.torch_script import script_scenario

    check_usage(args.entry, args.backward)
    if args.ranks is not None:
        from autograd_tui.commands.torch_ranks import run_ranks

        return run_ranks(args)
    if args.record and "{rank}" in args.record:
        args.record = args.record.replace("{rank}", _env_rank("--record's {rank}"))
    record = output_file(args.record, "--record")
    if os.environ.get("TORCHELASTIC_RUN_ID"):  # torchrun stops a rank with SIGTERM: at once,
        import signal  # also while it waits in a collective (no Python handler runs there)

        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if os.environ.get("AUTOGRAD_TUI_RANKS"):  # --ranks's: it ends if its agent dies
            from autograd_tui.session.ranks import end_with_parent

            end_with_parent(os.getppid())
    if not args.headless:
        app_only_options(args, record)
    with progress(None, "importing torch and the script (a few seconds)"):
        scenario = script_scenario(args.script, args.entry, args.backward,  # on a terminal:
                                   args.script_args)  # a line meanwhile
    if not args.headless:
        return open_app(scenario)
    r = _rank_run(Run)(scenario)
    try:
        with capture_progress():
            result = run_to_end(r, args.stop_at)
        if not r.events and r.error is not None and not os.environ.get("AUTOGRAD_TUI_RANKS"):
            # The program failed before its backward began (its forward pass raised): its
            # error, once, on stderr, and no summary of a run that never started (events: 0,
            # schedule: 1:1).  A recording would hold no event to replay, so none is
            # written, and the file is left as it was.  (A rank of --ranks keeps the
            # summary: the launcher reads its outcome from it, session/ranks.py.)
            _say_failed_before_backward(r)
            if record is not None:
                from autograd_tui.files import shown

                say(f"no recording written to {shown(record)}: {_why_no_backward(r.error)}, "
                    "so there is nothing to replay")
            return EXIT_ERROR
        return report_headless(console(), r, result, args, record, _summary)
    finally:
        r.close()


@contextlib.contextmanager
def capture_progress(stream: IO[str] | None = None, every: float = 0.5,
                     pipe_every: float = 5.0) -> Iterator[None]:
    """While the block runs, how many nodes the forward pass under ``capture()`` has made:
    on a terminal a line redrawn every ``every`` s while it runs; elsewhere (a pipe, a log)
    a line every ``pipe_every`` s once it has taken that long, so a short forward prints
    nothing.  The watching thread ends with the block."""
    from autograd_tui.commands.progress import is_terminal, progress
    from autograd_tui.engine.torch_bridge.capture import captured_nodes

    out = sys.stderr if stream is None else stream
    tty = is_terminal(out)
    done = threading.Event()

    def say(n: int, seconds: float) -> str:
        return f"capturing the forward pass: {n:,} nodes so far ({seconds:.0f} s)"

    def watch() -> None:
        bar: Any = None
        shown = 0
        with contextlib.ExitStack() as stack:
            start = last = None
            while not done.wait(every):
                n = captured_nodes()
                if n is None:
                    if start is not None:
                        return  # the forward is over (the backward has its own output)
                    continue
                now = time.monotonic()
                start = now if start is None else start
                if tty:  # the bar counts the nodes (its n/? column) and the time
                    if bar is None:
                        bar = stack.enter_context(progress(
                            None, "capturing the forward pass: nodes", stream=out))
                        shown = 0
                    bar.advance(n - shown)
                    shown = n
                elif now - start >= pipe_every and (last is None or now - last >= pipe_every):
                    last = now
                    print(say(n, now - start), file=out, flush=True)

    t = threading.Thread(target=watch, name="capture progress", daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join()


def _env_rank(what: str) -> str:
    rank = os.environ.get("RANK", "")
    if not rank.isdigit():
        raise UsageError(f"{what} needs a rank: run under torchrun, or with --ranks N")
    return rank


def _rank_run(run_class: Any) -> Any:
    """``Run``, whose recording's header says which rank of how many it was (from
    ``torch.distributed`` once the script initialized it, else torchrun's environment)."""

    class RankedRun(run_class):  # type: ignore[misc, valid-type]
        def header(self) -> dict[str, Any]:
            header: dict[str, Any] = super().header()
            where = _distributed()
            if where is not None:
                header["distributed"] = where
            return header

    return RankedRun


def _distributed() -> dict[str, Any] | None:
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return {"rank": dist.get_rank(), "world_size": dist.get_world_size(),
                "backend": str(dist.get_backend())}
    rank, world = os.environ.get("RANK", ""), os.environ.get("WORLD_SIZE", "")
    if rank.isdigit() and world.isdigit() and int(rank) < int(world):
        return {"rank": int(rank), "world_size": int(world), "backend": None}
    return None


def _summary(con: Any, run: Any, result: Any) -> int:
    """The lines after the trace (as ``run --headless`` prints them); the exit code."""
    from autograd_tui.history.ddp import never_ready_lines

    con.print()
    print_text(con, f"script: {run.scenario.source}")
    if run.scenario.banner:
        print_text(con, f"note: {run.scenario.banner}")
    con.print(f"events: {len(run.events)}")
    if isinstance(run.error, _plain_errors()):  # one plain message, no class path
        _error_lines(con, str(run.error), _said(run.error))
        code = EXIT_ERROR
    elif run.error is not None:
        say_program_error(run)  # the script's file, line and source line, on stderr
        where = getattr(run.error, "_autograd_node", None)
        _error_lines(con, (f"(in {where}) " if where else "") + program_error_text(run.error))
        code = EXIT_ERROR
    elif result.status == "finished":
        con.print("[bold green]completed[/bold green]")
        for k, s in run.gradient_summaries().items():  # a huge sparse one: from its values
            norm = s["norm"]
            print_text(con, f"grad {k}: shape {s['shape']}, norm "
                            f"{f'{norm:.6g}' if isinstance(norm, float) else norm}")
        for k, why in run.no_grad.items():
            print_text(con, f"no grad {k}: {why}")
        for line in never_ready_lines(run.events):  # DDP's unused-parameter failure
            print_text(con, f"ddp: {line}")
        code = EXIT_OK
    else:
        print_text(con, f"stopped: {result.status}")
        code = EXIT_ERROR
    con.print(f"schedule: {run.controller.schedule_string()}")
    return code


def _say_failed_before_backward(run: Any) -> None:
    """The error of a program that failed before its backward pass, once, on stderr: at
    the script's line (``model.py:8: RuntimeError: ...`` and the line), or the bridge's
    own words (``error in the script ...``, ``not supported: ...``)."""
    from autograd_tui.words import plain_lines

    if isinstance(run.error, _plain_errors()):
        text = f"{_said(run.error)} {run.error}".strip()
    elif say_program_error(run) is not None:  # the script's file, line and source line
        return
    else:
        text = program_error_text(run.error)  # it called sys.exit(...)
    first, *more = plain_lines(text) or [""]
    say(first)
    for line in more:  # plain already
        print(f"    {line}", file=sys.stderr, flush=True)


def _said(error: BaseException) -> str:
    """What the bridge's own error is: not supported, an error in the script, or (the
    script ended before the backward call asked for: its message says so) nothing."""
    from autograd_tui.engine.torch_bridge.convert import Unsupported
    from autograd_tui.engine.torch_bridge.script_run import ScriptEnded

    return ("not supported:" if isinstance(error, Unsupported) else ""
            if isinstance(error, ScriptEnded) else "error in the script")


def _error_lines(con: Any, text: str, said: str = "error in the script") -> None:
    """``said`` (``error in the script``, ``not supported:``) and the error's first
    line; its further lines (a gloo error, PyTorch's "At:" trace) indented under it, each
    a line of its own (``--ranks`` reads them back: ``session.ranks.CONTINUED``)."""
    from autograd_tui.session.ranks import CONTINUED
    from autograd_tui.words import plain_lines

    first, *more = plain_lines(text) or [""]
    if said:
        con.print(f"[bold red]{said}[/bold red]", end=" ")
    print_text(con, first)
    for line in more:
        print_text(con, CONTINUED + line)


def _why_no_backward(error: BaseException) -> str:
    """Why no backward was stepped: a plain script that ended before its Nth backward call
    did not fail (its own message above says so), a failed forward pass did."""
    from autograd_tui.engine.torch_bridge.script_run import ScriptEnded

    if isinstance(error, ScriptEnded):
        return "the script ended before the backward call asked for"
    return "the program failed before its backward pass began"


def _plain_errors() -> tuple[type[BaseException], ...]:
    """The bridge's own errors: each message says what is wrong with the script in words
    (a loss that needs no grad, a backward called in the script), so no class name."""
    from autograd_tui.engine.torch_bridge import TorchBridgeError
    from autograd_tui.engine.torch_bridge.program import ScriptCalledBackward

    return ScriptCalledBackward, TorchBridgeError


