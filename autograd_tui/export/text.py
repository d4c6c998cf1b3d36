"""The text printer: a run's events as lines, one per event (``words.format_event``).

Not in PyTorch.  The one printer of a trace: ``run``/``replay``/``torch --headless``
print through it, and so can a program that watches an engine (docs/engine.md).  Every
line is worded by ``words.py`` and styled by its ``KIND_STYLE``, as the app's event log is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autograd_tui.engine.events import Event
from autograd_tui.words import KIND_STYLE, format_event, node_names

#: trace lines written at a time (about 100 KB)
TRACE_BATCH = 1000


def print_trace(events: Sequence[Event], con: Any = None) -> None:
    """One line per event (``words.format_event``), coloured by kind, on the Rich console
    ``con`` (default: stdout, colour only on a terminal and not under NO_COLOR).

    Rich's print costs about 50 us a line, and a trace has as many lines as the run has
    events: the lines are written in batches instead, each framed the way Rich frames
    one line of its style on this console (asked once per style: colour on a terminal,
    none under NO_COLOR or in a pipe), so the bytes are Rich's own."""
    from rich.console import Console
    from rich.text import Text

    if con is None:
        con = Console(highlight=False, soft_wrap=True)
    names = node_names(events)
    if not con.soft_wrap or con.record or con.is_jupyter or con.legacy_windows:
        for e in events:  # a console that lays lines out itself: line by line
            con.print(Text(format_event(e, names), style=KIND_STYLE.get(e.kind, "")))
        return
    frames: dict[str, tuple[str, str]] = {}
    batch: list[str] = []
    try:
        for e in events:
            style = KIND_STYLE.get(e.kind, "")
            frame = frames.get(style)
            if frame is None:
                with con.capture() as cap:
                    con.print(Text("x", style=style))
                before, _, after = cap.get().partition("x")
                frame = frames[style] = (before, after)
            batch.append(f"{frame[0]}{format_event(e, names)}{frame[1]}")
            if len(batch) == TRACE_BATCH:
                con.file.write("".join(batch))
                batch.clear()
        con.file.write("".join(batch))
        con.file.flush()
    except BrokenPipeError:  # the reader went away (``| head``): as Rich's print does
        con.on_broken_pipe()
