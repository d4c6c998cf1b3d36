"""What the commands share: exit codes, the two errors, options, runs and recordings.

Every command raises ``UsageError`` (exit 2) for a request that cannot be
meant (a bad option value, an unknown scenario) and ``Failure`` (exit 1) for a
problem with a file or the run; ``commands.parser.main`` turns those, and the
errors of the layers below (``ScenarioError`` by its ``usage`` attribute,
``TraceError``, ``ExportError``, ``CannotWrite``), into one line on stderr.

Heavy modules (the engine, rich, the app) are imported inside the functions, so
that ``--help`` and ``list`` stay fast.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from autograd_tui.files import shown

if TYPE_CHECKING:
    from autograd_tui.control import StepResult
    from autograd_tui.control.query import EventQuery
    from autograd_tui.history.recordings import Recording
    from autograd_tui.scenarios import Scenario
    from autograd_tui.session.program_errors import ProgramError
    from autograd_tui.session.run import Run

PROG = "autograd-tui"
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_DEADLOCK = 0, 1, 2, 3
EXIT_NONFINITE = 4  # --stop-at nonfinite stopped at a NaN or an Inf
EXIT_DIFFER = 5  # explore: completed schedules gave different gradients
EXIT_INTERRUPTED = 130  # what a shell reports for Ctrl-C

#: a recording this big (bytes) takes seconds to load: say so on stderr
BIG_RECORDING = 8 * 2**20


class UsageError(Exception):
    """Bad usage found after parsing (exit code 2)."""


class Failure(Exception):
    """A file, Graphviz or run problem (exit code 1)."""


# --- the parser's pieces ------------------------------------------------------------------------
FORMATTER = argparse.RawDescriptionHelpFormatter


def examples(*lines: str) -> str:
    """An ``examples:`` epilog, one command a line."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def add_run_options(p: argparse.ArgumentParser, *, what: str = "") -> None:
    """``--param``, ``--policy``, ``--seed`` and ``--engine``: how a scenario is run."""
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="set a scenario parameter (repeatable)")
    p.add_argument("--policy", default="round-robin",
                   help=f"{what}round-robin (default), random, or schedule:STRING")
    p.add_argument("--seed", type=int, default=0, help="seed for --policy random (default 0)")
    p.add_argument("--engine", action="append", default=[], metavar="K=V",
                   help="set an engine option, e.g. reentrant=block, wake_owner=false "
                        "(repeatable)")


def output_file(path: str | None, option: str) -> str | None:
    """Check an output file option (``--record``, ``-o``) before any work is done: an
    empty name is bad usage (it used to be ignored, or taken as the current folder), a
    directory cannot be written.  FIFOs, devices and links are fine (``files.atomic_write``)."""
    if path is None:
        return None
    if not path:
        raise UsageError(f"{option} needs a file name, not an empty string")
    if os.path.isdir(path):
        raise Failure(f"{path}: cannot write: it is a directory")
    return path


def pairs(items: Sequence[str] | None, what: str) -> dict[str, str]:
    """``["k=v", ...]`` (a repeatable ``K=V`` option) as a dict."""
    out = {}
    for item in items or ():
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise UsageError(f"{what} {item!r} must look like KEY=VALUE")
        out[k.strip()] = v
    return out


# --- output -------------------------------------------------------------------------------------
class PipeClosed(Exception):
    """The reader of stdout went away (``| head``): the command stops, quietly, exit 0."""


def _stdout_to_devnull() -> None:
    """After a closed pipe: what is still buffered or printed goes nowhere (Python's own
    flush at exit would otherwise fail on the pipe too)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (a test's capture)
        pass


def console(soft_wrap: bool = True) -> Any:
    """A rich console on stdout (colour only on a terminal, and not under NO_COLOR)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # Rich's own exits with 1
            self.quiet = True
            _stdout_to_devnull()
            raise PipeClosed

    return _Console(file=sys.stdout, highlight=False, soft_wrap=soft_wrap)


def say(message: str) -> None:
    """One line on stderr, the way every message of the commands looks (a name from a
    file in it has its control characters made visible: ``words.plain``)."""
    from autograd_tui.words import plain

    print(f"{PROG}: {plain(message)}", file=sys.stderr, flush=True)


def print_text(con: Any, line: str, style: str = "") -> None:
    """``line`` as text: no Rich markup in it is read, no control character printed.
    For every line with words from a file or a program (names, messages, values)."""
    from rich.text import Text

    from autograd_tui.words import plain

    con.print(Text(plain(line), style=style))


# --- sources: recordings and scenarios ---------------------------------------------------------
def is_recording(source: str) -> bool:
    """A source that names an existing file other than a scenario's ``.py``."""
    return os.path.exists(source) and not source.endswith(".py")


