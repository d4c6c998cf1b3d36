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


#: the most bytes a recording may hold once decompressed; a file that states (or
#: inflates to) more is refused before it is read whole.  A loaded recording takes
#: about 6.5 times its size in memory (1,000,000 events: 144 MB of file, 936 MB), so
#: 128 MB keeps any file under 1 GB.  AUTOGRAD_TUI_MAX_RECORDING_MB sets it.
MAX_BYTES_DEFAULT = 128 * 2**20
_CHUNK = 4 * 2**20


def max_bytes() -> int:
    """The cap in force: AUTOGRAD_TUI_MAX_RECORDING_MB, else ``MAX_BYTES_DEFAULT``."""
    env = os.environ.get("AUTOGRAD_TUI_MAX_RECORDING_MB", "").strip()
    try:
        return max(int(float(env) * 2**20), 0) if env else MAX_BYTES_DEFAULT
    except (ValueError, OverflowError):  # "nan", "inf", words: the default
        return MAX_BYTES_DEFAULT


#: the memory a load may add to the process: 7 times the cap and 64 MB (960 MB by default;
#: an honest recording takes about 6.5 times its size).  Measured (resident memory), not
#: estimated: before the fold and every 1,024 events of it.
BUDGET_PER_CAP, BUDGET_BASE = 7, 64 * 2**20


def memory_budget() -> int:
    """The bytes a load may add to the process."""
    return max_bytes() * BUDGET_PER_CAP + BUDGET_BASE


def budget_words() -> str:
    """The one message of a load, an export or a view that would pass the budget."""
    return (f"it needs more than {memory_budget() / 2**20:,.0f} MB of memory, the budget for "
            f"a recording ({BUDGET_PER_CAP} times AUTOGRAD_TUI_MAX_RECORDING_MB="
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

    def __init__(self, p: Path) -> None:
        self.p, self.start, self.limit = p, resident(), memory_budget()

    def __call__(self) -> None:
        if resident() - self.start > self.limit:
            raise TraceError(f"{self.p}: {budget_words()}")


def _too_big(p: Path, cap: int, what: str) -> TraceError:
    return TraceError(f"{p}: {what} more than {cap / 2**20:.0f} MB, the limit for a "
                      "recording; set AUTOGRAD_TUI_MAX_RECORDING_MB to allow more")


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
                if os.fstat(f.fileno()).st_size > cap:  # before reading: read(n) reserves n
                    raise _too_big(p, cap, "it holds")
                f.seek(0)
                return f.read()  # not head + f.read(): that copies the whole file again
            f.seek(0)
            out = bytearray()
            z = zlib.decompressobj(wbits=31)  # gzip framing
            # zlib reserves max_length bytes per call: inflate a bounded piece at a time
            while data := f.read(_CHUNK):
                while data:
                    if z.eof:  # a second gzip member: go on with it
                        data, z = z.unused_data + data, zlib.decompressobj(wbits=31)
                    out += z.decompress(data, min(_CHUNK, cap + 1 - len(out)))
                    data = z.unconsumed_tail
                    if len(out) > cap:
                        raise _too_big(p, cap, "its gzip data inflates to")
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
