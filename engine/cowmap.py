"""``CowMap``: a dict whose copies share storage until written (copy-on-write chunks).

Not in PyTorch.  ``History`` keeps a snapshot of ``EngineState`` every K events;
with plain dicts each snapshot copies the whole state, so a long recording costs
time and memory quadratic in its length.  A CowMap splits its keys into chunks
by hash; ``copy()`` copies only the list of chunks, and a write copies the one
chunk it touches if a copy still shares it.  Iteration order is by chunk, not
by insertion: callers that show entries sort them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

CHUNKS = 64  # buckets per map: a copy costs 64 list slots, a write at most one bucket copy


class CowMap(Mapping[Any, Any]):
    __slots__ = ("_chunks", "_owned", "_len")

    def __init__(self, items: Mapping[Any, Any] | None = None) -> None:
        self._chunks: list[dict[Any, Any]] = [{} for _ in range(CHUNKS)]
        self._owned = [True] * CHUNKS  # False: shared with a copy, copy before writing
        self._len = 0
        if items:
            for k, v in items.items():
                self[k] = v

    def _writable(self, key: Any) -> dict[Any, Any]:
        i = hash(key) % CHUNKS
        if not self._owned[i]:
            self._chunks[i] = dict(self._chunks[i])
            self._owned[i] = True
        return self._chunks[i]

    def copy(self) -> CowMap:
        new = CowMap.__new__(CowMap)
        new._chunks = list(self._chunks)
        new._owned = [False] * CHUNKS
        self._owned = [False] * CHUNKS
        new._len = self._len
        return new

    def __getitem__(self, key: Any) -> Any:
        return self._chunks[hash(key) % CHUNKS][key]

    def get(self, key: Any, default: Any = None) -> Any:
        return self._chunks[hash(key) % CHUNKS].get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._chunks[hash(key) % CHUNKS]

    def __setitem__(self, key: Any, value: Any) -> None:
        chunk = self._writable(key)
        if key not in chunk:
            self._len += 1
        chunk[key] = value

    def __delitem__(self, key: Any) -> None:
        chunk = self._writable(key)
        del chunk[key]
        self._len -= 1

    def pop(self, key: Any, *default: Any) -> Any:
        if key in self:
            value = self[key]
            del self[key]
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def __iter__(self) -> Iterator[Any]:
        for chunk in self._chunks:
            yield from chunk

    def __len__(self) -> int:
        return self._len

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CowMap):
            if self._len != other._len:
                return False
            return all(a is b or a == b for a, b in zip(self._chunks, other._chunks))
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CowMap({dict(self.items())!r})"
