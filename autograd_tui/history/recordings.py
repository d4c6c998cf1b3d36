"""Recordings: a versioned JSON-lines trace of a run, loaded safely and validated.

Not in PyTorch.  The format is specified in ``docs/trace-format.md``: line 1, the
**header** (``{"format": "autograd-tui-trace", "version": 5, ...}``: the program's
version, the scenario and its parameters, the engine options, the policy and seed, and
the graph); one line per **event** (``[kind, seq, thread, graph_task, node, queue,
field...]``, the kind's fields in ``SCHEMA`` order; older versions are still read); the
last line, the **footer** (``{"footer": {"events": N, "schedule": ..., "gradients":
{...}, "checksum": "sha256:..."}}``: the checksum covers the event lines, so truncation
and tampering are detected).  A file ending in ``.gz`` is gzip-compressed.

Loading never executes code: the event lines are decoded by ``msgspec`` straight into
the typed event classes (which checks every field's type, in C), then folded through
``EngineState`` (which rejects an event that contradicts the state).  Tensor summaries
are checked to be JSON and kept raw until shown.  Every problem is one ``TraceError``
naming the file, the line and what is wrong.
"""

from __future__ import annotations

import gc
import hashlib
import json
import operator
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from autograd_tui.engine.events import EVENT_TYPES, Event, node_dict
from autograd_tui.files import CannotWrite, atomic_write
from autograd_tui.history.decode import (
    DECODER,
    V3_DECODER,
    Stream,
    decode_v2,
    describe,
    fold_error,
    stream,
)
from autograd_tui.history.fields import check_footer, check_header
from autograd_tui.history.history import History
from autograd_tui.history.lines import (
    Budget,
    TraceError,
    budget_words,
    check_memory,
    json_line,
    read_file,
)
from autograd_tui.history.older_versions import decode_v1, renumber, upgrade_v3
from autograd_tui.history.state import StateError
from autograd_tui.history.store import KINDS, EventStore

FORMAT = "autograd-tui-trace"
VERSION = 5  # 5: DDP's event kinds (ddp_*) and the header's ``distributed``
SUPPORTED_VERSIONS = (1, 2, 3, 4, 5)  # 4: a push names its task; 3: event k has seq k

_ENCODER = msgspec.json.Encoder()
_SEQ, _DEPS_CODE = operator.attrgetter("seq"), KINDS.index("dependencies_computed")
CHECKSUM_MARK = b'"checksum":"sha256:'  # version 2: the digest of every byte before its own
_DECODER = DECODER  # tests and benchmarks decode a line as the loader does


def program_version() -> str:
    try:
        from importlib.metadata import version
        return version("autograd-tui")
    except Exception:  # noqa: BLE001 - not installed: still write a trace
        return "unknown"


@dataclass
class Recording:
    header: dict[str, Any]
    events: Sequence[Event]  # an EventStore when loaded: the lines, decoded when read
    footer: dict[str, Any] = field(default_factory=dict)
    history: History | None = None  # filled by load(): the validated fold
    # load(background=True): how the background check words what it refuses (else None)
    describe: Callable[[Exception], str] | None = None

    @property
    def scenario(self) -> str | None:
        sc = self.header.get("scenario")  # unchecked by load: any JSON value
        name = sc.get("name") if isinstance(sc, dict) else None
        return name if isinstance(name, str) else None

    def start_check(self) -> None:
        """Loaded with ``background=True``: fold and check the events in a thread (its
        error: the message ``load`` would have raised)."""
        if self.history is not None and self.describe is not None:
            self.history.check_in_background(self.describe)

    def state_at(self, i: int) -> Any:
        if self.history is None:
            self.history = History(self.events)
        return self.history.state_at(i)


def graph_of(events: Iterable[Event]) -> dict[str, Any]:
    """The union of the graphs the events describe (nodes by id, sorted)."""
    nodes: dict[int, dict[str, Any]] = {}
    if isinstance(events, EventStore):  # a run's store: its few graphs, found by kind code
        events = events.pick(np.flatnonzero(events.kinds() == _DEPS_CODE))
    for e in events:
        if e.kind == "dependencies_computed":
            for n in e.nodes:  # type: ignore[attr-defined]  # NodeInfo: a dict once, below
                nodes[n.id] = n
    return {"nodes": [node_dict(nodes[i]) for i in sorted(nodes)]}


