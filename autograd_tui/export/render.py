"""Graphviz ``dot``: finding it, running it, and the export's errors.

``render(dot_text, fmt)`` runs ``dot -T<fmt>`` as a subprocess with a timeout
and returns the image's bytes.  Every problem is an ``ExportError`` with one
message: ``DotNotFound`` (with how to install Graphviz) or ``RenderError``
(``dot``'s own message, or the timeout).  ``format_for`` picks the output
format from an option or a file's suffix.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

#: output formats; every one but ``dot`` is rendered by Graphviz ``dot``
FORMATS = ("dot", "svg", "png", "pdf")

INSTALL_HINT = ("install Graphviz: `sudo apt-get install graphviz` (Debian/Ubuntu), "
                "`brew install graphviz` (macOS), or see https://graphviz.org/download/")

_MAX_DOT_MESSAGE = 500  # characters of dot's stderr kept in a RenderError


class ExportError(Exception):
    """An export that cannot be done: one clear message."""


class DotNotFound(ExportError):
    """Graphviz ``dot`` is not on PATH."""


class RenderError(ExportError):
    """``dot`` failed or timed out."""


def find_dot() -> str | None:
    return shutil.which("dot")


def render(dot_source: str, fmt: str, *, timeout: float = 60.0, dot: str | None = None
           ) -> bytes:
    """Render DOT text with Graphviz ``dot``; returns the bytes of the svg/png/pdf."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    if fmt == "dot":
        return dot_source.encode()
    exe = dot or find_dot()
    if exe is None:
        raise DotNotFound(f"Graphviz `dot` is not on PATH; {INSTALL_HINT}")
    try:
        proc = subprocess.run([exe, f"-T{fmt}"], input=dot_source.encode(),
                              capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise RenderError(f"`dot -T{fmt}` took longer than {timeout:g} s and was stopped "
                          "(a larger --timeout, or --collapse-leaves, may help)") from None
    except OSError as e:
        raise RenderError(f"cannot run {exe}: {e.strerror or e}") from None
    if proc.returncode != 0 or not proc.stdout:
        err = proc.stderr.decode(errors="replace").strip() or f"exit code {proc.returncode}"
        if len(err) > _MAX_DOT_MESSAGE:
            err = err[:_MAX_DOT_MESSAGE - 1] + "…"
        raise RenderError(f"`dot -T{fmt}` failed: {err}")
    return proc.stdout


def format_for(path: str | Path, fmt: str | None = None) -> str:
    """The output format: ``fmt`` if given, else from the suffix (.gv is dot; none: svg)."""
    if fmt is not None:
        f = str(fmt).lower().lstrip(".")
        if f not in FORMATS:
            raise ExportError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
        return f
    suffix = Path(path).suffix.lower().lstrip(".")
    if not suffix:
        return "svg"
    if suffix == "gv":
        return "dot"
    if suffix not in FORMATS:
        raise ExportError(f"unknown format {suffix!r} (from {Path(path).name}): use one of "
                          f"{', '.join(FORMATS)}")
    return suffix


def dot_path_for(path: Path) -> Path:
    """Where the DOT source goes when ``path`` cannot be rendered (``x.svg`` -> ``x.dot``)."""
    return path.with_suffix(".dot") if path.suffix else path.with_name(path.name + ".dot")


def render_failure_message(e: ExportError, fmt: str, written: str, command: str) -> str:
    """What to say when ``e`` stopped a render: what was written instead, and how to
    render it once Graphviz is there."""
    if isinstance(e, DotNotFound):
        return (f"Graphviz `dot` was not found on PATH, so no {fmt} was made; {written}. "
                f"To render it, {INSTALL_HINT}; then run this again, or: {command}")
    return f"{e}; {written}"
