"""``autograd-tui export``: Graphviz snapshots of a run, one state or a frame sequence.

The source is a scenario (a built-in name or a ``.py`` file, run now, headless,
under the controller) or a recording (any other existing file).  Numbering
(docs/architecture.md): event k is the k-th event; ``--at k`` draws
``History.state_at(k)``, the state after events 1..k, for k in 0..n (0: before
any event; ``end``: n); a frame "after event k" is the same state.  The drawing
and the writing are ``autograd_tui.export``'s; this module turns options into
calls and problems into ``UsageError`` (exit 2) or ``ExportError`` (exit 1).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autograd_tui.commands.common import (
    EXIT_OK,
    FORMATTER,
    Failure,
    UsageError,
    add_run_options,
    examples,
    is_recording,
    load_recording,
    make_run,
    program_error_text,
    run_to_end,
    say,
)
from autograd_tui.files import shown

if TYPE_CHECKING:
    from autograd_tui.engine.events import Event
    from autograd_tui.history import EngineState, History

DESCRIPTION = """\
Draw the engine's state with Graphviz: the backward graph (one node per backward
node, coloured by state, with its sequence number, remaining dependencies and, while
it waits in not_ready, its InputBuffer slots), one cluster per device, the ready
queues, GraphTasks and threads in a side table, the edge whose gradient just flowed
in bold, and a deadlock's wait-for cycle in red.

NAME|FILE is a scenario (a built-in name or a .py file; it is run now, headless) or
a recording (.jsonl / .jsonl.gz). Event k is the k-th event, as `autograd-tui run
--headless` numbers them: --at k draws the state after events 1..k (--at 0: before
any event; --at end, the default: after the last).

--every K and --breakpoints write a frame sequence into the directory OUT
(frame-0000.svg, ...) and an index.html that steps through it with the arrow keys.
--every K takes a frame after events K, 2K, ... and the last; --breakpoints after
every node_start, not_ready_insert, completion and deadlock event.

