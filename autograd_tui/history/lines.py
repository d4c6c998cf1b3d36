"""Reading a recording's bytes (with a cap) and its lines (JSON), or one message
naming the file, the line and what is wrong.

Shared by the reader of today's format (``recordings.py``) and of the older ones
(``older_versions.py``).
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

_PLAIN = msgspec.json.Decoder()


class TraceError(Exception):
    """A recording that cannot be written or read: one clear message."""


def json_line(p: Path, lineno: int | Callable[[], int], line: bytes) -> Any:
    """One JSON value (msgspec: the header holds the whole graph); on an error, json
    says where.  ``lineno`` may be a function: counting lines costs a pass."""
    try:
        return _PLAIN.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        pass
    if callable(lineno):
        lineno = lineno()
    try:
        return json.loads(line)
    except UnicodeDecodeError:
        raise TraceError(f"{p}, line {lineno}: not UTF-8 text (a damaged byte?)") from None
    except RecursionError:
        raise TraceError(f"{p}, line {lineno}: nested too deeply to be a recording's "
                         "line") from None
    except json.JSONDecodeError as e:
        raise TraceError(f"{p}, line {lineno}: not JSON ({e.msg} at column {e.colno})") \
            from None


#: the most memory a loaded recording may take, in bytes: a file whose estimate
#: (``estimate``: from its size and its number of lines, before anything is decoded) is
#: more is refused before it is read whole, or before it is decoded.
#: AUTOGRAD_TUI_MAX_RECORDING_MB sets it (MB of memory, not of file).
MAX_BYTES_DEFAULT = 1024 * 2**20
_CHUNK = 4 * 2**20
#: what a loaded recording takes (``estimate``): its bytes (kept: the events are kept as
#: their lines), the header decoded (a dict per node of the graph: measured 4 to 5 times
#: its text), and per event its offset and kind, its share of the fold's state and
#: snapshots (measured 290 bytes per event on bench_trace's million) and the decoded
#: blocks cached; 1,000,000 events of 147 MB: about 570 MB.
PER_LINE, PER_HEADER_BYTE = 330, 6


def estimate(nbytes: int, lines: int, header: int = 0) -> int:
    """The memory a recording of ``nbytes`` bytes, ``lines`` lines and a header of
    ``header`` bytes takes once loaded."""
    return nbytes + lines * PER_LINE + header * PER_HEADER_BYTE


def max_bytes() -> int:
    """The cap in force: AUTOGRAD_TUI_MAX_RECORDING_MB, else ``MAX_BYTES_DEFAULT``."""
    env = os.environ.get("AUTOGRAD_TUI_MAX_RECORDING_MB", "").strip()
    try:
        return max(int(float(env) * 2**20), 0) if env else MAX_BYTES_DEFAULT
    except (ValueError, OverflowError):  # "nan", "inf", words: the default
        return MAX_BYTES_DEFAULT


#: the memory a load may add to the process, measured (resident memory) as it goes, for
#: what the estimate cannot see (a crafted file whose few lines make a big state): the
#: cap, a quarter more, and 64 MB (1,344 MB by default).
BUDGET_PER_CAP, BUDGET_BASE = 1.25, 64 * 2**20


def memory_budget() -> int:
    """The bytes a load may add to the process."""
    return int(max_bytes() * BUDGET_PER_CAP) + BUDGET_BASE


def budget_words() -> str:
    """The one message of a load, an export or a view that would pass the budget."""
    return (f"it needs more than {memory_budget() / 2**20:,.0f} MB of memory, the budget for "
            f"a recording ({BUDGET_PER_CAP:g} times AUTOGRAD_TUI_MAX_RECORDING_MB="
            f"{max_bytes() / 2**20:g}, and 64); set AUTOGRAD_TUI_MAX_RECORDING_MB to allow "
            "more")


def resident() -> int:
    """This process's resident memory in bytes (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class Budget:
    """Called as a load goes: raises ``TraceError`` once the process has grown by more
    than ``memory_budget()`` since the load began."""

    EVERY = 8  # calls between two readings of /proc (each costs about 0.1 ms)

    def __init__(self, p: Path) -> None:
        self.p, self.start, self.limit = p, resident(), memory_budget()
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.calls % self.EVERY != 1:  # the first call, then every EVERY-th
            return
        if resident() - self.start > self.limit:
            raise TraceError(f"{self.p}: {budget_words()}")


def _too_big(p: Path, cap: int, what: str) -> TraceError:
    return TraceError(f"{p}: {what} more than {cap / 2**20:,.0f} MB, the memory limit for "
                      "a recording; set AUTOGRAD_TUI_MAX_RECORDING_MB (MB of memory) to "
                      "allow more")


def check_memory(p: Path, data: bytes | bytearray, header: int) -> None:
    """Refuse, before decoding, a recording whose estimate passes the cap: the message
    says how much it would take."""
    cap = max_bytes()
    need = estimate(len(data), data.count(b"\n"), header)
    if need > cap:
        raise TraceError(f"{p}: loading it would take about {need / 2**20:,.0f} MB of "
                         f"memory, more than {cap / 2**20:,.0f} MB, the limit for a "
                         "recording; set AUTOGRAD_TUI_MAX_RECORDING_MB (MB of memory) to "
                         f"at least {-(-need // 2**20):,} to load it")


def read_file(p: Path) -> bytes | bytearray:
    """The whole file, decompressed if it is gzip, never more than ``max_bytes()``
    (a gzip bomb is inflated a chunk at a time and stopped at the cap)."""
    cap = max_bytes()
    try:
        if p.is_dir():
            raise TraceError(f"{p}: is a directory, not a recording")
        with open(p, "rb") as f:
            head = f.read(2)
            if head != b"\x1f\x8b":
                if p.name.endswith(".gz"):
                    raise TraceError(f"{p}: named .gz but it is not a gzip file")
                if estimate(os.fstat(f.fileno()).st_size, 0) > cap:  # read(n) reserves n
                    raise _too_big(p, cap, "it would take")
                f.seek(0)
                return f.read()  # not head + f.read(): that copies the whole file again
            f.seek(0)
            out = bytearray()
            lines, head = 0, -1
            z = zlib.decompressobj(wbits=31)  # gzip framing
            # zlib reserves max_length bytes per call: inflate a bounded piece at a time
            while data := f.read(_CHUNK):
                while data:
                    if z.eof:  # a second gzip member: go on with it
                        data, z = z.unused_data + data, zlib.decompressobj(wbits=31)
                    piece = z.decompress(data, max(min(_CHUNK, cap + 1 - len(out)), 1))
                    if head < 0 and (nl := piece.find(b"\n")) >= 0:
                        head = len(out) + nl  # the header ends: the first line
                    out += piece
                    lines += piece.count(b"\n")
                    data = z.unconsumed_tail
                    # until its first newline, all of it is the header (decoded whole)
                    if estimate(len(out), lines, len(out) if head < 0 else head) > cap:
                        raise _too_big(p, cap, "its gzip data would take")
            if not z.eof:
                raise TraceError(f"{p}: the gzip data is damaged or truncated (it ends "
                                 "early)")
            return out  # a bytearray: bytes(out) would copy it
    except FileNotFoundError:
        raise TraceError(f"{p}: no such file") from None
    except PermissionError:
        raise TraceError(f"{p}: cannot read: permission denied") from None
    except IsADirectoryError:
        raise TraceError(f"{p}: is a directory, not a recording") from None
    except (zlib.error, EOFError) as e:
        raise TraceError(f"{p}: the gzip data is damaged or truncated ({e})") from None
