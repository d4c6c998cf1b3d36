"""The one parser of ``autograd-tui`` and ``main``, which maps every error to one line.

Each command module adds its sub-parser (``add_parser(sub)``, which sets
``func``) and does its work in ``run(args) -> int``.  ``main`` catches the
errors the commands and the layers below raise and prints ``autograd-tui:
<message>`` on stderr, never a traceback.  Exit codes: 0 done, 1 an error in
the scenario's program or a file, 2 bad usage, 3 a deadlock was detected.  A
scenario's ``sys.exit(5)`` is an error in it (1, with a message), never our exit code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from autograd_tui import __version__
from autograd_tui.commands import (
    check_order,
    chrome_trace,
    explore,
    export,
    list_cmd,
    replay,
    run,
    serve,
    show,
    torch_cmd,
)
from autograd_tui.commands.common import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    FORMATTER,
    PROG,
    Failure,
    PipeClosed,
    UsageError,
    _stdout_to_devnull,
    examples,
    exit_call,
    open_app,
    say,
)

COMMANDS = (list_cmd, show, run, explore, replay, chrome_trace, export, torch_cmd,
            check_order, serve)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, formatter_class=FORMATTER,
        description="Step through a re-implementation of PyTorch's autograd engine and watch "
                    "the backward pass run. With no command, opens the app on linear-relu.",
        epilog=examples("autograd-tui", "autograd-tui list",
                        "autograd-tui run linear-relu --headless",
                        "autograd-tui run deadlock-reentrant-block --headless",
                        "autograd-tui replay run.jsonl",
                        "autograd-tui serve linear-relu    # the app in a web browser"),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``) and run; returns the exit code.

    argparse's own usage errors (an unknown option, a missing argument) exit with 2
    through ``SystemExit``, as do ``--help`` and ``--version`` (with 0)."""
    args = _parse(list(sys.argv[1:] if argv is None else argv))
    restore = _signals_interrupt()
    try:
        if args.command is None:
            return open_app()
        return args.func(args)
    except (PipeClosed, BrokenPipeError):  # the reader went away (``| head``): as asked
        _stdout_to_devnull()
        return EXIT_OK
    except KeyboardInterrupt as e:
        say(f"interrupted ({e.args[0]})" if isinstance(e, Terminated) else "interrupted")
        return EXIT_INTERRUPTED
    except MemoryError:  # loading, folding, exporting: the budget's one message
        from autograd_tui.history.lines import budget_words
        say(budget_words())
        return EXIT_ERROR
    except SystemExit as e:
        # argparse's exits happened above; one from here comes from a scenario's code
        # that the commands did not catch themselves (load_scenario, run --headless do)
        say(f"a scenario's code called {exit_call(e)}")
        return EXIT_ERROR
    except Exception as e:
        code = exit_code(e)
        if code is None:
            raise
        say(str(e))
        return code
    finally:
        restore()


def _parse(argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed; a script's own arguments after ``--`` (``torch``, ``check-order``)
    kept apart, as argparse cannot take a positional list after the options."""
    words = [a for a in argv if not a.startswith("-")]
    if "--" in argv and words and words[0] in ("torch", "check-order"):
        cut = argv.index("--")
        args = build_parser().parse_args(argv[:cut])
        if hasattr(args, "script_args"):
            args.script_args = [*args.script_args, *argv[cut + 1:]]
            return args
    return build_parser().parse_args(argv)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: handled exactly as Ctrl-C (the atomic writer's temporary file
    removed, one line, exit 130)."""


def _signals_interrupt() -> Callable[[], None]:
    """Make SIGTERM and SIGHUP raise ``Terminated`` in the main thread; returns what puts
    the old handlers back."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum: int, frame: object) -> None:
        raise Terminated(signal.Signals(signum).name)

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)
           if signal.getsignal(sig) is signal.SIG_DFL}  # nohup's SIG_IGN stays
    return lambda: [signal.signal(sig, h) for sig, h in old.items()] and None


def exit_code(e: BaseException) -> int | None:
    """The exit code of an error a person can cause, by its type (None: a bug)."""
    # Imported here: the engine and the export modules are not needed to parse.
    from autograd_tui.engine.torch_bridge import TorchBridgeError
    from autograd_tui.export import ExportError
    from autograd_tui.files import CannotWrite
    from autograd_tui.history.recordings import TraceError
    from autograd_tui.scenarios import ScenarioError

    if isinstance(e, UsageError):
        return EXIT_USAGE
    if isinstance(e, ScenarioError):
        return EXIT_USAGE if e.usage else EXIT_ERROR
    if isinstance(e, (Failure, TraceError, ExportError, CannotWrite, TorchBridgeError)):
        return EXIT_ERROR
    return None
