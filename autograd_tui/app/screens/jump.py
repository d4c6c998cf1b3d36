"""The jump dialog (``/``; ``]`` / ``[`` when nothing was typed yet): the event kind, node,
module or parameter to jump to, the word being typed completed from the graph's names
(``WordSuggester``: right or tab takes the suggestion)."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.suggester import Suggester
from textual.widgets import Input, Label, Static

from autograd_tui.app.screens.modal import Modal


class WordSuggester(Suggester):
    """Completes the last word of a query from ``words`` (the graph's names: kinds, nodes,
    module paths, parameters; any case): the first in order that starts with it."""

    def __init__(self, words: Sequence[str]) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self._keys = sorted((w.lower(), w) for w in words)

    async def get_suggestion(self, value: str) -> str | None:
        head, _, word = value.rpartition(" ")
        low = word.lower()
        if not low or "=" in low and not low.split("=", 1)[1]:
            return None
        field, eq, rest = low.partition("=")
        key = rest if eq else low
        i = bisect.bisect_left(self._keys, (key, ""))
        if i < len(self._keys) and self._keys[i][0].startswith(key) and self._keys[i][0] != key:
            done = self._keys[i][1]
            return (head + " " if head else "") + (word[:len(field) + 1] if eq else "") + done
        return None


class JumpScreen(Modal):
    """Dismissed with what ``parse`` makes of the text typed (or None).  A text that
    ``parse`` refuses (it raises ``ValueError``) keeps the dialog open and says why."""

    def __init__(self, parse: Callable[[str], Any], forward: bool = True,
                 value: str = "", words: Sequence[str] = ()) -> None:
        super().__init__()
        self.parse = parse
        self.forward = forward
        self.value = value
        self.words = words

    def compose(self) -> ComposeResult:
        where = "next" if self.forward else "previous"
        with Vertical(classes="dialog"):
            yield Label(f"Jump to the {where} event of a kind, a node, a module or a "
                        "parameter", classes="dialog-title")
            yield Input(value=self.value, id="jump", suggester=WordSuggester(self.words),
                        placeholder="push, #5, MulBackward0, encoder.layers.0, push #5")
            yield Static("enter jumps; then ] jumps to the next one, [ to the previous; "
                         "right completes a name; escape cancels", classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            q = self.parse(event.value)
        except ValueError as e:
            self.notify(str(e), severity="warning")
            return
        self.dismiss(q)
