"""The look of a Graphviz snapshot, and the quoting that keeps its text text.

Colours (one per node state, drawn as the legend), the font, and the escaping of
every string that goes into DOT: an HTML-like label (``esc``) or a double-quoted
DOT string (``quote``).  Names, devices and values come from the engine's events,
which may come from an untrusted recording: control characters are dropped and
nothing in them can end a label or a string early.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from autograd_tui.words import visible

#: node state -> (fill colour, legend text)
STATE_STYLE: dict[str, tuple[str, str]] = {
    "not_reached": ("#f1f3f5", "no gradient has arrived yet"),
    "not_ready": ("#ffd8a8", "some inputs arrived; its InputBuffer waits in not_ready"),
    "ready": ("#a5d8ff", "all inputs arrived; in a ready queue"),
    "running": ("#ffe066", "running on a thread"),
    "done": ("#b2f2bb", "ran; its gradients went on"),
    "skipped": ("#ced4da", "not run (not needed, captured, or after an error)"),
    "errored": ("#ff8787", "raised an error"),
}
FLOW_COLOR = "#1864ab"  # the edge whose gradient just flowed
DEADLOCK_COLOR = "#e03131"
EDGE_COLOR = "#495057"
CLUSTER_COLOR = "#868e96"
SLOT_FILLED = "#fff4e6"
SLOT_EMPTY = "#ffffff"

FONT = "Helvetica"
MAX_TITLE = 180

# C0 (but tab and newline, which become spaces or stay), DEL and C1: dropped
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def esc(text: Any) -> str:
    """Escape text for an HTML-like label."""
    s = visible(_CONTROL.sub("", str(text)))
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("\n", " "))


def quote(text: Any) -> str:
    """A DOT double-quoted string (also an escString: backslashes are doubled)."""
    s = visible(_CONTROL.sub("", str(text))).replace("\n", " ")
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Html(str):
    """An HTML-like label, written as ``<...>`` (the text inside the outer brackets)."""


def attrs(**kw: Any) -> str:
    """``[k=v, ...]`` in the given order (``Html`` values become ``<...>`` labels)."""
    parts = []
    for k, v in kw.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        if isinstance(v, Html):
            parts.append(f"{k}=<{v}>")
        elif isinstance(v, (int, float)):
            parts.append(f"{k}={v}")
        else:
            parts.append(f"{k}={quote(v)}")
    return "[" + ", ".join(parts) + "]"


def ident(text: str) -> str:
    """A safe DOT identifier fragment (devices like ``cuda:0`` -> ``cuda_0``)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def trunc(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def wrap_html(text: str, width: int = 64) -> str:
    """``text`` as left-aligned lines of an HTML-like label."""
    lines = textwrap.wrap(str(text), width) or [""]
    return "".join(f'{esc(line)}<BR ALIGN="LEFT"/>' for line in lines)
