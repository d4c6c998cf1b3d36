"""``autograd-tui export``: Graphviz snapshots of a run, one state or a frame sequence.

``add_arguments(parser)`` fills the ``export`` sub-command's parser and
``run(args)`` does the work and returns the exit code: 0 done, 1 a file or
Graphviz problem (or an error loading a recording or scenario file), 2 bad
usage.  Every problem is one message on stderr, never a traceback.

The source is a scenario (a built-in name or a ``.py`` file, run now,
headless, under the controller with ``--policy``/``--seed``) or a recording
(any other existing file).  Event numbers are the ones ``autograd-tui run
--headless`` prints: ``--at N`` draws the state just after event N.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograd_tui import export as gx
from autograd_tui.engine.events import Event
from autograd_tui.history.state import EngineState

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
PROG = "autograd-tui export"

DESCRIPTION = """\
Draw the engine's state with Graphviz: the backward graph (one node per backward
node, coloured by state, with its sequence number, remaining dependencies and, while
it waits in not_ready, its InputBuffer slots), one cluster per device, the ready
queues, GraphTasks and threads in a side table, the edge whose gradient just flowed
in bold, and a deadlock's wait-for cycle in red.

NAME|FILE is a scenario (a built-in name or a .py file; it is run now, headless) or
a recording (.jsonl / .jsonl.gz). Event numbers are those `autograd-tui run
--headless` prints: --at N draws the state just after event N.

--every K and --breakpoints write a frame sequence into the directory OUT
(frame-0000.svg, ...) and an index.html that steps through it with the arrow keys.
--breakpoints takes a frame after every node_start, not_ready_insert, completion
and deadlock event.

svg, png and pdf are rendered by Graphviz `dot`; without it the .dot file is still
written (install Graphviz: apt-get install graphviz / brew install graphviz)."""

EPILOG = """\
examples:
  autograd-tui export linear-relu --at 52 -o linear-relu.svg
  autograd-tui export linear-relu --at end -o end.png --rankdir LR --collapse-leaves
  autograd-tui export linear-relu --every 1 -o frames/
  autograd-tui export deadlock-reentrant-block --breakpoints -o frames/ --format png
  autograd-tui export run.jsonl.gz --at 40 -o state.dot --no-values
  autograd-tui export multi-device --policy random --seed 3 --at end -o md.pdf"""


class _Usage(Exception):
    """Bad usage (exit code 2)."""


class _Failure(Exception):
    """A file, Graphviz or input problem (exit code 1)."""


_USAGE_PHRASES = ("no scenario named", "unknown parameter", "must be", "unknown engine option",
                  "bad schedule", "unknown policy")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``export`` options to ``parser`` (the sub-command's parser)."""
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("source", metavar="NAME|FILE",
                        help="a scenario (built-in name or .py file) or a recording")
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--at", metavar="N|end",
                      help="draw the state just after event N, or at the end (default)")
    when.add_argument("--every", type=int, metavar="K",
                      help="a frame after every K-th event (and the last) into the "
                           "directory OUT, with index.html")
    when.add_argument("--breakpoints", action="store_true",
                      help="a frame after each node_start, not_ready_insert, completion and "
                           "deadlock event into the directory OUT, with index.html")
    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="the file to write (--at), or the directory for frames")
    parser.add_argument("--format", metavar="|".join(gx.FORMATS),
                        help="output format (default: from OUT's suffix, else svg)")
    parser.add_argument("--rankdir", default="TB", metavar="TB|LR",
                        help="TB: the graph top to bottom (default); LR: left to right")
    parser.add_argument("--values", action=argparse.BooleanOptionalAction, default=True,
                        help="show gradient values in slots and .grad (default: shown)")
    parser.add_argument("--collapse-leaves", action="store_true",
                        help="draw the AccumulateGrad leaves of each device as one node")
    parser.add_argument("--policy", default="round-robin",
                        help="for a scenario: round-robin (default), random, or "
                             "schedule:STRING")
    parser.add_argument("--seed", type=int, default=0, help="seed for --policy random")
    parser.add_argument("--param", action="append", default=[], metavar="K=V",
                        help="set a scenario parameter (repeatable)")
    parser.add_argument("--engine", action="append", default=[], metavar="K=V",
                        help="set an engine option, e.g. reentrant=block (repeatable)")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                        help="how long one `dot` run may take (default 60)")