svg, png and pdf are rendered by Graphviz `dot`; without it the .dot file is still
written (install Graphviz: apt-get install graphviz / brew install graphviz)."""

EPILOG = examples(
    "autograd-tui export linear-relu --at 53 -o linear-relu.svg",
    "autograd-tui export linear-relu --at end -o end.png --rankdir LR --collapse-leaves",
    "autograd-tui export linear-relu --every 1 -o frames/",
    "autograd-tui export deadlock-reentrant-block --breakpoints -o frames/ --format png",
    "autograd-tui export run.jsonl.gz --at 40 -o state.dot --no-values",
    "autograd-tui export multi-device --policy random --seed 3 --at end -o md.pdf")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("export", help="export Graphviz snapshots (DOT, SVG, PNG, PDF, frames)",
                       formatter_class=FORMATTER, description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("source", metavar="NAME|FILE",
                   help="a scenario (built-in name or .py file) or a recording")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--at", metavar="K|end",
                      help="draw the state after events 1..K (0: before any event), or at "
                           "the end (default)")
    when.add_argument("--every", type=int, metavar="K",
                      help="a frame after events K, 2K, ... and the last, into the "
                           "directory OUT, with index.html")
    when.add_argument("--breakpoints", action="store_true",
                      help="a frame after each node_start, not_ready_insert, completion and "
                           "deadlock event into the directory OUT, with index.html")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="the file to write (--at), or the directory for frames")
    p.add_argument("--format", metavar="dot|svg|png|pdf",
                   help="output format (default: from OUT's suffix, else svg)")
    p.add_argument("--rankdir", default="TB", metavar="TB|LR",
                   help="TB: the graph top to bottom (default); LR: left to right")
    p.add_argument("--values", action=argparse.BooleanOptionalAction, default=True,
                   help="show gradient values in slots and .grad (default: shown)")
    p.add_argument("--collapse-leaves", action="store_true",
                   help="draw the AccumulateGrad leaves of each device as one node")
    p.add_argument("--unfold", action="store_true",
                   help="a PyTorch graph: draw every repeated block (blocks.0..N) in full, "
                        "not only the one holding the shown node")
    add_run_options(p, what="for a scenario: ")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="how long one `dot` run may take (default 60)")
    p.set_defaults(func=run)


@dataclass
class _Source:
    title: str
    events: list[Event]
    history: History


@dataclass(frozen=True)
class _Options:
    output: Path
    frames: bool
    fmt: str
    rankdir: str
    values: bool
    collapse_leaves: bool
    timeout: float
    unfold: bool


def run(args: argparse.Namespace) -> int:
    from autograd_tui import export as gx

    opt = _options(args)
    # fail on an unwritable OUT before running anything
    gx.check_output(opt.output, opt.frames)
    src = _load(args.source, args)
    if opt.frames:
        return _export_frames(src, args, opt)
    state = _state_at(src, "end" if args.at is None else str(args.at).strip())
    print(gx.export_state(state, opt.output, fmt=opt.fmt, rankdir=opt.rankdir,
                          values=opt.values, collapse_leaves=opt.collapse_leaves,
                          title=src.title, timeout=opt.timeout, unfold=opt.unfold))
    return EXIT_OK


def _options(args: argparse.Namespace) -> _Options:
    from autograd_tui import export as gx

    if not args.output:
        raise UsageError("-o/--output needs a file or folder name, not an empty string")
    if args.every is not None and args.every < 1:
        raise UsageError(f"--every must be a positive number of events, not {args.every!r}")
    frames = args.every is not None or args.breakpoints
    if args.format is None and frames:
        fmt = "svg"  # OUT is a folder: its name says nothing about the format
    else:
        try:
            fmt = gx.format_for(args.output, args.format)
        except gx.ExportError as e:
            raise UsageError(f"{e} (or choose one with --format)" if args.format is None
                             else str(e)) from None
    rankdir = str(args.rankdir).upper()
    if rankdir not in gx.RANKDIRS:
        raise UsageError(f"--rankdir must be TB or LR, not {args.rankdir!r}")
    if not args.timeout > 0:
        raise UsageError("--timeout must be a positive number of seconds")
    return _Options(Path(args.output), frames, fmt, rankdir, args.values,
                    args.collapse_leaves, float(args.timeout), args.unfold)


def _load(source: str, args: argparse.Namespace) -> _Source:
    if source.endswith((".jsonl", ".gz", ".json")) and not is_recording(source):
        raise Failure(f"{source}: no such file")
    if is_recording(source):
        rec = load_recording(source)
        if rec.history is None:  # load() validates (and folds) by default
            from autograd_tui.history import History

            rec.history = History(rec.events)
        return _Source(rec.scenario or Path(source).name, list(rec.events), rec.history)
    r = make_run(source, args)
    try:
        run_to_end(r)
        if r.error is not None:
            say(f"note: the scenario's program stopped ({program_error_text(r.error)}); "
                "exporting the events up to there")
        return _Source(r.scenario.name, list(r.events), r.history)
    finally:
        r.close()


def _state_at(src: _Source, at: str) -> EngineState:
    """``--at k``: the state after events 1..k (``History.state_at(k)``), k in 0..n."""
    n = len(src.events)
    if at.lower() == "end":
        return src.history.state_at(n)
    try:
        k = int(at)
    except ValueError:
        raise UsageError(f"--at must be an event number or 'end', not {at!r}") from None
    if k < 0:
        raise UsageError(f"--at {k}: event numbers start at 1; --at 0 is the state before "
                         "any event")
    if k > n:
        raise UsageError(f"--at {k} is past the end: {src.title} has {n} events (1..{n}); "
                         "use --at end for the final state")
    return src.history.state_at(k)


def _export_frames(src: _Source, args: argparse.Namespace, opt: _Options) -> int:
    from autograd_tui import export as gx
    from autograd_tui.commands.progress import progress

    ks = gx.frame_events(src.events, every=args.every, breakpoints=args.breakpoints)
    if not ks:
        what = ("no node_start, not_ready_insert, completion or deadlock event"
                if args.breakpoints else "no events")
        raise Failure(f"{src.title}: {what}: no frames to write")
    with progress(len(ks), f"{src.title}: frames") as bar:
        frames, index = gx.write_frames(src.events, ks, opt.output, fmt=opt.fmt,
                                        title=src.title, rankdir=opt.rankdir,
                                        values=opt.values, collapse_leaves=opt.collapse_leaves,
                                        timeout=opt.timeout, unfold=opt.unfold,
                                        on_frame=bar.advance)
    print(f"wrote {len(frames)} frames to {shown(opt.output)}/ ({frames[0].file} … "
          f"{frames[-1].file}) and {index}: open it in a browser and step with ←/→ (Home/End)")
    return EXIT_OK