def make_header(*, scenario: str | None = None, params: dict[str, Any] | None = None,
                engine_options: dict[str, Any] | None = None, policy: str | None = None,
                seed: int | None = None, serialized: bool = True,
                events: Iterable[Event] = (), full_tensors: bool = False) -> dict[str, Any]:
    return {
        "format": FORMAT, "version": VERSION,
        "program": {"name": "autograd-tui", "version": program_version()},
        "scenario": {"name": scenario, "params": params or {}},
        "engine": engine_options or {},
        "schedule": {"policy": policy, "seed": seed, "serialized": serialized},
        "tensors": "full" if full_tensors else "summary",
        "graph": graph_of(events),
    }


def event_line(e: Event) -> bytes:
    """The event's line in a version-2 recording."""
    return _ENCODER.encode(e) + b"\n"


def save(path: str | os.PathLike[str], header: dict[str, Any], events: Iterable[Event],
         footer: dict[str, Any] | None = None) -> int:
    """Write a recording atomically (a failure leaves any existing file as it was), the
    events in ``seq`` order; returns the number of bytes of event lines written."""
    p = Path(path)
    evs = sorted(events, key=_SEQ)
    h = hashlib.sha256()
    nbytes = 0
    try:
        with atomic_write(p) as out:
            head = json.dumps(header, separators=(",", ":"), sort_keys=True,
                              allow_nan=False).encode() + b"\n"
            h.update(head)
            out.write(head)
            for i in range(0, len(evs), 10_000):  # a block at a time: fewer writes and updates
                block = _ENCODER.encode_lines(evs[i:i + 10_000])  # each event's line + "\n"
                h.update(block)
                nbytes += len(block)
                out.write(block)
            foot = {k: v for k, v in (footer or {}).items() if k != "checksum"}
            foot["events"] = len(evs)
            body = json.dumps(foot, separators=(",", ":"), sort_keys=True,
                              allow_nan=False).encode()
            # The checksum is the footer's last field and covers every byte before its digits.
            prefix = b'{"footer":' + body[:-1] + b"," + CHECKSUM_MARK
            h.update(prefix)
            out.write(prefix + h.hexdigest().encode() + b'"}}\n')
    except CannotWrite as e:
        raise TraceError(str(e)) from None
    except (ValueError, TypeError, msgspec.EncodeError) as e:
        raise TraceError(f"{p}: cannot write: {e}") from None
    return nbytes


# --- loading --------------------------------------------------------------------------------
#: events from which a load freezes what it built (see load): below, scans cost little
FREEZE_ABOVE = 200_000
_frozen = False  # the last load froze: the next one unfreezes first


#: the stages of ``load``, in order, as ``on_stage`` names them (a progress bar's steps)
LOAD_STAGES = ("reading", "decoding", "checking", "folding")


def _no_stage(name: str) -> None:
    pass


def load(path: str | os.PathLike[str], *, validate_state: bool = True,
         on_stage: Callable[[str], None] = _no_stage, background: bool = False) -> Recording:
    """Read and validate a recording; raise ``TraceError`` with one clear message.
    ``on_stage`` is told when each of ``LOAD_STAGES`` starts (for a progress bar).
    ``background`` (the app's, versions 4 and 5): the fold's check is left to ``start_check``."""
    p = Path(path)
    on_stage("reading")
    data = read_file(p)
    if not data:
        raise TraceError(f"{p}: empty file: not a recording")
    # What is built below is long-lived, with no reference cycles: the cyclic collector
    # would only rescan it (a second per million events, half-second pauses in seeks).  So
    # it is off while loading, and a big load is frozen after (gc.freeze); the next load
    # unfreezes and collects first, so repeated loads do not pile up.  MemoryError, and
    # the budget (lines.Budget, checked as the fold goes), end in one message.
    global _frozen
    was_enabled = gc.isenabled()
    if was_enabled and _frozen:
        gc.unfreeze()
        gc.collect()
        _frozen = False
    gc.disable()
    rec: Recording | None = None
    try:
        rec = _load(p, data, validate_state, on_stage, Budget(p), background)
    except MemoryError:
        raise TraceError(f"{p}: {budget_words()}") from None
    finally:
        if was_enabled:
            if rec is not None and len(rec.events) >= FREEZE_ABOVE:
                gc.freeze()
                _frozen = True
            gc.enable()
    return rec


