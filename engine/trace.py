"""Recordings: a versioned JSON-lines trace of a run, loaded safely and validated.

Not in PyTorch.  The format is specified in ``docs/trace-format.md``:

* line 1, the **header**: ``{"format": "autograd-tui-trace", "version": 1, ...}``
  with the program's version, the scenario and its parameters, the engine
  options, the scheduling policy and seed, and the graph (nodes with names,
  devices, sequence numbers, edges with input numbers);
* one line per **event**: ``[seq, kind, thread, graph_task, node, queue, data]``;
* the last line, the **footer**: ``{"footer": {"events": N, "schedule": ...,
  "gradients": {...}, "checksum": "sha256:..."}}``; the checksum covers the
  bytes of the event lines, so truncation and tampering are detected.

A file ending in ``.gz`` is gzip-compressed.  Loading never executes code: it is
``json.loads`` and a fold of the events through ``EngineState`` (which rejects an
event that contradicts the state).  Every problem is one ``TraceError`` naming
the file, the line and what is wrong.
"""

from __future__ import annotations

import gc
import gzip
import hashlib
import json
import os
import tempfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .events import SCHEMA, Event
from .state import History, StateError

FORMAT = "autograd-tui-trace"
VERSION = 1
SUPPORTED_VERSIONS = (1,)


class TraceError(Exception):
    """A recording that cannot be written or read: one clear message."""


def program_version() -> str:
    try:
        from importlib.metadata import version

        return version("autograd-tui")
    except Exception:  # noqa: BLE001 - not installed: still write a trace
        return "unknown"


@dataclass
class Recording:
    header: dict[str, Any]
    events: list[Event]
    footer: dict[str, Any] = field(default_factory=dict)
    history: History | None = None  # filled by load(): the validated fold

    @property
    def scenario(self) -> str | None:
        return (self.header.get("scenario") or {}).get("name")

    def state_at(self, i: int) -> Any:
        if self.history is None:
            self.history = History(self.events)
        return self.history.state_at(i)


def graph_of(events: Iterable[Event]) -> dict[str, Any]:
    """The union of the graphs the events describe (nodes by id, sorted)."""
    nodes: dict[int, dict[str, Any]] = {}
    for e in events:
        if e.kind == "dependencies_computed":
            for n in e.data["nodes"]:
                nodes[n["id"]] = n
    return {"nodes": [nodes[i] for i in sorted(nodes)]}


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
    return json.dumps([e.seq, e.kind, e.thread, e.graph_task, e.node, e.queue, e.data],
                      separators=(",", ":"), allow_nan=False).encode() + b"\n"


def _open_write(path: Path) -> tuple[IO[bytes], IO[bytes], str]:
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except FileNotFoundError:
        raise TraceError(f"{path}: cannot write: the folder {path.parent} does not exist") \
            from None
    except PermissionError:
        raise TraceError(f"{path}: cannot write: permission denied in {path.parent}") from None
    except OSError as e:
        raise TraceError(f"{path}: cannot write: {e.strerror}") from None
    raw = os.fdopen(fd, "wb")
    if path.name.endswith(".gz"):
        gz = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0)
        return gz, raw, tmp  # type: ignore[return-value]
    return raw, raw, tmp


def save(path: str | os.PathLike[str], header: dict[str, Any], events: Iterable[Event],
         footer: dict[str, Any] | None = None) -> int:
    """Write a recording (atomically: a failure leaves any existing file as it was).

    Events are written in ``seq`` order.  Returns the number of bytes of event
    lines written."""
    p = Path(path)
    if p.is_dir():
        raise TraceError(f"{p}: cannot write: it is a directory")
    evs = sorted(events, key=lambda e: e.seq)
    h = hashlib.sha256()
    out, raw, tmp = _open_write(p)
    nbytes = 0
    try:
        with raw, out:
            out.write(json.dumps(header, separators=(",", ":"), sort_keys=True).encode() + b"\n")
            for e in evs:
                line = event_line(e)
                h.update(line)
                nbytes += len(line)
                out.write(line)
            foot = dict(footer or {})
            foot.update({"events": len(evs), "checksum": "sha256:" + h.hexdigest()})
            out.write(json.dumps({"footer": foot}, separators=(",", ":"),
                                 sort_keys=True).encode() + b"\n")
        os.replace(tmp, p)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise TraceError(f"{p}: cannot write: {e.strerror or e}") from None
        if isinstance(e, ValueError):
            raise TraceError(f"{p}: cannot write: {e}") from None
        raise
    return nbytes


# --- loading --------------------------------------------------------------------------------
def _read(p: Path) -> bytes:
    """The whole file, decompressed if it is gzip; one clear error otherwise."""
    try:
        if p.is_dir():
            raise TraceError(f"{p}: is a directory, not a recording")
        with open(p, "rb") as f:
            raw = f.read()
        if raw[:2] == b"\x1f\x8b":
            return gzip.decompress(raw)
        if p.name.endswith(".gz"):
            raise TraceError(f"{p}: named .gz but it is not a gzip file")
        return raw
    except FileNotFoundError:
        raise TraceError(f"{p}: no such file") from None
    except PermissionError:
        raise TraceError(f"{p}: cannot read: permission denied") from None
    except IsADirectoryError:
        raise TraceError(f"{p}: is a directory, not a recording") from None
    except (gzip.BadGzipFile, zlib.error, EOFError) as e:
        raise TraceError(f"{p}: the gzip data is damaged or truncated ({e})") from None