def build_parser() -> argparse.ArgumentParser:
    """A stand-alone parser (``python -m autograd_tui.export_cmd``, tests)."""
    parser = argparse.ArgumentParser(prog=PROG)
    add_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    """Do the export; print one message per problem on stderr; return the exit code."""
    from autograd_tui.history.recordings import TraceError
    from autograd_tui.scenarios import ScenarioError

    try:
        return _run(args)
    except _Usage as e:
        _err(str(e))
        return EXIT_USAGE
    except (_Failure, gx.ExportError, TraceError) as e:
        _err(str(e))
        return EXIT_ERROR
    except ScenarioError as e:
        _err(str(e))
        return EXIT_USAGE if any(p in str(e) for p in _USAGE_PHRASES) else EXIT_ERROR
    except KeyboardInterrupt:
        _err("interrupted")
        return 130


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


def _err(msg: str) -> None:
    print(f"{PROG}: {msg}", file=sys.stderr)


# --- the work ---------------------------------------------------------------------------------
@dataclass
class _Source:
    title: str
    events: list[Event]
    history: Any  # autograd_tui.history.state.History


def _run(args: argparse.Namespace) -> int:
    opt = _options(args)
    out = Path(opt["output"])
    frames = opt["every"] is not None or opt["breakpoints"]
    _check_output(out, frames)
    src = _load(args)
    if frames:
        return _export_frames(src, out, opt)
    return _export_one(src, out, opt)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    g = lambda name, default=None: getattr(args, name, default)  # noqa: E731
    output = g("output")
    if not output:
        raise _Usage("-o/--output is required (a file, or a directory for frames)")
    every, breakpoints, at = g("every"), bool(g("breakpoints", False)), g("at")
    if sum(x is not None and x is not False for x in (at, every, breakpoints or None)) > 1:
        raise _Usage("choose one of --at, --every and --breakpoints")
    if every is not None and (not isinstance(every, int) or every < 1):
        raise _Usage(f"--every must be a positive number of events, not {every!r}")
    frames = every is not None or breakpoints
    fmt = g("format")
    try:
        fmt = gx.format_for(output, fmt) if fmt is not None or not frames else "svg"
    except gx.ExportError as e:
        raise _Usage(f"{e} (or choose one with --format)" if fmt is None else str(e)) from None
    rankdir = str(g("rankdir", "TB") or "TB").upper()
    if rankdir not in gx.RANKDIRS:
        raise _Usage(f"--rankdir must be TB or LR, not {g('rankdir')!r}")
    timeout = g("timeout", 60.0)
    if timeout is None or timeout <= 0:
        raise _Usage("--timeout must be a positive number of seconds")
    return {"output": output, "every": every, "breakpoints": breakpoints,
            "at": "end" if at is None else str(at).strip(), "format": fmt, "rankdir": rankdir,
            "values": bool(g("values", True)), "collapse": bool(g("collapse_leaves", False)),
            "timeout": float(timeout)}


def _check_output(out: Path, frames: bool) -> None:
    """Fail early (before running anything) if OUT cannot be written."""
    if frames:
        if out.exists() and not out.is_dir():
            raise _Failure(f"{out}: cannot write frames: it exists and is not a directory")
        probe = out
    else:
        if out.is_dir():
            raise _Failure(f"{out}: cannot write: it is a directory (frames need --every or "
                           "--breakpoints)")
        probe = out.parent
    # the nearest existing ancestor must be a writable directory
    p = probe if str(probe) else Path(".")
    while not p.exists():
        if p.parent == p:
            break
        p = p.parent
    if p.exists() and not p.is_dir():
        raise _Failure(f"{out}: cannot write: {p} is a file, not a directory")
    if not frames and not probe.exists():
        raise _Failure(f"{out}: cannot write: the folder {probe} does not exist")
    if p.exists() and not os.access(p, os.W_OK | os.X_OK):
        raise _Failure(f"{out}: cannot write: permission denied in {p}")


