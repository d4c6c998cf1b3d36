"""``EventStore``: a run's events kept as their encoded lines, decoded when read.

Not in PyTorch.  A decoded event is a Python object of 400 to 900 bytes; its line in a
recording is about 150.  So a loaded recording keeps the file's own bytes (one buffer)
with the offsets of its lines (numpy), and decodes a block of lines when an event in it
is read (a few decoded blocks are cached: a person steps back and forth in one place).
Beside the lines, per event, the one column scans need without decoding: the kind;
and, per run, the threads in order of appearance and the queues named.

A live run appends event objects (``append``: a list append, nothing more on the
engine's threads); ``compact`` encodes the appended ones into lines when their number
makes it worth it.  Reading is by index, slice (a list) and iteration, as a list.
"""

from __future__ import annotations

import bisect
import functools
import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, overload

import msgspec
import numpy as np

from autograd_tui.engine.events import EVENT_TYPES, Event

_DECODER = msgspec.json.Decoder(functools.reduce(operator.or_, EVENT_TYPES.values()))
_ENCODE = msgspec.json.Encoder().encode
#: the kinds in column order: ``kinds()[i]`` is the position of event i's kind here
KINDS: tuple[str, ...] = tuple(EVENT_TYPES)
_CODE = {t: i for i, t in enumerate(EVENT_TYPES.values())}
_THREAD, _QUEUE = operator.attrgetter("thread"), operator.attrgetter("queue")

BLOCK = 256  # events decoded together: a read decodes at most this many
CACHED = 48  # decoded blocks kept (12,288 events, a few MB)
#: bytes a stored event costs beside its line: its offset and its kind
PER_EVENT = 9


class _Segment:
    """Lines ``buf[offs[i]:offs[i + 1]]`` (each ending in a newline), events ``start``..."""

    __slots__ = ("buf", "offs", "start", "kinds")

    def __init__(self, buf: Any, offs: np.ndarray, start: int, kinds: np.ndarray) -> None:
        self.buf, self.offs, self.start, self.kinds = buf, offs, start, kinds

    def __len__(self) -> int:
        return len(self.offs) - 1

    def decode(self, a: int, b: int) -> list[Event]:
        o = self.offs
        return _DECODER.decode_lines(memoryview(self.buf)[int(o[a]):int(o[b])])


def kind_codes(events: Sequence[Event]) -> np.ndarray:
    return np.fromiter(map(_CODE.__getitem__, map(type, events)), np.uint8, len(events))


