"""Helpers for tests that play the other side: files written by hand, as an attacker or
another program would write them."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

MARK = b'"checksum":"sha256:'


def signed(header: bytes, lines: list[bytes], footer: dict[str, Any]) -> bytes:
    """A recording's bytes from raw lines, with the checksum recomputed as the writer
    does (it is unkeyed: anyone can)."""
    h = hashlib.sha256()
    body = header + b"".join(lines)
    h.update(body)
    foot = json.dumps({k: v for k, v in footer.items() if k != "checksum"},
                      separators=(",", ":"), sort_keys=True, default=str).encode()
    prefix = b'{"footer":' + foot[:-1] + (b"," if foot != b"{}" else b"") + MARK
    h.update(prefix)
    return body + prefix + h.hexdigest().encode() + b'"}}\n'


def read_fifo(path: Path) -> tuple[threading.Thread, list[bytes]]:
    """A reader thread on the FIFO ``path`` (opening it is what lets the writer open)."""
    got: list[bytes] = []

    def read() -> None:
        with open(path, "rb") as f:
            got.append(f.read())

    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t, got