def _pairs(items: list[str] | None, what: str) -> dict[str, str]:
    out = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise _Usage(f"{what} {item!r} must look like KEY=VALUE")
        out[k.strip()] = v
    return out


def _is_recording(source: str) -> bool:
    return os.path.exists(source) and not source.endswith(".py")


def _load(args: argparse.Namespace) -> _Source:
    source = getattr(args, "source", None)
    if not source:
        raise _Usage("name a scenario or a recording to export")
    if source.endswith((".jsonl", ".gz", ".json")) and not os.path.exists(source):
        raise _Failure(f"{source}: no such file")
    if _is_recording(source):
        from autograd_tui.cli import load_recording

        rec = load_recording(source)
        history = rec.history if rec.history is not None else None
        if history is None:  # pragma: no cover - load() validates by default
            from autograd_tui.history.state import History

            history = History(rec.events)
        return _Source(rec.scenario or Path(source).name, list(rec.events), history)
    return _run_scenario(source, args)


def _run_scenario(source: str, args: argparse.Namespace) -> _Source:
    from autograd_tui import scenarios
    from autograd_tui.control import ScheduleDivergence, make_policy
    from autograd_tui.runner import Run

    policy = getattr(args, "policy", "round-robin") or "round-robin"
    seed = getattr(args, "seed", 0) or 0
    try:
        make_policy(policy, seed)
    except ValueError as e:
        raise _Usage(str(e)) from None
    scenario = scenarios.load(source)
    run = Run(scenario, _pairs(getattr(args, "param", None), "--param"), policy=policy,
              seed=seed, engine_overrides=_pairs(getattr(args, "engine", None), "--engine"))
    try:
        try:
            run.run()
        except ScheduleDivergence as e:
            raise _Usage(f"--policy schedule: {e}") from None
        if run.error is not None:
            _err(f"note: the scenario's program raised {type(run.error).__name__}: "
                 f"{run.error}; exporting the events up to there")
        return _Source(scenario.name, list(run.events), run.history)
    finally:
        run.close()


def _state_at(src: _Source, at: str) -> EngineState:
    """``--at k``: the state after events 1..k (``History.state_at(k)``), k in 0..n."""
    n = len(src.events)
    if at.lower() == "end":
        return src.history.state_at(n)
    try:
        k = int(at)
    except ValueError:
        raise _Usage(f"--at must be an event number or 'end', not {at!r}") from None
    if k < 0:
        raise _Usage(f"--at {k}: event numbers start at 1; --at 0 is the state before any "
                     "event")
    if k > n:
        raise _Usage(f"--at {k} is past the end: {src.title} has {n} events (1..{n}); "
                     "use --at end for the final state")
    return src.history.state_at(k)


def _export_one(src: _Source, out: Path, opt: dict[str, Any]) -> int:
    state = _state_at(src, opt["at"])
    try:
        msg = gx.export_state(state, out, fmt=opt["format"], rankdir=opt["rankdir"],
                              values=opt["values"], collapse_leaves=opt["collapse"],
                              title=src.title, timeout=opt["timeout"])
    except gx.ExportError as e:
        raise _Failure(str(e)) from None
    print(msg)
    return EXIT_OK


def _export_frames(src: _Source, out: Path, opt: dict[str, Any]) -> int:
    try:
        ks = gx.frame_events(src.events, every=opt["every"], breakpoints=opt["breakpoints"])
    except gx.ExportError as e:
        raise _Usage(str(e)) from None
    if not ks:
        what = ("no node_start, not_ready_insert, completion or deadlock event"
                if opt["breakpoints"] else "no events")
        raise _Failure(f"{src.title}: {what}: no frames to write")
    try:
        frames, index = gx.write_frames(src.events, ks, out, fmt=opt["format"],
                                        title=src.title, rankdir=opt["rankdir"],
                                        values=opt["values"], collapse_leaves=opt["collapse"],
                                        timeout=opt["timeout"])
    except gx.ExportError as e:
        raise _Failure(str(e)) from None
    print(f"wrote {len(frames)} frames to {out}/ ({frames[0].file} … {frames[-1].file}) and "
          f"{index}: open it in a browser and step with ←/→ (Home/End)")
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
