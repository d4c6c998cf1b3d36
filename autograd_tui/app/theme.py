"""The graph pane's colours: the app's own theme variables, one per node state.

``graph-not-reached``, ``graph-not-ready``, ``graph-ready``, ``graph-running``,
``graph-done``, ``graph-skipped``, ``graph-errored`` colour a node (its box, its row in
the list and grouped views); ``graph-frame`` and ``graph-title`` a GraphTask's frame and
its title.  Their defaults come from the theme (``theme_defaults``: its ``text-success``,
``text-warning``, ... made for reading on its background), so that the app reads well in
light and dark themes alike; a ``Theme(variables={"graph-ready": "#00aa00"})`` overrides
any of them.  The pane reads them (``Palette.of``) when it draws and again when the theme
changes.  The badges carry the states without colour (NO_COLOR).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from textual.color import Color, ColorParseError
from textual.theme import Theme

#: state -> the one-letter badge that keeps its meaning without colour
BADGES = {"not_reached": "·", "not_ready": "W", "ready": "R", "running": "▶", "done": "✓",
          "skipped": "S", "errored": "E"}
#: the states drawn bold: the ones that move
BOLD = frozenset({"not_ready", "ready", "running", "errored"})
PARTS = ("frame", "title")


def variable(name: str) -> str:
    """``not_ready`` -> ``graph-not-ready``."""
    return "graph-" + name.replace("_", "-")


VARIABLES = tuple(variable(n) for n in (*BADGES, *PARTS))


def theme_defaults(theme: Theme) -> dict[str, str]:
    """The graph's variables for ``theme``: its readable text colours where it has one
    for the meaning (success: ready, warning: running, ...), a magenta of the theme's
    lightness for not_ready, and the foreground faded halfway to the background for
    nodes that are not reached or skipped."""
    cs = theme.to_color_system().generate()

    def color(key: str, fallback: str) -> Color:
        try:
            return Color.parse(cs.get(key, fallback))
        except ColorParseError:
            return Color.parse(fallback)

    bg = color("background", "#121212" if theme.dark else "#E0E0E0")
    fg = bg + color("foreground", "#E0E0E0" if theme.dark else "#1F1F1F")
    faded = bg.blend(fg, 0.55).hex6
    return {
        variable("not_reached"): faded,
        variable("not_ready"): "#E07BE0" if theme.dark else "#8E2A8E",
        variable("ready"): (bg + color("text-success", "#4EBF71")).hex6,
        variable("running"): (bg + color("text-warning", "#FEA62B")).hex6,
        variable("done"): (bg + color("text-primary", "#0178D4")).hex6,
        variable("skipped"): faded,
        variable("errored"): (bg + color("text-error", "#B93C5B")).hex6,
        variable("frame"): (bg + color("text-secondary", "#0178D4")).hex6,
        variable("title"): fg.hex6,
    }


@dataclass(frozen=True)
class Palette:
    """Rich styles for the graph, from the theme's variables (hashable: the drawn boxes
    are kept by palette)."""

    states: tuple[tuple[str, str], ...]  # (state, style)
    frame: str
    title: str

    def style(self, state: str) -> str:
        for name, style in self.states:
            if name == state:
                return style
        return ""

    def state(self, state: str) -> tuple[str, str]:
        """(style, badge), as ``render.STATE_STYLE`` gives them."""
        return self.style(state), BADGES.get(state, "?")

    @classmethod
    def of(cls, variables: Mapping[str, str], theme: Theme | None = None) -> Palette:
        """The palette of an app's ``theme_variables`` (missing or unreadable ones: the
        defaults of ``theme``, or the ANSI palette without a theme)."""
        defaults = theme_defaults(theme) if theme is not None else {}

        def hex_of(name: str) -> str | None:
            for value in (variables.get(name), defaults.get(name)):
                if isinstance(value, str):
                    try:
                        return Color.parse(value).hex6
                    except ColorParseError:
                        continue
            return None

        states = []
        for st in BADGES:
            c = hex_of(variable(st))
            base = c if c is not None else ANSI.style(st).replace("bold ", "")
            states.append((st, ("bold " + base) if st in BOLD else base))
        frame, title = hex_of(variable("frame")), hex_of(variable("title"))
        return cls(tuple(states), frame or ANSI.frame, ("bold " + title) if title else "bold")


#: without a theme (tests, text output): the terminal's own colours
ANSI = Palette(
    (("not_reached", "grey50"), ("not_ready", "bold magenta"), ("ready", "bold green"),
     ("running", "bold yellow"), ("done", "blue"), ("skipped", "grey50"),
     ("errored", "bold red")),
    frame="cyan", title="bold")
