"""Decoding a recording's event lines: every line checked, named by number when wrong.

Not in PyTorch.  Today's format (version 4) is read as a stream (``stream``): a few MB
of lines at a time are decoded (``msgspec``: every field's type checked, in C), their
order checked, kept as lines in the History's ``EventStore`` and folded (the state
checked), and the decoded objects let go.  So the objects of a million events never
live at once.  Problems are kept in the order a whole-file reader finds them (a line
that does not decode, then the footer's count, the order, the checksum, the status,
then the fold): ``Stream`` says what was found, and ``recordings`` raises the first.
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from autograd_tui.engine.events import EVENT_TYPES, SCHEMA, Event
from autograd_tui.history.history import History
from autograd_tui.history.lines import TraceError, budget_words, json_line
from autograd_tui.history.older_versions import V3_EVENT_TYPES
from autograd_tui.history.state import StateError
from autograd_tui.history.store import EventStore

DECODER = msgspec.json.Decoder(functools.reduce(operator.or_, EVENT_TYPES.values()))
V3_DECODER = msgspec.json.Decoder(functools.reduce(operator.or_, V3_EVENT_TYPES.values()))
CHUNK = 4 * 2**20  # bytes of lines decoded at a time (about 28,000 events)
_SEQ = operator.attrgetter("seq")
_FOLD_ERRORS = (KeyError, TypeError, ValueError, IndexError, AttributeError)


def decode_v2(p: Path, body: memoryview, decoder: msgspec.json.Decoder,
              first_line: int = 2) -> list[Event]:
    """Every line of ``body`` (versions 2 to 4), or the first wrong line named."""
    try:
        return decoder.decode_lines(body)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        pass
    # Something is wrong: decode line by line to name the line and say what.
    for lineno, line in enumerate(bytes(body).split(b"\n")[:-1], first_line):
        try:
            decoder.decode(line)
        except RecursionError:
            raise TraceError(f"{p}, line {lineno}: nested too deeply to be an "
                             "event") from None
        except (msgspec.DecodeError, UnicodeDecodeError) as e:
            json_line(p, lineno, line)  # not JSON at all: say so, and where
            raise TraceError(f"{p}, line {lineno}: {_explain(line, str(e))}") from None
    raise TraceError(f"{p}: the event lines cannot be read")  # pragma: no cover


def _explain(line: bytes, err: str) -> str:
    """msgspec's "Expected `int`, got `str` - at `$[3]`" in the words of the format."""
    msg, _, where = err.partition(" - at `$")
    idx = where.strip("`").strip("[]").split("][")
    if not where:
        return f"an event must be an array [kind, seq, thread, graph_task, node, queue, " \
               f"field...]: {msg}"
    try:
        kind = json.loads(line)[0]
    except (ValueError, IndexError, KeyError, TypeError):
        kind = None
    pos = int(idx[0]) if idx and idx[0].isdigit() else -1
    if pos == 0:
        return f"unknown event kind {kind!r}" if "Invalid value" in msg else \
            f"the first field must be the event kind: {msg}"
    names = ["kind", "seq", "thread", "graph_task", "node", "queue"]
    if kind in SCHEMA:
        names += list(SCHEMA[kind])
    field_name = names[pos] if 0 <= pos < len(names) else f"field {pos}"
    what = f"{kind} event" if kind in SCHEMA else "event"
    if "length" in msg:
        return f"{what}: {msg.replace('`array`', 'the array')} (fields: {', '.join(names)})"
    return f"{what}, field {field_name}: {msg}"


def fold_error(p: Path, err: Exception, event: Event) -> TraceError:
    """The one message of an event the fold refused (``err.index`` + 2 is its line)."""
    lineno = err.index + 2  # type: ignore[attr-defined]
    if isinstance(err, _FOLD_ERRORS) and not isinstance(err, StateError):
        what = f"missing field {err}" if isinstance(err, KeyError) else str(err)
        return TraceError(f"{p}, line {lineno}: malformed {event.kind} event ({what})")
    return TraceError(f"{p}, line {lineno}: the event contradicts the state: {err}")


