"""The banner under the title: why the program failed, a deadlock's explanation, or why a
live run is paused."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

from autograd_tui.app.render import report_field
from autograd_tui.words import plain


def plain_lines(text: str) -> str:
    """Each line as plain text (``plain`` would show the line breaks as escapes)."""
    return "\n".join(plain(line) for line in text.split("\n"))


class Banner(Static):
    """Shown (class ``shown``) only while there is something to explain."""

    def show(self, status: str, report: Any, at_newest: bool,
             error: str | None = None) -> None:
        """``report``: the session's deadlock or pause report (an object in a live run, a
        dict in a recording); a pause is explained only at the newest event.  ``error``:
        why the program failed (its file, line and source line), shown at every event."""
        if status == "error" and error:
            self.update(Text("ERROR in the program  ", style="bold") + Text(plain_lines(error)))
            self.add_class("shown")
        elif status == "deadlock" and report is not None:
            self.update(Text("DEADLOCK  ", style="bold")
                        + Text(plain(report_field(report, "explanation", ""))))
            self.add_class("shown")
        elif report is not None and getattr(report, "kind", "") == "paused" and at_newest:
            self.update(Text(plain(report.explanation)))
            self.add_class("shown")
        else:
            self.remove_class("shown")
