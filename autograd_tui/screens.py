"""Modal screens: help, teaching notes, go to, breakpoints, scenarios, export."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Markdown, OptionList, Static
from textual.widgets.option_list import Option

HELP = """\
# autograd-tui: keys

| key | what it does |
|---|---|
| `space` | run / pause all threads (runs to the next breakpoint or the end) |
| `n` | step: the scheduler picks the next thread and it moves one event |
| `1`-`9` | step thread k (the number in the threads pane) |
| `p` | pause / resume the thread selected in the threads pane |
| `c` | continue to the next breakpoint |
| `b` | breakpoints: stop on an event kind, node, queue or thread |
| `left` / `right` | step back / forward through the history |
| `home` / `end` | first / last event |
| `g` | go to an event index |
| `v` | graph view / compact list view |
| `d` | node details (of the node the shown event touched, or the selected row) |
| `shift+arrows` | pan the graph |
| `r` | restart the scenario |
| `s` | pick another scenario |
| `e` | export a Graphviz snapshot of the shown state |
| `t` | the scenario's teaching notes |
| `?` | this help |
| `q` | quit (tears down every engine thread) |

**Colours and badges** (the badge letter carries the meaning without colour):
`·` not reached, `W` waiting in not_ready, `R` ready in a queue, `▶` running,
`✓` done, `S` skipped, `E` errored.  The node the shown event touched is drawn
in reverse video.

**Live runs keep their history**: step back with `left` while the engine waits;
`n` or `space` moves the engine on and jumps back to the newest event.
"""


class _Modal(ModalScreen[Any]):
    BINDINGS = [Binding("escape", "dismiss_none", "Close")]
    AUTO_FOCUS = "*"  # the dialog's first input (the app focuses nothing by default)
    DEFAULT_CSS = """
    _Modal { align: center middle; }
    """

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class TextScreen(_Modal):
    """Markdown in a scrollable box (help, teaching notes)."""

    BINDINGS = [Binding("escape,q,question_mark,t", "dismiss_none", "Close")]

    def __init__(self, markdown: str, title: str) -> None:
        super().__init__()
        self._markdown = markdown
        self._title = title

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog wide"):
            yield Label(self._title, classes="dialog-title")
            yield Markdown(self._markdown)
            yield Static("escape closes", classes="hint")


class GotoScreen(_Modal):
    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(f"Go to event (0..{self.count})", classes="dialog-title")
            yield Input(placeholder="event index", id="goto", type="integer")
            yield Static("enter to go, escape to cancel", classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            i = int(event.value)
        except ValueError:
            self.notify("type a whole number", severity="warning")
            return
        if not 0 <= i <= self.count:
            self.notify(f"{i} is outside 0..{self.count}", severity="warning")
            return
        self.dismiss(i)


class BreakpointsScreen(_Modal):
    """Add breakpoints (every given field must match) or clear them."""

    def __init__(self, existing: list[Any]) -> None:
        super().__init__()
        self.existing = list(existing)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Breakpoints: stop when an event matches", classes="dialog-title")
            yield Static(self._listing(), id="bp-list")
            yield Input(placeholder="event kind, e.g. not_ready_insert", id="bp-kind")
            yield Input(placeholder="node name or id, e.g. ReluBackward0", id="bp-node")
            yield Input(placeholder="queue, e.g. cpu or cuda:0", id="bp-queue")
            yield Input(placeholder="thread, e.g. cuda:0", id="bp-thread")
            with Horizontal(classes="buttons"):
                yield Button("Add", id="bp-add", variant="primary")
                yield Button("Clear all", id="bp-clear")
                yield Button("Done", id="bp-done")

    def _listing(self) -> str:
        if not self.existing:
            return "(no breakpoints: `c` then runs to the end)"
        return "\n".join(f"{i + 1}. {b.describe()}" for i, b in enumerate(self.existing))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        from autograd_tui.session import Breakpoint

        if event.button.id == "bp-add":
            vals = {k: (self.query_one(f"#bp-{k}", Input).value.strip() or None)
                    for k in ("kind", "node", "queue", "thread")}
            from autograd_tui.engine.events import SCHEMA

            if vals["kind"] and vals["kind"] not in SCHEMA:
                self.notify(f"unknown event kind {vals['kind']!r}", severity="warning")
                return
            self.existing.append(Breakpoint(**vals))
            for k in ("kind", "node", "queue", "thread"):
                self.query_one(f"#bp-{k}", Input).value = ""
            self.query_one("#bp-list", Static).update(self._listing())
        elif event.button.id == "bp-clear":
            self.existing.clear()
            self.query_one("#bp-list", Static).update(self._listing())
        else:
            self.dismiss(self.existing)

    def action_dismiss_none(self) -> None:
        self.dismiss(self.existing)


class ScenarioScreen(_Modal):
    def __init__(self, items: list[tuple[str, str]]) -> None:
        super().__init__()
        self.items = items

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Label("Pick a scenario (enter)", classes="dialog-title")
            yield OptionList(*[Option(f"{name:24} {summary}", id=name)
                               for name, summary in self.items], id="scenario-list")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)


class ExportScreen(_Modal):
    def __init__(self, default: str) -> None:
        super().__init__()
        self.default = default

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Export the shown state (.dot, .svg, .png or .pdf)",
                        classes="dialog-title")
            yield Input(value=self.default, id="export-path")
            yield Static("enter to write, escape to cancel", classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.dismiss(event.value.strip())
