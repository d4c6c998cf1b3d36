"""What the program writes to stdout and stderr while the app runs, kept to be shown.

Textual already takes ``sys.stdout`` and ``sys.stderr`` while it runs (its print capture);
the app asks for that text (``App.begin_capture_print``) and keeps it here, so a program's
``print`` or a library's warning never lands on the panes.  A ``logging`` handler made
before the app started (a library's, at import: transformers') holds the terminal's own
stream, which Textual does not take: ``redirect_log_handlers`` points each such handler at
the current ``sys.stdout``/``sys.stderr`` (Textual's capture) and puts it back afterwards.
Headless commands print the program's output as it comes, as before.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable

#: the lines kept (the newest): a chatty program does not grow the app without bound
MAX_LINES = 10_000


class ProgramOutput:
    """The program's lines, as ``(stream, text)``: stream is ``stdout`` or ``stderr``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lines: list[tuple[str, str]] = []
        self._partial = {"stdout": "", "stderr": ""}

    def add(self, text: str, stderr: bool = False) -> None:
        stream = "stderr" if stderr else "stdout"
        with self._lock:
            *done, rest = (self._partial[stream] + text).split("\n")
            self._partial[stream] = rest
            self._lines.extend((stream, line) for line in done)
            del self._lines[:-MAX_LINES]

    def lines(self) -> list[tuple[str, str]]:
        """Every line so far, an unfinished last line included."""
        with self._lock:
            return self._lines + [(s, t) for s, t in self._partial.items() if t]

    def __len__(self) -> int:
        return len(self.lines())


def redirect_log_handlers() -> Callable[[], None]:
    """Point the ``logging`` stream handlers that write to the terminal's own stdout or
    stderr at the current ``sys.stdout``/``sys.stderr``; the function that undoes it."""
    real = {id(sys.__stdout__): sys.stdout, id(sys.__stderr__): sys.stderr}
    loggers = [logging.getLogger(), *(lg for lg in logging.Logger.manager.loggerDict.values()
                                      if isinstance(lg, logging.Logger))]
    moved: list[tuple[logging.StreamHandler, object]] = []  # type: ignore[type-arg]
    for lg in loggers:
        for h in lg.handlers:
            if type(h) is logging.StreamHandler and id(h.stream) in real:
                moved.append((h, h.stream))
                h.setStream(real[id(h.stream)])

    def restore() -> None:
        for h, stream in moved:
            h.setStream(stream)  # type: ignore[arg-type]

    return restore
