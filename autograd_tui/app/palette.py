"""The command palette's own commands (``ctrl+p``): every key binding of the debugger
screen that has a description, shown with its key; choosing one runs the binding's action.

Built from the screen's ``BINDINGS`` (those of each class of the screen, the subclass's
winning for a key, as Textual merges them), so a binding added to the screen's keys
shows up here with no other change.  A binding's ``tooltip`` is the command's help
line, and is searched too (``breakpoint`` finds ``Breakpts``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen


@dataclass(frozen=True)
class Command:
    """One binding as a command: what it says, its key, what it runs."""

    name: str
    key: str
    action: str
    help: str


def own_bindings(node: DOMNode) -> list[Binding]:
    """The bindings ``node``'s own classes declare (not Textual's), subclass first; a key
    declared twice, the subclass's binding only."""
    seen: set[str] = set()
    out: list[Binding] = []
    for cls in type(node).__mro__:
        if not issubclass(cls, DOMNode) or cls.__module__.split(".")[0] == "textual":
            continue
        for b in Binding.make_bindings(cls.__dict__.get("BINDINGS", [])):
            if b.key not in seen:
                seen.add(b.key)
                out.append(b)
    return out


def commands(screen: Screen[object]) -> list[Command]:
    """One command per action of ``screen`` that has a described binding (the first
    binding's key)."""
    found: dict[str, Command] = {}
    hidden = getattr(screen, "hidden_actions", frozenset())  # a replay's engine keys
    for b in own_bindings(screen):
        if b.description and b.action not in found and b.action not in hidden:
            found[b.action] = Command(b.description, screen.app.get_key_display(b), b.action,
                                      b.tooltip)
    return list(found.values())


class BindingCommands(Provider):
    """The screen's key bindings as palette commands (the debugger screen's ``COMMANDS``)."""

    def _commands(self) -> list[Command]:
        # Over a dialog, none: the screen's keys do nothing there either (a step would
        # move the engine behind the breakpoints dialog).
        return [] if isinstance(self.screen, ModalScreen) else commands(self.screen)

    def _prompt(self, c: Command, name: Content) -> Content:
        # Content, not markup: a key such as [ would be read as a markup tag
        return Content.assemble(name, ("  " + c.key, "dim"))

    def _run(self, c: Command) -> partial[object]:
        return partial(self.screen.run_action, c.action)

    async def discover(self) -> Hits:
        for c in self._commands():
            yield DiscoveryHit(self._prompt(c, Content(c.name)), self._run(c), text=c.name,
                               help=Content(c.help) if c.help else None)  # type: ignore[arg-type]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for c in self._commands():
            score = max(matcher.match(c.name), 0.9 * matcher.match(c.help))
            if score > 0:
                name = matcher.highlight(c.name) if matcher.match(c.name) else Content(c.name)
                yield Hit(score, self._prompt(c, name), self._run(c), text=c.name,
                          help=Content(c.help) if c.help else None)  # type: ignore[arg-type]