def _load(p: Path, data: bytes | bytearray, validate_state: bool,
          on_stage: Callable[[str], None], budget: Budget,
          background: bool = False) -> Recording:
    first = data.find(b"\n")
    header = json_line(p, 1, data if first < 0 else data[:first])
    if not isinstance(header, dict) or "format" not in header:
        raise TraceError(f"{p}, line 1: missing header: not an autograd-tui recording")
    if header["format"] != FORMAT:
        raise TraceError(f"{p}, line 1: unknown format {header['format']!r} "
                         f"(expected {FORMAT!r})")
    version = header.get("version")
    if type(version) is not int or version not in SUPPORTED_VERSIONS:
        understood = ", ".join(map(str, SUPPORTED_VERSIONS))
        raise TraceError(f"{p}, line 1: format version {version!r} is not "
                         f"understood; this program reads version(s) {understood}")
    if first < 0:
        raise TraceError(f"{p}: missing footer after line 1: the recording is truncated or "
                         "was not finished")
    if (why := check_header(header)) is not None:
        raise TraceError(f"{p}, line 1: header: {why}")
    check_memory(p, data, first)
    body, footer = _split_footer(p, data, first)
    if (why := check_footer(footer)) is not None:
        raise TraceError(f"{p}: footer: {why}")
    # Version 2: the checksum covers every byte before its own digits; version 1: the events.
    mark = data.rfind(CHECKSUM_MARK) + len(CHECKSUM_MARK)
    if version >= 2 and data[mark + 64:].rstrip(b"\n") != b'"}}':
        raise TraceError(f"{p}: the footer must end with its checksum "
                         '(...,"checksum":"sha256:<64 hex digits>"}})')
    covered = body if version == 1 else memoryview(data)[:mark]
    checksum = _Checksum(covered)
    try:
        on_stage("decoding")
        got: Stream | None = None
        events: Sequence[Event]
        later = background and validate_state  # the fold left to Recording.start_check
        if version >= 4:  # decoded, checked, kept and folded a chunk at a time
            got = stream(p, data, first + 1, first + 1 + len(body),
                         History(on_snapshot=budget) if validate_state and not later
                         else None, budget)
            events, count = got.store, got.count
        else:
            events = decode_v2(p, body, V3_DECODER) if version >= 2 else decode_v1(p, body)
            count = len(events)
        on_stage("checking")
        if footer.get("events") != count:
            _no_blank_line(p, data, first, body)
            raise TraceError(f"{p}: the footer says {footer.get('events')} events but the "
                             f"file has {count}: lines are missing or were added")
        if got is None:
            _check_order(p, events, version)  # type: ignore[arg-type]
        elif got.order is not None:
            raise got.order
        if footer.get("checksum") != "sha256:" + checksum.result():
            _no_blank_line(p, data, first, body)
            raise TraceError(f"{p}: checksum mismatch: the recording was changed after it "
                             "was written")
        if version < 4:
            events = upgrade_v3(events, header)  # type: ignore[arg-type]
        if version < 3:
            events, footer = renumber(events, footer)  # type: ignore[arg-type]
        _check_status(p, footer, events)
        if validate_state:
            budget()  # the events decoded
            on_stage("folding")
        if got is not None and later:
            h = History(got.store, on_snapshot=budget, fold_now=False)
            return Recording(header, h.events, footer, h, lambda e: describe(p, h.events, e))
        if got is not None:
            if got.fold is not None:
                raise got.fold
            history = got.history
        else:
            history = _fold(p, events, budget) if validate_state else None  # type: ignore
            events = history.events if history is not None else EventStore(events)
    finally:
        checksum.join()
    return Recording(header, events, footer, history)


STATUSES = ("completed", "error", "deadlock", "running")


