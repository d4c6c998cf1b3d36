"""A table's rows as plain data: ``(text, style)`` cells, and ``LazyRows``, rows made only
when they are drawn (a recording's million events, a graph of 100,000 nodes)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import overload

from textual.cache import LRUCache

from autograd_tui.words import plain

Cell = tuple[str, str]  # (text, Rich style)
Row = tuple[Cell, ...]


def cells(*values: str | Cell) -> Row:
    """A row from plain strings and ``(text, style)`` pairs."""
    # plain: a cell may hold a name from a recording (the widgets draw it as Text)
    return tuple((plain(v[0]), v[1]) if isinstance(v, tuple) else (plain(v), "")
                 for v in values)


class LazyRows(Sequence[Row]):
    """Rows made when they are drawn: ``fetch(i)`` for the ``count`` rows of a table too
    long to build in full.  The last rows made are kept."""

    def __init__(self, count: int, fetch: Callable[[int], Row], cache: int = 2048) -> None:
        self._count = count
        self._fetch = fetch
        self._made: LRUCache[int, Row] = LRUCache(cache)
        self._extra: list[Row] = []  # rows appended after the first ``count``

    def __len__(self) -> int:
        return self._count + len(self._extra)

    def extend(self, rows: Sequence[Row]) -> None:
        self._extra.extend(rows)

    def made(self, i: int) -> Row | None:
        """Row ``i`` if it has been made (and is still kept)."""
        return self._made.get(i)

    @overload
    def __getitem__(self, i: int) -> Row: ...

    @overload
    def __getitem__(self, i: slice) -> list[Row]: ...

    def __getitem__(self, i: int | slice) -> Row | list[Row]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if i >= self._count:
            return self._extra[i - self._count]  # IndexError past the end
        if i < 0:
            raise IndexError("row index out of range")
        row = self._made.get(i)
        if row is None:
            row = self._made[i] = self._fetch(i)
        return row
