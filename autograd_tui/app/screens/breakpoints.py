"""The breakpoints dialog (``b``): add breakpoints on an event's kind, node (a node's name
or id, an nn.Module path, a parameter's name: completed from the graph's), queue or
thread, or on the first non-finite gradient, or clear them."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Checkbox, Input, Label, Static

from autograd_tui.app.screens.jump import WordSuggester
from autograd_tui.app.screens.modal import Modal
from autograd_tui.control.query import QueryError
from autograd_tui.session import Breakpoint

HINT = ("tab moves between the fields, space ticks the box, enter in a field adds "
        "the breakpoint, escape closes")


class BreakpointsScreen(Modal):
    """Add breakpoints (every given field must match) or clear them."""

    def __init__(self, existing: list[Breakpoint], words: Sequence[str] = ()) -> None:
        super().__init__()
        self.existing = list(existing)
        self.words = words  # the graph's names, for completion

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Breakpoints: stop when an event matches", classes="dialog-title")
            yield Static(self._listing(), id="bp-list")
            yield Input(placeholder="event kind, e.g. not_ready_insert", id="bp-kind")
            yield Input(placeholder="node, module or parameter, e.g. ReluBackward0, "
                        "encoder.layers.0, module=0", id="bp-node",
                        suggester=WordSuggester(self.words))
            yield Input(placeholder="queue, e.g. cpu or cuda:0", id="bp-queue")
            yield Input(placeholder="thread, e.g. cuda:0", id="bp-thread")
            yield Checkbox("the first NaN or Inf gradient", id="bp-nonfinite")
            yield Static(HINT, id="bp-hint", classes="hint")
            with Horizontal(classes="buttons"):
                yield Button("Add", id="bp-add", variant="primary")
                yield Button("Clear all", id="bp-clear")
                yield Button("Done", id="bp-done")

    def _listing(self) -> str:
        if not self.existing:
            return "(no breakpoints: `c` then runs to the end)"
        return "\n".join(f"{i + 1}. {b.describe()}" for i, b in enumerate(self.existing))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._add()  # the keyboard's Add

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "bp-add":
            self._add()
        elif event.button.id == "bp-clear":
            self.existing.clear()
            self.query_one("#bp-list", Static).update(self._listing())
        else:
            self.dismiss(self.existing)

    def _add(self) -> None:
        vals: dict[str, str | None] = {
            k: (self.query_one(f"#bp-{k}", Input).value.strip() or None)
            for k in ("kind", "node", "queue", "thread")}
        node = vals["node"]
        key, eq, value = (node or "").partition("=")
        if eq and key.strip().lower() in ("module", "param", "node"):
            # a module path that is a number (nn.Sequential's 0) would be node #0
            vals["node"] = None
            vals[key.strip().lower()] = value.strip() or None
        box = self.query_one("#bp-nonfinite", Checkbox)
        try:  # the one event query checks the fields (control/query.py)
            bp = Breakpoint(**vals, nonfinite=box.value)
        except QueryError as e:
            self.notify(str(e), severity="warning")
            return
        self.existing.append(bp)
        for k in ("kind", "node", "queue", "thread"):
            self.query_one(f"#bp-{k}", Input).value = ""
        box.value = False
        self.query_one("#bp-list", Static).update(self._listing())

    def action_dismiss_none(self) -> None:
        self.dismiss(self.existing)
