"""The DDP pane (``D``): DDP's buckets per rank at the shown event, and why a bucket never
became ready.

Reads ``history.ddp.ddp_state`` of the events 1..k (the fold of the ``ddp_*`` events);
the words are ``words.py``'s.  Every name comes from the run (a recording: untrusted), so
it is shown as text, never as markup.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Label, Static

from autograd_tui.app.screens.modal import Modal
from autograd_tui.history.ddp import NEVER, PENDING, READY, REDUCED, REDUCING, ddp_state
from autograd_tui.words import never_ready_explanation, plain

_STYLE = {PENDING: "dim", READY: "yellow", REDUCING: "cyan", REDUCED: "green",
          NEVER: "bold red"}
NONE = "No DDP event up to this one: a DistributedDataParallel backward shows its buckets here."


def ddp_text(events: Iterable[Any]) -> Text:
    """Each rank's buckets (state, parameters); a never-ready bucket's explanation."""
    ranks = ddp_state(events)
    out = Text()
    if not ranks:
        return Text(NONE)
    for r in sorted(ranks):
        rs = ranks[r]
        out.append(f"rank {r}", "bold")
        if rs.hook:
            out.append(f"  communication hook {plain(rs.hook)}")
        out.append("  finalized\n" if rs.finalized else "\n")
        for k in sorted(rs.buckets):
            b = rs.buckets[k]
            out.append(f"  bucket {k:<3} ")
            out.append(f"{b.state:<13}", _STYLE.get(b.state, ""))
            out.append(plain(", ".join(b.params)) + "\n")
            if b.state == NEVER:
                out.append("    " + never_ready_explanation(r, k, b.missing, b.find_unused,
                                                            b.static_graph) + "\n", "red")
    return out


class DdpScreen(Modal):
    """The DDP pane over the debugger, at event ``k``."""

    BINDINGS = [Binding("escape,q,D", "dismiss_none", "Close")]

    def __init__(self, events: Iterable[Any], k: int) -> None:
        super().__init__()
        self._text, self._k = ddp_text(events), k

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog wide"):
            yield Label(f"DDP: buckets per rank at event {self._k}", classes="dialog-title")
            yield Static(self._text, id="ddp-text")
            yield Static("escape closes", classes="hint")
