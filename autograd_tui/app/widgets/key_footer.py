"""The footer: the keys that matter most at the terminal's width.

Textual's ``Footer`` shows every binding in a row and cuts off what does not fit (at
120 columns ``s``, ``e``, ``t``, ``?`` and ``q`` were cut off).  ``FOOTER_KEYS`` is the
one place that says which keys the footer shows and how much each matters; every key,
shown or not, is in the help screen (``?``)."""

from __future__ import annotations

from collections.abc import Iterable

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

# (action, importance): left to right as shown; importance 1 shows first as the width
# shrinks.  A key shows only if every more important key does; a binding whose action is
# not here is never in the footer (it stays in the help screen and the command palette).
FOOTER_KEYS: tuple[tuple[str, int], ...] = (
    ("move('node')", 1),  # n: over a node
    ("toggle_run", 1),
    ("back", 1),
    ("forward", 1),
    ("next_pane", 1),  # only while the side panes are tabs (a short terminal)
    ("continue", 3),
    ("breakpoints", 3),
    ("step", 3),  # .: one event (n, a node, is the first key)
    ("pause_thread", 4),
    # not pause_prefix (P then a thread's number): at 200 columns the footer holds every
    # key of this table and no more; P is in the help (?) and the palette (ctrl+p)
    ("goto", 4),
    ("toggle_view", 5),
    ("details", 5),
    ("restart", 5),
    ("jump", 6),  # replay: / finds the next event of a kind or a node
    # not copy_event (y): n's room at 200 columns; y is in the help (?) and the palette
    ("scenarios", 2),
    ("export", 2),
    ("notes", 2),
    ("help", 1),
    ("quit", 1),
)
_RANK = {action: i for i, (action, _) in enumerate(FOOTER_KEYS)}
_IMPORTANCE = dict(FOOTER_KEYS)


def key_width(key_display: str, description: str) -> int:
    """A ``FooterKey``'s cells: " key " then "description "."""
    return cell_len(key_display) + cell_len(description) + 3


def footer_actions(widths: dict[str, int], width: int) -> list[str]:
    """The actions shown in ``width`` cells, in ``FOOTER_KEYS`` order: the most important
    first, until one does not fit.  ``widths``: the cells of each bound action's key."""
    candidates = sorted((a for a in widths if a in _RANK), key=lambda a: (_IMPORTANCE[a],
                                                                         _RANK[a]))
    shown: list[str] = []
    used = 0
    for action in candidates:
        if used + widths[action] > width:
            break
        shown.append(action)
        used += widths[action]
    return sorted(shown, key=_RANK.__getitem__)


class KeyFooter(Footer):
    """``Footer`` with the keys of ``footer_actions``, chosen again when the width
    changes (a resize recomposes it only if the keys shown change)."""

    def __init__(self) -> None:
        super().__init__()
        self.shown: list[str] = []  # the actions shown, left to right

    def _bound_keys(self) -> tuple[dict[str, tuple[Binding, bool, str]],
                                 tuple[Binding, bool, str] | None]:
        """The bound actions (the first binding of each) and the command palette's key."""
        active = self.screen.active_bindings
        hidden = getattr(self.screen, "hidden_actions", frozenset())  # a replay's engine keys
        bound: dict[str, tuple[Binding, bool, str]] = {}
        for _, binding, enabled, tooltip in active.values():
            if binding.show and binding.action not in hidden:
                bound.setdefault(binding.action, (binding, enabled, tooltip))
        palette = None
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            found = active.get(self.app.COMMAND_PALETTE_BINDING)
            if found is not None:
                palette = (found.binding, found.enabled, found.tooltip)
                bound.pop(found.binding.action, None)
        return bound, palette

    def _choose(self, bound: dict[str, tuple[Binding, bool, str]],
                palette: tuple[Binding, bool, str] | None) -> list[str]:
        width = self.size.width or self.app.size.width
        if palette is not None:  # docked right, with a border and a space
            width -= key_width(self.app.get_key_display(palette[0]), palette[0].description) + 2
        return footer_actions({a: key_width(self.app.get_key_display(b), b.description)
                               for a, (b, _, _) in bound.items()}, width)

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        bound, palette = self._bound_keys()
        self.shown = self._choose(bound, palette)
        yield from self._keys(bound[a] for a in self.shown)
        if palette is not None:
            binding, enabled, tooltip = palette
            yield FooterKey(binding.key, self.app.get_key_display(binding), binding.description,
                            binding.action, classes="-command-palette", disabled=not enabled,
                            tooltip=tooltip or binding.description)

    def _keys(self, keys: Iterable[tuple[Binding, bool, str]]) -> ComposeResult:
        for binding, enabled, tooltip in keys:
            yield FooterKey(binding.key, self.app.get_key_display(binding), binding.description,
                            binding.action, disabled=not enabled,
                            tooltip=tooltip).data_bind(compact=Footer.compact)

    def on_resize(self, event: events.Resize) -> None:
        if self._bindings_ready and self._choose(*self._bound_keys()) != self.shown:
            self.call_after_refresh(self.recompose)
