"""Progress bars for work that takes seconds: on a terminal, and nothing in a pipe.

``with progress(total, "writing frames") as bar: ... bar.advance()`` draws a
Rich progress bar on standard error while the block runs, and erases it at the
end (the command's own last line says what was done).  When standard error is
not a terminal (a pipe, a file, a CI log) the bar is a silent object: nothing
extra is written, and ``advance`` costs one method call.  ``total=None`` is work
of unknown size (a pulsing bar); ``update`` sets the total or the words later.

Every command that may take more than about a second uses it: ``export`` of
frames, loading a big recording (``common.load_recording``), ``replay
--reexecute``.  ``advance`` may be called from any thread (Rich's bar holds a
lock).  The description may hold a name from a file: it is shown as text, with
control characters made visible, never as Rich markup.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any


class Bar:
    """What ``progress`` gives: ``advance`` after each piece of work."""

    def advance(self, n: int = 1) -> None:
        """``n`` more pieces done."""

    def update(self, *, total: int | None = None, description: str | None = None) -> None:
        """A total found later, or new words (the stage of the work)."""


class _RichBar(Bar):
    def __init__(self, rich_progress: Any, task: Any) -> None:
        self._progress, self._task = rich_progress, task

    def advance(self, n: int = 1) -> None:
        self._progress.advance(self._task, n)

    def update(self, *, total: int | None = None, description: str | None = None) -> None:
        from autograd_tui.words import plain

        fields: dict[str, Any] = {}
        if total is not None:
            fields["total"] = total
        if description is not None:
            fields["description"] = plain(description)
        self._progress.update(self._task, **fields)


def is_terminal(stream: IO[str] | None) -> bool:
    try:
        return stream is not None and bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


@contextmanager
def progress(total: int | None, description: str, *,
             stream: IO[str] | None = None) -> Iterator[Bar]:
    """A progress bar on ``stream`` (standard error) if it is a terminal, else nothing."""
    out = sys.stderr if stream is None else stream
    if not is_terminal(out):
        yield Bar()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from autograd_tui.words import plain

    console = Console(file=out, force_terminal=True)
    columns = [TextColumn("{task.description}", markup=False), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn()]
    with Progress(*columns, console=console, transient=True) as bar:
        # Rich stops its refresh thread without waiting for it: wait here, so that no
        # thread outlives the bar
        refresher = getattr(bar.live, "_refresh_thread", None)
        task = bar.add_task(plain(description), total=total)
        try:
            yield _RichBar(bar, task)
        finally:
            bar.stop()
            if refresher is not None:
                refresher.join(1.0)
