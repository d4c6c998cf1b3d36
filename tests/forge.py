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


def as_v3(events: list[Any]) -> list[Any]:
    """Today's events as versions 1 to 3 wrote them: every push lists the queue after
    it in pop order (found by folding), no ``gone``, no ``depth_priority``."""
    from autograd_tui.history.fold import apply
    from autograd_tui.history.older_versions import V3_EVENT_TYPES
    from autograd_tui.history.state import EngineState

    old = {k: V3_EVENT_TYPES[k] for k in ("push", "pop", "graph_task_created")}
    state, out = EngineState(), []
    for e in events:
        apply(state, e)
        d = e.data
        if e.kind in old:
            d.pop("gone", None)
            d.pop("depth_priority", None)
            if e.kind == "push":
                d = {**d, "order": [list(t) for t in state.queue_order(e.queue)]
                     if e.queue is not None else []}
            fields = [d[key] for key, _, _ in old[e.kind].FIELDS]
            e = old[e.kind](e.seq, e.thread, e.graph_task, e.node, e.queue, *fields)
        out.append(e)
    return out
