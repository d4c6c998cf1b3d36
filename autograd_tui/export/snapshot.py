"""``Snapshot``: one state's Graphviz picture as an object a notebook displays.

In Jupyter the last expression of a cell is shown through its ``_repr_mimebundle_`` (or
``_repr_svg_``), so ``snapshot(recording, at=40)`` draws the graph at event 40 under the
cell.  The drawing is ``to_dot``'s, the same as ``autograd-tui export``'s; the
``graphviz`` package wraps it (``.source``, ``.graphviz()`` for its own API), and the SVG
comes from ``render`` (Graphviz's ``dot``, with a timeout, its errors as ``ExportError``).
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import graphviz

from autograd_tui.export.dot import to_dot
from autograd_tui.export.render import ExportError, render
from autograd_tui.export.write import export_state
from autograd_tui.history.history import History
from autograd_tui.history.recordings import Recording
from autograd_tui.history.state import EngineState


class Snapshot:
    """The graph, queues and buffers of one ``EngineState``, as Graphviz draws them."""

    def __init__(self, state: EngineState, *, title: str | None = None, rankdir: str = "TB",
                 values: bool = True, collapse_leaves: bool = False) -> None:
        self.state = state
        self._options: dict[str, Any] = {"title": title, "rankdir": rankdir, "values": values,
                                         "collapse_leaves": collapse_leaves}

    @cached_property
    def source(self) -> str:
        """The DOT text (deterministic: the same state gives the same text)."""
        return to_dot(self.state, **self._options)

    def graphviz(self) -> graphviz.Source:
        """The ``graphviz`` package's object, for its own rendering and viewing API."""
        return graphviz.Source(self.source)

    @cached_property
    def svg(self) -> str:
        return render(self.source, "svg").decode()

    def save(self, path: str | Path) -> str:
        """Writes an svg, png, pdf or dot file (by its suffix), as ``autograd-tui export``."""
        return export_state(self.state, path, **self._options) or str(path)

    # --- Jupyter ----------------------------------------------------------------------------
    # A notebook shows a failed repr as a traceback: without ``dot`` the cell says why in
    # one line instead.
    def _repr_svg_(self) -> str | None:
        try:
            return self.svg
        except ExportError:
            return None

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None
                          ) -> dict[str, str]:
        try:
            return {"image/svg+xml": self.svg, "text/plain": repr(self)}
        except ExportError as e:
            return {"text/plain": f"{self!r}: {e}"}

    def __repr__(self) -> str:
        last = self.state.last_event
        at = f"after event {last.seq}" if last is not None else "before the first event"
        return f"<Snapshot of {len(self.state.nodes)} nodes, {at}>"


def snapshot(source: History | Recording | EngineState, at: int | None = None,
             **options: Any) -> Snapshot:
    """A ``Snapshot`` of a ``History``, a ``Recording`` (``recordings.load``) or a state:
    at event ``at`` (the state after events 1..at), after the last event when omitted."""
    if isinstance(source, EngineState):
        return Snapshot(source, **options)
    if isinstance(source, Recording):
        n = len(source.events)
    elif isinstance(source, History):
        n = len(source)
    else:
        raise TypeError(f"snapshot() takes a History, a Recording or an EngineState, "
                        f"not {type(source).__name__}")
    k = n if at is None else at
    if not 0 <= k <= n:
        raise ValueError(f"at must be between 0 and {n} (the events there are), not {k}")
    return Snapshot(source.state_at(k), **options)
