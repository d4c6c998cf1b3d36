"""``Shown``: the debugger screen as its members (``Driver``, ``Playback``) see it: the
session, the shown event, its worker, and the few Textual calls they make.

A ``Protocol``, so that a member names what it uses of the screen without importing the
screen's module (which imports the members).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from textual.app import App
from textual.timer import Timer

from autograd_tui.session import Session


class Shown(Protocol):
    """``DebuggerScreen``: a session shown at ``cursor``; ``seen`` is the newest event
    drawn, ``follow`` whether the cursor follows it."""

    session: Session | None
    cursor: int
    seen: int
    follow: bool

    @property
    def app(self) -> App[Any]: ...

    def show_event(self, k: int) -> None: ...

    def names(self) -> dict[int, str]: ...

    def update_title(self) -> None: ...

    def redraw(self) -> None: ...

    def drive(self, what: str, thread: str | None = None) -> None: ...

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...

    def set_interval(self, interval: float, callback: Callable[[], Any]) -> Timer: ...