def load_recording(path: str, background: bool = False) -> Recording:
    """``recordings.load``, with a line on stderr before and after a big file (a
    million events take a few seconds) and, on a terminal, a progress bar between.
    ``background``: for the app, which checks the fold as it shows the recording."""
    from autograd_tui.commands.progress import progress
    from autograd_tui.history import recordings

    size = os.path.getsize(path) if os.path.isfile(path) else 0
    if size < BIG_RECORDING:
        return recordings.load(path, background=background)
    what = "reading and checking every event (the app checks the fold as it shows them)" \
        if background else "reading, checking and folding every event"
    print(f"loading {path} ({size / 2**20:.0f} MiB): {what}...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    stages = recordings.LOAD_STAGES
    name = os.path.basename(path)
    with progress(len(stages), f"loading {name}") as bar:

        def on_stage(stage: str) -> None:  # a step of the bar per stage finished
            bar.update(description=f"{name}: {stage}")
            if stage != stages[0]:
                bar.advance()

        rec = recordings.load(path, on_stage=on_stage, background=background)
        bar.advance()
    print(f"loaded {len(rec.events):,} events in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr, flush=True)
    return rec


def exit_call(e: SystemExit) -> str:
    """``sys.exit(5)``: the call that raised ``e``, as the program wrote it."""
    return "sys.exit()" if e.code is None else f"sys.exit({e.code!r})"


def program_error_text(e: BaseException) -> str:
    """What the scenario's program did wrong, for a summary line or a note."""
    if isinstance(e, SystemExit):
        return f"it called {exit_call(e)}"
    return f"{type(e).__name__}: {e}"


def locate_program_error(run: Run) -> ProgramError | None:
    """The run's program error at the person's own line (``program_errors``): in the
    scenario file or script when the run came from one, else in the program's module."""
    from autograd_tui.session.program_errors import locate_in_scenario

    err = run.error
    if err is None or isinstance(err, SystemExit):
        return None
    return locate_in_scenario(err, run.scenario)


def outcome_problem(run: Run, result: StepResult) -> str | None:
    """A run that ended without an error but not as its scenario says it would: no
    backward pass at all, or ``EXPECT = "deadlock"`` and it completed with the scenario's
    own parameters and engine options (None if neither): changed, they are the lesson's
    fix (``--engine reentrant=nested``, ``--param fixed=true``), and completing is its point."""
    from autograd_tui.session.run import engine_options

    if run.error is not None or result.status != "finished":
        return None
    if not any(e.kind == "graph_task_created" for e in run.events):
        return (f"{run.scenario.source}: the program never started a backward pass (no "
                ".backward() or autograd.grad() ran), so there is nothing to show")
    as_written = (run.params == run.scenario.resolve_params()
                  and run.options == engine_options(run.scenario))
    if run.scenario.expect == "deadlock" and as_written:
        return (f"{run.scenario.source}: EXPECT = 'deadlock', but the run completed under "
                f"this schedule ({run.controller.schedule_string()})")
    return None


def say_program_error(run: Run) -> ProgramError | None:
    """The located error on stderr: ``typo.py:8: AttributeError: ...`` and the line."""
    located = locate_program_error(run)
    if located is not None:
        first, *more = located.headline().split("\n")
        say(first)
        for line in more:  # plain already
            print(line, file=sys.stderr, flush=True)
        from autograd_tui.words import plain

        for note in located.notes:
            print(f"    {plain(note)}", file=sys.stderr, flush=True)
        if located.source:
            print(f"    {located.source}", file=sys.stderr, flush=True)  # plain already
    return located


def load_scenario(source: str) -> Scenario:
    """``scenarios.load`` (an error while importing a file at its line); a scenario file
    that calls ``sys.exit`` while it is imported is a broken file (exit 1, one message),
    not the exit code it chose."""
    from autograd_tui.session.program_errors import load_scenario as load

    try:
        return load(source)
    except SystemExit as e:
        raise Failure(f"{source}: importing it called {exit_call(e)}") from None


def check_policy(policy: str, seed: int) -> None:
    from autograd_tui.control import make_policy

    try:
        make_policy(policy, seed)
    except ValueError as e:
        raise UsageError(str(e)) from None


def check_run_args(source: str, args: argparse.Namespace) -> Scenario:
    """Check what ``make_run(source, args)`` would be given (the scenario, ``--param``,
    ``--engine``, ``--policy``/``--seed``) without running anything; return the scenario.

    For the app, which builds its one Run itself: a mistake is one message here
    rather than an app that opens on an error."""
    from autograd_tui import engine
    from autograd_tui.session.run import engine_options

    check_policy(args.policy, args.seed)
    scenario = load_scenario(source)
    params, overrides = pairs(args.param, "--param"), pairs(args.engine, "--engine")
    scenario.resolve_params(params)  # in Run's order: the parameters, then the options
    options = engine_options(scenario, overrides)
    # The Engine checks its option values itself (reentrant is nested or block, depths
    # are >= 0); one starts no thread until a backward runs, so asking it costs nothing.
    try:
        engine.Engine(**options)
    except (TypeError, ValueError) as e:
        raise UsageError(f"bad engine options for {scenario.name}: {e}") from None
    return scenario


def make_run(source: str, args: argparse.Namespace, *, full_tensors: bool = False) -> Run:
    """The Run of the scenario ``source`` (a built-in name or a ``.py`` file) that the
    options of ``add_run_options`` in ``args`` ask for; not started."""
    from autograd_tui.session.run import Run

    check_policy(args.policy, args.seed)
    scenario = load_scenario(source)
    return Run(scenario, pairs(args.param, "--param"), policy=args.policy, seed=args.seed,
               engine_overrides=pairs(args.engine, "--engine"), full_tensors=full_tensors)


def add_stop_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stop-at", metavar="QUERY", default=None,
                   help="--headless: stop at the first event QUERY matches (the app's "
                        "breakpoints and jumps read it alike: 'node_start ReluBackward0', "
                        "'push queue=cuda:0', ...); 'nonfinite' stops at the first "
                        "non-finite gradient, says where it came from and exits 4")


def stop_query(text: str) -> EventQuery:
    """``--stop-at``'s query (``control/query.py``); one it cannot read is bad usage."""
    from autograd_tui.control.query import QueryError, parse_query

    try:
        return parse_query(text)
    except QueryError as e:
        raise UsageError(f"--stop-at: {e}") from None


def app_only_options(args: argparse.Namespace, record: str | None) -> None:
    """Without --headless (the app): the options that only a headless run can honour."""
    if record is not None:  # the app writes no recording: say so rather than drop it
        raise UsageError("--record needs --headless (the app does not write recordings)")
    if args.stop_at is not None:
        raise UsageError("--stop-at needs --headless (in the app: b, a breakpoint; its box "
                         "first non-finite gradient)")


def report_headless(con: Any, run: Run, result: StepResult, args: argparse.Namespace,
                    record: str | None, summary: Callable[[Any, Run, StepResult], int]) -> int:
    """What ``run``/``torch --headless`` print after the run: the trace (unless --quiet),
    what --stop-at found or ``summary``'s lines, the recording; returns the exit code.
    The recording is written first: a reader that goes away (``| head``) loses nothing."""
    if record is not None:
        run.save(record)
    if not args.quiet:
        from autograd_tui.export.text import print_trace

        print_trace(run.events, con)
    status = stop_summary(con, run, result, args.stop_at)
    if status is not None:
        con.print(f"schedule: {run.controller.schedule_string()}")
    else:
        status = summary(con, run, result)
    if record is not None:
        con.print(f"recorded {len(run.events)} events to {shown(record)}")
    return status


def stop_summary(con: Any, run: Run, result: StepResult, stop_at: str | None) -> int | None:
    """After ``--stop-at`` stopped a run: at a non-finite gradient (``nonfinite``) what it
    found, and exit 4; at another query's event, which one, and exit 0 (None when the run
    did not stop there)."""
    from autograd_tui.control.nonfinite import explain, first_nonfinite

    if stop_at is None or result.status != "breakpoint" or not result.events:
        return None
    hit = result.events[-1]
    query = stop_query(stop_at)
    found = first_nonfinite(hit) if query.nonfinite else None
    if found is None:
        print_text(con, f"stopped at event {hit.seq}, the first that {query.text!r} matches",
                   style="bold")
        return EXIT_OK
    con.print("[bold red]stopped at a non-finite gradient[/bold red]")
    print_text(con, explain(found, run.history))
    return EXIT_NONFINITE


def run_to_end(run: Run, stop_at: str | None = None) -> StepResult:
    """Run until the end, a deadlock or an error (or with ``stop_at``, a query's text, the
    first event it matches: ``"nonfinite"`` the first non-finite gradient); a schedule
    that does not fit the run (``--policy schedule:...``) is bad usage, and so is a
    parameter value the program refuses: a ``ScenarioError`` it raises (``n`` must be at
    least 1, see ``scenarios``), which no type check before the run can see."""
    from autograd_tui.control import ScheduleDivergence
    from autograd_tui.scenarios import ScenarioError

    query = stop_query(stop_at) if stop_at is not None else None
    try:
        if query is not None:
            run.start()
            result = run.controller.run_until(query.matcher())
        else:
            result = run.run()
    except ScheduleDivergence as e:
        raise UsageError(f"--policy schedule: {e}") from None
    if isinstance(run.error, ScenarioError):
        raise UsageError(str(run.error))
    return result


def open_app(*args: Any, **kwargs: Any) -> int:
    """Open the app (``AutogradApp(*args, **kwargs)``) and return its exit code.  Without
    a terminal on stdout (a pipe, a file, a CI job) the app cannot draw: bad usage, with
    the flag that prints instead.  A Textual driver named in ``TEXTUAL_DRIVER`` draws
    elsewhere (textual-serve's web driver, for ``serve``: a page in a browser, through a
    pipe), and needs no terminal."""
    if not sys.stdout.isatty() and not os.environ.get("TEXTUAL_DRIVER"):
        raise UsageError("the app needs a terminal, and stdout is not one: add --headless "
                         "to print a trace instead (run, replay, torch), or run the command "
                         "in a terminal")
    # Imported here: the app (Textual) is the slowest import, and most commands never
    # need it.
    from autograd_tui.app import AutogradApp

    app = AutogradApp(*args, **kwargs)
    app.run()
    return app.return_code or EXIT_OK