def describe(p: Path, events: Sequence[Event], err: Exception) -> str:
    """The message of what the background check refused: as ``load`` would raise it."""
    if isinstance(err, TraceError):  # the memory budget
        return str(err)
    if isinstance(err, MemoryError):
        return f"{p}: {budget_words()}"
    if hasattr(err, "index"):
        return str(fold_error(p, err, events[err.index]))  # type: ignore[attr-defined]
    return f"{p}: the recording cannot be checked: {type(err).__name__}: {err}"


@dataclass
class Stream:
    """What ``stream`` found: the events kept, and the first problem of each kind."""
    store: EventStore
    history: History | None
    count: int = 0  # events
    lines: int = 0  # lines (blank ones too)
    order: TraceError | None = None  # an event out of place
    fold: TraceError | None = None  # an event that contradicts the state


def stream(p: Path, data: bytes | bytearray, start: int, end: int,
           history: History | None, budget: Callable[[], None]) -> Stream:
    """Decode, check and keep the lines ``data[start:end]`` (each ending in a newline)
    a chunk at a time; fold them into ``history`` unless it is None.  A line that does
    not decode raises at once (it comes first); other problems are noted in the
    result, and folding stops at the first."""
    out = Stream(history.events if history is not None else EventStore(), history)
    mv = memoryview(data)
    pos = start
    is_nl = np.empty(CHUNK, bool)  # reused: a fresh 4 MB array per chunk is page faults
    while pos < end:
        cut = data.rfind(b"\n", pos, min(pos + CHUNK, end)) + 1
        if cut <= pos:  # one line longer than a chunk
            cut = data.find(b"\n", pos, end) + 1 or end
        evs = decode_v2(p, mv[pos:cut], DECODER, first_line=out.lines + 2)
        if cut - pos > len(is_nl):
            is_nl = np.empty(cut - pos, bool)
        found = np.equal(np.frombuffer(data, np.uint8, cut - pos, pos), 10,
                         out=is_nl[:cut - pos])
        nl = np.flatnonzero(found)
        out.lines += len(nl)
        _add(p, out, data, pos, nl, evs)
        budget()
        pos = cut
    return out


def _add(p: Path, out: Stream, data: Any, pos: int, nl: np.ndarray,
         evs: list[Event]) -> None:
    """One chunk's events: checked for order, kept, folded."""
    first = out.count
    out.count += len(evs)
    if out.order is None:
        out.order = _order(p, evs, first)
    if out.order is not None or out.fold is not None:
        return  # the load fails: the rest is only decoded, for the errors that come first
    offs = np.empty(len(nl) + 1, np.int64)
    offs[0], offs[1:] = pos, nl + (pos + 1)
    try:
        if len(nl) != len(evs):  # blank lines (msgspec skips them): kept as objects
            (out.store if out.history is None else out.history).extend(evs)
        elif out.history is None:
            out.store.add_lines(data, offs, evs)
        else:
            out.history.extend_lines(data, offs, evs)
    except Exception as err:  # noqa: BLE001 - the fold's refusal, said below
        if out.history is None or not hasattr(err, "index"):
            raise
        i = err.index  # type: ignore[attr-defined]
        err.index = first + i  # type: ignore[attr-defined]
        out.fold = fold_error(p, err, evs[i])


def _order(p: Path, evs: list[Event], first: int) -> TraceError | None:
    """Event k has seq k (version 3 on)."""
    try:
        seqs = np.fromiter(map(_SEQ, evs), np.int64, len(evs))
    except OverflowError:  # a seq beyond int64: compare as Python ints
        seqs = np.array([e.seq for e in evs], dtype=object)
    bad = np.flatnonzero(seqs != np.arange(first + 1, first + 1 + len(evs)))
    if not len(bad):
        return None
    i = int(bad[0])
    return TraceError(f"{p}, line {first + i + 2}: event {first + i + 1} has seq {seqs[i]}: "
                      "event k must have seq k (lines were moved, repeated or removed)")
