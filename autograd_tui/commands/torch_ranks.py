"""``autograd-tui torch --ranks N SCRIPT``: the script's N data-parallel ranks, each
recorded, then the app on them side by side (or, ``--headless``, each rank's outcome).

The ranks run under PyTorch's own launcher (``session/ranks.py``); what this module adds
is the command's words: progress on stderr while they run, one line per rank at the end,
and a clear message when a rank fails (the launcher then stops the others).  A helper
module of the commands (as ``progress``): ``rank_files`` is also how ``replay`` and
``chrome-trace`` find several ranks' recordings.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from autograd_tui.commands.common import (
    EXIT_ERROR,
    EXIT_OK,
    Failure,
    UsageError,
    console,
    is_recording,
    load_recording,
    open_app,
    print_text,
    say,
)
from autograd_tui.files import shown
from autograd_tui.words import plain

MAX_RANKS = 64


def run_ranks(args: argparse.Namespace) -> int:
    from autograd_tui.session.ranks import STOPPED, Launch, record_path

    n = args.ranks
    if not 1 <= n <= MAX_RANKS:
        raise UsageError(f"--ranks needs a number of ranks from 1 to {MAX_RANKS}, not {n}")
    if not os.path.isfile(args.script):
        raise Failure(f"{args.script}: no such file")
    if importlib.util.find_spec("torch") is None:
        from autograd_tui.session.torch_script import INSTALL

        raise Failure(f"--ranks runs PyTorch's launcher, and PyTorch is not installed: "
                      f"{INSTALL}")
    if not args.headless:
        if args.stop_at is not None:
            raise UsageError("--stop-at needs --headless")
        if not sys.stdout.isatty() and not os.environ.get("TEXTUAL_DRIVER"):
            raise UsageError("the app needs a terminal, and stdout is not one: add "
                             "--headless to print each rank's outcome instead")
    folder, temporary = _folder(args.record)
    extra = ["--stop-at", args.stop_at] if args.stop_at is not None else []
    extra += ["--backward", str(args.backward)] if args.backward is not None else []
    extra += ["--", *args.script_args] if args.script_args else []  # the script's own: last
    try:
        for k in range(n):  # what this run records, not a file of an earlier one
            record_path(folder, k).unlink(missing_ok=True)
        shutil.rmtree(folder / "logs", ignore_errors=True)
        launch = Launch(n, args.script, folder, entry=args.entry, extra=extra)
        say(f"starting {n} rank{'s' if n != 1 else ''} of {args.script} with "
            f"torch.distributed.run (gloo on 127.0.0.1, port {launch.port})"
            + ("" if temporary else f"; recordings in {shown(folder)}"))
        told: set[int] = set()

        def tick() -> None:
            for k in launch.recorded():
                if k not in told:
                    told.add(k)
                    say(f"rank {k}: recorded ({len(told)} of {n})")

        try:
            launch.wait(tick)
        finally:
            launch.close()  # Ctrl-C too: the launcher and every rank end here
        tick()
        outcomes = [launch.outcome(k) for k in range(n)]
        failed = [o for o in outcomes if not o.ok]
        if args.headless:
            con = console()
            for o in outcomes:
                print_text(con, f"rank {o.rank}: {o.line}",
                           style="bold green" if o.ok else "bold red")
                for line in o.more:  # a multi-line error: its lines, each filtered
                    print_text(con, f"    {line}", style="red")
                shown_lines = o.summary if o.ok and not args.quiet else ()
                for line in summary_lines(shown_lines, temporary):
                    print_text(con, f"  {line}")
        if failed:
            root = launch.first_to_end([o.rank for o in failed],
                                       [o.rank for o in failed if o.line.startswith("killed by")])
            first = next((o for o in failed if o.rank == root), failed[0])
            say(f"rank {first.rank} failed{' first' if len(failed) > 1 else ''}: "
                f"{first.line}")
            for line in first.more:
                print(f"    {plain(line)}", file=sys.stderr, flush=True)
            if all(o.line == STOPPED for o in failed):  # no rank said why: the launcher may
                for line in launch.launcher_text().strip().splitlines()[-5:]:
                    say(f"launcher: {line}")
        if not args.headless:
            paths = [record_path(folder, k) for k in range(n)]
            present = [p for p in paths if p.is_file()]
            if not present:
                raise Failure("no rank wrote a recording, so there is nothing to show")
            recs = [load_recording(str(p), background=True) for p in present]
            code = open_app(recordings=recs)
            return code if not failed else EXIT_ERROR
        if not temporary:
            print_text(console(), f"recordings: {shown(folder)}")
        return EXIT_ERROR if failed else EXIT_OK
    finally:
        if temporary:
            shutil.rmtree(folder, ignore_errors=True)


#: a rank's last summary line, ``recorded N events to PATH`` (commands.common.report_headless)
_RECORDED_TO = re.compile(r"^(recorded \d+ events) to .*$")


def summary_lines(summary: Sequence[str], temporary: bool) -> list[str]:
    """A rank's summary lines as this command prints them: without ``completed`` (its
    outcome line says it) and, the recordings being in a temporary folder removed at the
    end, without their path: the events counted, no file named that will not exist."""
    lines = [s for s in summary if s != "completed"]
    return [_RECORDED_TO.sub(r"\1", s) for s in lines] if temporary else lines


def _folder(record: str | None) -> tuple[Path, bool]:
    """The folder the ranks record into (``--record DIR``, made if missing) or a
    temporary one (removed at the end); whether it is temporary."""
    if record is None:
        return Path(tempfile.mkdtemp(prefix="autograd-tui-ranks-")), True
    if not record:
        raise UsageError("--record needs a folder name, not an empty string")
    p = Path(record)
    if p.exists() and not p.is_dir():
        raise Failure(f"{record}: with --ranks, --record names a folder (one recording "
                      "per rank), and this is a file")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise Failure(f"{record}: cannot make the folder: {e.strerror}") from None
    return p, False


def rank_files(sources: list[str]) -> list[str] | None:
    """The ranks' recordings that ``sources`` name (several files, or a folder: its
    ``rank*.jsonl*`` files), or None for one scenario or one recording."""
    if len(sources) == 1 and not os.path.isdir(sources[0]):
        return None
    if len(sources) == 1:
        found = sorted(str(p) for p in Path(sources[0]).glob("rank*.jsonl*") if p.is_file())
        if not found:
            raise Failure(f"{sources[0]}: a folder with no recording of a rank in it "
                          "(rank0.jsonl.gz, ..., as torch --ranks N --record DIR writes)")
        return found
    for s in sources:
        if not is_recording(s):
            raise UsageError(f"{s}: several sources must all be recordings (one per rank)")
    return sources
