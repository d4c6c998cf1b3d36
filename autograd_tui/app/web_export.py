"""Export (``e``) when the app runs in a browser (``autograd-tui serve``).

The viewer is not the server's user: a name typed in the browser must not choose a path
on the server.  So the drawing goes to the viewer's browser as a download (Textual's
``deliver_binary``: the bytes travel over the page's websocket, nothing is written on the
server), or, when the teacher started serve with ``--export-dir DIR``, into DIR under
the typed name reduced to a plain file name (no folders, no leading dot), never outside
DIR.  Replacing a file there asks first, as in a terminal.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: set by ``serve --export-dir`` for the apps it starts
EXPORT_DIR_VARIABLE = "AUTOGRAD_TUI_SERVE_EXPORT_DIR"
_MIME = {"dot": "text/vnd.graphviz", "svg": "image/svg+xml", "png": "image/png",
         "pdf": "application/pdf"}


def safe_name(typed: str) -> str:
    """The last part of ``typed`` as a plain file name with a known suffix
    (``../../x.pdf`` -> ``x.pdf``, ``a b?.svg`` -> ``a_b_.svg``, ``x`` -> ``x.svg``)."""
    from autograd_tui.export.render import FORMATS

    base = re.split(r"[/\\]", typed.strip())[-1]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", base).lstrip(".-")[-100:] or "export"
    if Path(name).suffix.lower().lstrip(".") not in FORMATS:
        name += ".svg"
    return name


def target_in(folder: str, typed: str) -> Path:
    """Where ``typed`` goes in ``folder``; an ``ExportError`` if it would leave it (a
    symlink there pointing out, say)."""
    from autograd_tui.export.render import ExportError

    root = Path(folder).resolve()
    out = root / safe_name(typed)
    if out.resolve().parent != root or out.is_dir():
        raise ExportError(f"{out.name}: cannot write it in the export folder (it is a "
                          "folder, or a link out of it): choose another name")
    return out


def drawing(state: Any, name: str) -> tuple[bytes, str, str | None]:
    """The bytes of ``state`` drawn in ``name``'s format, the name they go by (``.dot``
    when Graphviz is missing), and a note for the viewer."""
    from autograd_tui.export.dot import to_dot
    from autograd_tui.export.render import DotNotFound, format_for, render

    fmt = format_for(name)
    text = to_dot(state)
    if fmt == "dot":
        return text.encode(), name, None
    try:
        return render(text, fmt), name, None
    except DotNotFound:
        dot_name = str(Path(name).with_suffix(".dot"))
        return text.encode(), dot_name, "Graphviz is not installed on the server: " \
                                        "sent the DOT source"


def export(shown: Any, state: Any, typed: str,
           confirm: Callable[[str, Callable[[], None]], None]) -> None:
    """Export ``state`` for a viewer in a browser: into the teacher's folder, or as a
    download.  Every problem is one notification."""
    from autograd_tui.export import export_state
    from autograd_tui.export.render import ExportError

    folder = os.environ.get(EXPORT_DIR_VARIABLE)
    try:
        if folder:
            out = target_in(folder, typed)

            def write() -> None:
                try:
                    export_state(state, out)
                except ExportError as e:
                    shown.notify(str(e), title="export failed", severity="error", timeout=8)
                    return
                shown.notify(f"wrote {out.name} in the server's export folder",
                             title="exported", timeout=6)

            if out.exists():
                confirm(f"{out.name} exists in the export folder: replace it?", write)
            else:
                write()
            return
        data, name, note = drawing(state, safe_name(typed))
    except ExportError as e:
        shown.notify(str(e), title="export failed", severity="error", timeout=8)
        return
    shown.app.deliver_binary(io.BytesIO(data), save_filename=name,
                             mime_type=_MIME.get(Path(name).suffix.lstrip("."),
                                                 "application/octet-stream"))
    shown.notify(note or f"{name}: sent to your browser as a download", title="exported",
                 timeout=6)
