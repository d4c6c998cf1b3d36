"""The base of the app's dialogs: centred over the app, escape closes."""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.screen import ModalScreen


class Modal(ModalScreen[Any]):
    """A dialog; ``escape`` dismisses it with None (nothing chosen)."""

    BINDINGS = [Binding("escape", "dismiss_none", "Close")]
    AUTO_FOCUS = "*"  # the dialog's first input (the app focuses nothing by default)
    DEFAULT_CSS = """
    Modal { align: center middle; }
    """

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