class EventStore(Sequence[Event]):
    """The events of a run, in order: encoded segments, then the appended objects."""

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self._segs: list[_Segment] = []
        self._starts: list[int] = []  # per segment: the index of its first event
        self._n = 0  # events in segments
        self._tail: list[Event] = []  # appended, not compacted
        self._cache: OrderedDict[tuple[int, int], list[Event]] = OrderedDict()
        self._threads: dict[str, None] = {}  # of the segments, in order of appearance
        self._queues: set[str | None] = set()
        self._lock = threading.RLock()  # compaction and the cache against readers
        self._encodable = True
        self._tail.extend(events)

    # --- writing ------------------------------------------------------------------------
    def append(self, event: Event) -> None:
        self._tail.append(event)

    def appender(self) -> Callable[[Event], None]:
        """``append`` with no call of ours around the list's (the tail list is never
        replaced): what a live run's gates call at each event."""
        return self._tail.append

    def extend(self, events: Iterable[Event]) -> None:
        self._tail.extend(events)

    def add_lines(self, buf: Any, offs: np.ndarray, events: Sequence[Event]) -> None:
        """Store ``events``, which are the lines ``buf[offs[i]:offs[i + 1]]`` (decoded by
        the caller, who checked them): the buffer is kept, not copied."""
        with self._lock:
            self.compact()
            if self._tail:  # events that could not be encoded come first: these follow
                self._tail.extend(events)
            else:
                self._add(buf, offs, events)

    def _add(self, buf: Any, offs: np.ndarray, events: Sequence[Event]) -> None:
        if not len(events):
            return
        assert len(offs) == len(events) + 1
        self._segs.append(_Segment(buf, offs, self._n, kind_codes(events)))
        self._starts.append(self._n)
        self._threads.update(dict.fromkeys(map(_THREAD, events)))
        self._queues.update(map(_QUEUE, events))
        self._n += len(events)

    def appended(self) -> int:
        """Events appended and not yet compacted."""
        return len(self._tail) if self._encodable else 0

    def compact(self) -> None:
        """Encode the appended events into lines (a list of objects takes 4 to 6 times
        the memory of their lines).  Events that cannot be encoded stay objects."""
        with self._lock:
            evs = self._tail[:]  # appends go on meanwhile (list appends, under the GIL)
            if not evs:
                return
            try:
                lines = list(map(_ENCODE, evs))
            except (TypeError, ValueError, msgspec.EncodeError):
                self._encodable = False  # not again: the objects are kept as they are
                return
            offs = np.zeros(len(lines) + 1, np.int64)
            np.cumsum(np.fromiter(map(len, lines), np.int64, len(lines)) + 1, out=offs[1:])
            self._add(b"\n".join(lines) + b"\n", offs, evs)
            del self._tail[:len(evs)]

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` events."""
        with self._lock:
            if n >= self._n:
                del self._tail[n - self._n:]
                return
            self._tail.clear()
            self._cache.clear()
            s = bisect.bisect_right(self._starts, n) - 1
            if n == self._starts[s]:
                s -= 1  # segment s is dropped whole
            del self._segs[s + 1:], self._starts[s + 1:]
            if s >= 0:
                seg = self._segs[s]
                keep = n - seg.start
                seg.offs, seg.kinds = seg.offs[:keep + 1], seg.kinds[:keep]
            self._n = n
            evs = list(self)  # the threads and queues of what is kept (an error path)
            self._threads = dict.fromkeys(map(_THREAD, evs))
            self._queues = set(map(_QUEUE, evs))

    # --- reading ------------------------------------------------------------------------
    def __len__(self) -> int:
        with self._lock:  # a compaction moves events from the tail to a segment
            return self._n + len(self._tail)

    @overload
    def __getitem__(self, i: int) -> Event: ...
    @overload
    def __getitem__(self, i: slice) -> list[Event]: ...

    def __getitem__(self, i: int | slice) -> Event | list[Event]:
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                return [self[j] for j in range(start, stop, step)]
            return self._range(start, stop)
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("event index out of range")
        with self._lock:
            if i >= self._n:
                return self._tail[i - self._n]
            s = bisect.bisect_right(self._starts, i) - 1
            j = i - self._starts[s]
            return self._block(s, j // BLOCK)[j % BLOCK]

    def _block(self, s: int, b: int) -> list[Event]:
        key = (s, b)
        got = self._cache.get(key)
        if got is not None:
            self._cache.move_to_end(key)
            return got
        seg = self._segs[s]
        got = seg.decode(b * BLOCK, min((b + 1) * BLOCK, len(seg)))
        self._cache[key] = got
        if len(self._cache) > CACHED:
            self._cache.popitem(last=False)
        return got

    def _range(self, start: int, stop: int) -> list[Event]:
        if stop <= start:
            return []
        with self._lock:
            out: list[Event] = []
            i = start
            while i < stop and i < self._n:
                s = bisect.bisect_right(self._starts, i) - 1
                seg = self._segs[s]
                a, b = i - seg.start, min(stop - seg.start, len(seg))
                if b - a <= BLOCK and a // BLOCK == (b - 1) // BLOCK:  # within one block
                    out += self._block(s, a // BLOCK)[a % BLOCK:a % BLOCK + b - a]
                else:
                    out += seg.decode(a, b)
                i = seg.start + b
            if stop > self._n:
                out += self._tail[max(start, self._n) - self._n:stop - self._n]
            return out

    def __iter__(self) -> Iterator[Event]:
        i = 0
        while i < len(self):  # a live run may append meanwhile: those are seen too
            chunk = self._range(i, min(i + 16 * BLOCK, len(self)))
            yield from chunk
            i += len(chunk)

    def __reversed__(self) -> Iterator[Event]:
        stop = len(self)
        while stop > 0:
            start = max(stop - BLOCK, 0)
            yield from reversed(self._range(start, stop))
            stop = start

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (EventStore, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Iterable[Event]) -> list[Event]:
        return [*self, *other]

    def __radd__(self, other: Iterable[Event]) -> list[Event]:
        return [*other, *self]

    def __repr__(self) -> str:
        return f"<EventStore of {len(self):,} events ({self._n:,} encoded)>"

    # --- scans without decoding ---------------------------------------------------------
    def kinds(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """The kind of events ``start..stop`` as positions in ``KINDS`` (uint8)."""
        with self._lock:
            n = self._n + len(self._tail)
            stop = n if stop is None else min(stop, n)
            parts = []
            s = max(bisect.bisect_right(self._starts, start) - 1, 0)
            for seg in self._segs[s:]:
                if seg.start >= stop:
                    break
                parts.append(seg.kinds[max(start - seg.start, 0):stop - seg.start])
            if stop > self._n:
                parts.append(kind_codes(self._tail[max(start - self._n, 0):stop - self._n]))
        return np.concatenate(parts) if parts else np.zeros(0, np.uint8)

    def pick(self, at: Sequence[int] | np.ndarray) -> list[Event]:
        """The events at the (increasing) indices ``at``, each line decoded alone."""
        out: list[Event] = []
        decode = _DECODER.decode
        with self._lock:
            at = np.asarray(at, np.int64)
            cut = int(np.searchsorted(at, self._n))
            for seg in self._segs:
                lo = int(np.searchsorted(at, seg.start))
                hi = int(np.searchsorted(at, seg.start + len(seg)))
                if lo == hi:
                    continue
                mv, o = memoryview(seg.buf), seg.offs
                js = at[lo:hi] - seg.start
                out += [decode(mv[a:b]) for a, b in zip(o[js].tolist(), o[js + 1].tolist())]
            out += [self._tail[j - self._n] for j in at[cut:].tolist()]
        return out

    def thread_names(self) -> list[str]:
        """Every thread an event names, in order of first appearance."""
        with self._lock:
            names = dict(self._threads)
            names.update(dict.fromkeys(map(_THREAD, list(self._tail))))
        return list(names)

    def queues(self) -> set[str | None]:
        """Every queue an event names (None: none)."""
        with self._lock:
            return self._queues | set(map(_QUEUE, list(self._tail)))

    def nbytes(self) -> int:
        """The memory of the encoded events: their lines (the buffers they lie in, once
        each), offsets and kinds."""
        with self._lock:
            bufs = {id(s.buf): len(s.buf) for s in self._segs}
            return sum(bufs.values()) + sum(s.offs.nbytes + s.kinds.nbytes for s in self._segs)
