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
    """The DDP pane over the debugger, following its shown event: ``left``/``right`` walk
    the history and ``.`` steps a live run from here too (the debugger's own actions)."""

    BINDINGS = [Binding("escape,q,D", "dismiss_none", "Close"),
                Binding("left", "debugger('back')", "Back"),
                Binding("right", "debugger('forward')", "Fwd"),
                Binding("full_stop", "debugger('step')", "Step", key_display=".")]
    REFRESH_S = 0.1  # how often it looks at the shown event

    def __init__(self, debugger: Any) -> None:
        super().__init__()
        self._debugger, self._k = debugger, -1

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog wide"):
            yield Label("DDP: buckets per rank", id="ddp-title", classes="dialog-title")
            yield Static(id="ddp-text")
            yield Static("left/right: history, .: step, escape closes", classes="hint")

    def on_mount(self) -> None:
        self.redraw()
        self.set_interval(self.REFRESH_S, self.redraw)

    def redraw(self) -> None:
        """The state at the debugger's shown event, when that changed."""
        s, k = self._debugger.session, self._debugger.cursor
        if s is None or k == self._k:
            return
        self._k = k
        self.query_one("#ddp-title", Label).update(f"DDP: buckets per rank at event {k}")
        self.query_one("#ddp-text", Static).update(ddp_text(s.events(0, k)))

    def action_debugger(self, action: str) -> None:
        getattr(self._debugger, f"action_{action}")()
        self.redraw()