def _check_status(p: Path, footer: dict[str, Any], events: Sequence[Event]) -> None:
    """The footer's status must be one the program writes, and agree with the events: a
    recording holds a deadlock event exactly when its status is "deadlock"."""
    status = footer.get("status", "completed")  # one of STATUSES (fields.Footer)
    if isinstance(events, EventStore):  # the kind column: no decoding
        deadlocked = bool((events.kinds() == KINDS.index("deadlock")).any())
    else:
        deadlocked = EVENT_TYPES["deadlock"] in set(map(type, events))  # a C loop
    if deadlocked != (status == "deadlock"):
        said = "a deadlock" if status == "deadlock" else f"{status!r}"
        found = "holds a deadlock event" if deadlocked else "holds no deadlock event"
        raise TraceError(f"{p}: the footer says {said}, but the recording {found}")


def _split_footer(p: Path, data: bytes, first: int) -> tuple[memoryview, dict[str, Any]]:
    """The event lines (line 2 up to the footer, with their newlines) and the footer.

    Works on offsets into ``data``: no copy of the body (it can be hundreds of MB)."""
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    cut = max(data.rfind(b"\n", first + 1, end), first)  # the newline before the last line
    last = data[cut + 1:end]

    def lineno(at: int) -> int:
        return 1 + data.count(b"\n", 0, at)

    footer = None
    if last.startswith(b'{"footer"'):
        obj = json_line(p, lambda: lineno(cut + 1), last)
        if isinstance(obj, dict) and "footer" in obj:
            footer = obj["footer"]
            if not isinstance(footer, dict):
                raise TraceError(f"{p}, line {lineno(cut + 1)}: the footer must be an object")
    if footer is None:
        at = data.find(b'\n{"footer"', first, end)
        if at >= 0:
            raise TraceError(f"{p}, line {lineno(at + 1) + 1}: text after the footer")
        if last.strip():
            json_line(p, lambda: lineno(cut + 1), last)  # a cut-off last line: not JSON
        raise TraceError(f"{p}: missing footer after line {lineno(end)}: the recording is "
                         "truncated or was not finished")
    return memoryview(data)[first + 1:cut + 1], footer


def _no_blank_line(p: Path, data: bytes, first: int, body: memoryview) -> None:
    """msgspec skips empty lines; name one (looked for only when a check fails)."""
    blank = data.find(b"\n\n", first, first + 1 + len(body))
    if blank >= 0:
        lineno = 2 + data.count(b"\n", 0, blank)
        raise TraceError(f"{p}, line {lineno}: empty line")


class _Checksum(threading.Thread):
    """SHA-256 of a buffer on another thread: hashlib lets go of the GIL on large
    buffers, so the hash runs while this thread decodes and folds."""

    def __init__(self, buf: memoryview) -> None:
        super().__init__(name="trace-checksum", daemon=True)
        self.buf, self.hexdigest = buf, ""
        self.start()

    def run(self) -> None:
        self.hexdigest = hashlib.sha256(self.buf).hexdigest()

    def result(self) -> str:
        self.join()
        return self.hexdigest


def _check_order(p: Path, events: list[Event], version: int) -> None:
    """Version 3: event k has seq k.  Versions 1 and 2 numbered from 0: increasing."""
    try:
        seqs = np.fromiter(map(operator.attrgetter("seq"), events), dtype=np.int64,
                           count=len(events))
    except OverflowError:  # a seq beyond int64: compare as Python ints
        seqs = np.array([e.seq for e in events], dtype=object)
    if version >= 3:
        bad = np.flatnonzero(seqs != np.arange(1, len(seqs) + 1))
        if len(bad):
            i = int(bad[0])
            raise TraceError(f"{p}, line {i + 2}: event {i + 1} has seq {seqs[i]}: event k "
                             "must have seq k (lines were moved, repeated or removed)")
        return
    if len(seqs) and seqs[0] < 0:
        raise TraceError(f"{p}, line 2: seq must be a non-negative integer, not {seqs[0]}")
    if not (seqs[1:] > seqs[:-1]).all():
        i = int(np.flatnonzero(seqs[1:] <= seqs[:-1])[0]) + 1
        raise TraceError(f"{p}, line {i + 2}: events out of order (seq {int(seqs[i])} "
                         f"after {int(seqs[i - 1])}): lines were moved or repeated")


def _fold(p: Path, events: list[Event], budget: Budget) -> History:
    history = History(on_snapshot=budget)  # its TraceError passes through
    try:
        history.extend(events)
    except (StateError, KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
        raise fold_error(p, err, events[err.index]) from None  # type: ignore[attr-defined]
    return history