def _parse_all(p: Path, lines: list[bytes]) -> list[Any]:
    """Parse every line in one call (fast); if that fails, find the bad line."""
    try:
        objs = json.loads(b"[" + b",".join(lines) + b"]")
        if len(objs) == len(lines):
            return objs
    except (UnicodeDecodeError, json.JSONDecodeError):
        pass
    # A line holding two values, or a bad one somewhere: parse line by line.
    return [_json(p, i, line) for i, line in enumerate(lines, 1)]


def _json(p: Path, lineno: int, line: bytes) -> Any:
    try:
        return json.loads(line)
    except UnicodeDecodeError:
        raise TraceError(f"{p}, line {lineno}: not UTF-8 text (a damaged byte?)") from None
    except json.JSONDecodeError as e:
        raise TraceError(f"{p}, line {lineno}: not JSON ({e.msg} at column {e.colno})") \
            from None


def _event(p: Path, lineno: int, obj: Any) -> Event:
    where = f"{p}, line {lineno}"
    if not isinstance(obj, list) or len(obj) != 7:
        raise TraceError(f"{where}: an event must be a list of 7 fields "
                         "[seq, kind, thread, graph_task, node, queue, data]")
    seq, kind, thread, gt, node, queue, data = obj
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise TraceError(f"{where}: seq must be a non-negative integer, not {seq!r}")
    if kind not in SCHEMA:
        raise TraceError(f"{where}: unknown event kind {kind!r}")
    if not isinstance(thread, str):
        raise TraceError(f"{where}: thread must be a string")
    for name, v in (("graph_task", gt), ("node", node)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
            raise TraceError(f"{where}: {name} must be an integer or null, not {v!r}")
    if queue is not None and not isinstance(queue, str):
        raise TraceError(f"{where}: queue must be a string or null")
    if not isinstance(data, dict):
        raise TraceError(f"{where}: data must be an object")
    missing = [f for f in SCHEMA[kind] if f not in data]
    if missing:
        raise TraceError(f"{where}: {kind} event lacks field(s) {', '.join(missing)}")
    return Event(seq, kind, thread, gt, node, queue, data)


def load(path: str | os.PathLike[str], *, validate_state: bool = True) -> Recording:
    """Read and validate a recording; raise ``TraceError`` with one clear message."""
    p = Path(path)
    data = _read(p)
    if not data:
        raise TraceError(f"{p}: empty file: not a recording")
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    for i, line in enumerate(lines, 1):
        if not line.strip():
            raise TraceError(f"{p}, line {i}: empty line")
    objs = _parse_all(p, lines)
    header = objs[0]
    if not isinstance(header, dict) or "format" not in header:
        raise TraceError(f"{p}, line 1: missing header: not an autograd-tui recording")
    if header["format"] != FORMAT:
        raise TraceError(f"{p}, line 1: unknown format {header['format']!r} "
                         f"(expected {FORMAT!r})")
    if header.get("version") not in SUPPORTED_VERSIONS:
        understood = ", ".join(map(str, SUPPORTED_VERSIONS))
        raise TraceError(f"{p}, line 1: format version {header.get('version')!r} is not "
                         f"understood; this program reads version(s) {understood}")
    footer: dict[str, Any] | None = None
    events: list[Event] = []
    history = History() if validate_state else None
    last_seq = -1
    n_event_lines = 0
    was_enabled = gc.isenabled()
    gc.disable()  # the objects built here hold no cycles; the collector only slows us
    try:
        for lineno, obj in enumerate(objs[1:], 2):
            if footer is not None:
                raise TraceError(f"{p}, line {lineno}: text after the footer")
            if isinstance(obj, dict) and "footer" in obj:
                footer = obj["footer"]
                if not isinstance(footer, dict):
                    raise TraceError(f"{p}, line {lineno}: the footer must be an object")
                continue
            e = _event(p, lineno, obj)
            if e.seq <= last_seq:
                raise TraceError(f"{p}, line {lineno}: events out of order (seq {e.seq} "
                                 f"after {last_seq}): lines were moved or repeated")
            last_seq = e.seq
            n_event_lines = lineno - 1
            if history is not None:
                _fold_one(p, lineno, history, e)
            events.append(e)
    finally:
        if was_enabled:
            gc.enable()
    if footer is None:
        raise TraceError(f"{p}: missing footer after line {len(lines)}: the recording is "
                         "truncated or was not finished")
    if footer.get("events") != len(events):
        raise TraceError(f"{p}: the footer says {footer.get('events')} events but the file "
                         f"has {len(events)}: lines are missing or were added")
    body = lines[1:1 + n_event_lines]
    digest = hashlib.sha256(b"\n".join(body) + b"\n" if body else b"").hexdigest()
    if footer.get("checksum") != "sha256:" + digest:
        raise TraceError(f"{p}: checksum mismatch: the event lines were changed after "
                         "recording")
    return Recording(header, events, footer, history)


def _fold_one(p: Path, lineno: int, history: History, e: Event) -> None:
    try:
        history.append(e)
    except StateError as err:
        raise TraceError(f"{p}, line {lineno}: the event contradicts the state: {err}") \
            from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
        what = f"missing field {err}" if isinstance(err, KeyError) else str(err)
        raise TraceError(f"{p}, line {lineno}: malformed {e.kind} event ({what})") from None
