"""Reading one line of a recording: JSON, or one message naming the file and the line.

Shared by the reader of today's format (``recordings.py``) and of the older ones
(``older_versions.py``).
"""

from __future__ import annotations

import json
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
