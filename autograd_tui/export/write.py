"""Writing snapshots: one state to a file, or a frame sequence into a folder.

Every file goes through ``autograd_tui.files`` (written beside the target and
moved into place, so a failure leaves what was there); its ``CannotWrite``
becomes an ``ExportError`` here, so that the export has one error type.  When
``dot`` is missing or fails, the DOT source is written instead and the error
says where, and how to render it.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from autograd_tui import files
from autograd_tui.engine.events import Event
from autograd_tui.export.dot import to_dot
from autograd_tui.export.frames import Frame, index_html, states_after
from autograd_tui.export.labels import event_text
from autograd_tui.export.render import (
    DotNotFound,
    ExportError,
    dot_path_for,
    find_dot,
    format_for,
    render,
    render_failure_message,
)
from autograd_tui.files import shown
from autograd_tui.history.state import EngineState


def write_bytes(path: Path, data: bytes) -> None:
    """Write a file atomically; a path that cannot be written is an ``ExportError``."""
    try:
        files.write_bytes(path, data)
    except files.CannotWrite as e:
        raise ExportError(str(e)) from None


def check_output(out: Path, frames: bool) -> None:
    """Fail early (before running anything) if ``out`` cannot be written: a file for
    one state, a folder (created if missing) for frames."""
    if frames:
        if out.exists() and not out.is_dir():
            raise ExportError(f"{out}: cannot write frames: it exists and is not a directory")
        probe = out
    else:
        if out.is_dir():
            raise ExportError(f"{out}: cannot write: it is a directory (frames need --every "
                              "or --breakpoints)")
        probe = out.parent
    # the nearest existing ancestor must be a writable directory
    p = probe if str(probe) else Path(".")
    while not p.exists():
        if p.parent == p:
            break
        p = p.parent
    if p.exists() and not p.is_dir():
        raise ExportError(f"{out}: cannot write: {p} is a file, not a directory")
    if not frames and not probe.exists():
        raise ExportError(f"{out}: cannot write: the folder {probe} does not exist")
    if p.exists() and not os.access(p, os.W_OK | os.X_OK):
        raise ExportError(f"{out}: cannot write: permission denied in {p}")


def export_state(state: EngineState, path: str | Path, *, fmt: str | None = None,
                 rankdir: str = "TB", values: bool = True, collapse_leaves: bool = False,
                 title: str | None = None, timeout: float = 60.0, unfold: bool = False) -> str:
    """Draw ``state`` into ``path`` (format from ``fmt`` or the suffix); return a message.

    Without ``dot`` (or if it fails) the DOT source is written next to ``path``
    (``x.svg`` -> ``x.dot``) and ``DotNotFound``/``RenderError`` says so.  Every
    problem is an ``ExportError`` with one clear message.
    """
    out = Path(path)
    f = format_for(out, fmt)
    if out.is_dir():
        raise ExportError(f"{out}: cannot write: it is a directory")
    text = to_dot(state, rankdir=rankdir, values=values, collapse_leaves=collapse_leaves,
                  title=title, unfold=unfold)
    if f == "dot":
        write_bytes(out, text.encode())
    else:
        try:
            data = render(text, f, timeout=timeout)
        except ExportError as e:
            fallback = dot_path_for(out)
            write_bytes(fallback, text.encode())
            msg = render_failure_message(e, f, f"the DOT source was written to {fallback}",
                                         f"dot -T{f} {fallback} -o {out}")
            raise type(e)(msg) from None
        write_bytes(out, data)
    return f"wrote {shown(out)} ({len(state.nodes)} nodes; {event_text(state)})"


def write_frames(events: Sequence[Event], ks: Sequence[int], out: Path, *, fmt: str,
                 title: str, rankdir: str = "TB", values: bool = True,
                 collapse_leaves: bool = False, timeout: float = 60.0, unfold: bool = False,
                 on_frame: Callable[[], None] | None = None) -> tuple[list[Frame], Path]:
    """One frame per k in ``ks`` (the state after events 1..k) into the folder ``out``
    (``frame-0000.svg``, ...), and ``index.html``; returns the frames and the index.
    ``on_frame`` is called on this thread as each frame is written (a progress bar).

    Without ``dot`` the frames are written as DOT (and the index shows them) and
    ``DotNotFound`` says how to render them; if ``dot`` fails on a frame, that
    frame's DOT is written and the rest stop."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ExportError(f"{out}: cannot create the folder: {e.strerror or e}") from None
    width = max(4, len(str(len(ks) - 1)))
    missing = fmt != "dot" and find_dot() is None
    used = "dot" if missing else fmt
    workers = min(8, os.cpu_count() or 1)
    frames: list[Frame] = []
    pending: deque[Future[None]] = deque()
    done = on_frame if on_frame is not None else (lambda: None)

    def render_and_write(stem: str, text: str) -> None:
        try:
            data = render(text, fmt, timeout=timeout)
        except ExportError as e:
            write_bytes(out / f"{stem}.dot", text.encode())
            raise type(e)(f"{stem}: {e}; its DOT source was written to "
                          f"{out / (stem + '.dot')}") from None
        write_bytes(out / f"{stem}.{fmt}", data)

    # Fold the events once; render while folding, a bounded number of frames at a
    # time, so that neither the DOT texts nor the images pile up in memory.
    with ThreadPoolExecutor(max_workers=workers) as pool:
        try:
            for i, (k, state) in enumerate(states_after(events, ks)):
                stem = f"frame-{i:0{width}d}"
                text = to_dot(state, rankdir=rankdir, values=values,
                              collapse_leaves=collapse_leaves, title=title, unfold=unfold)
                frames.append(Frame(f"{stem}.{used}", k, event_text(state)))
                if used == "dot":
                    write_bytes(out / f"{stem}.dot", text.encode())
                    done()
                    continue
                pending.append(pool.submit(render_and_write, stem, text))
                while len(pending) > 2 * workers:
                    pending.popleft().result()
                    done()
            while pending:
                pending.popleft().result()
                done()
        except BaseException:
            for f in pending:
                f.cancel()
            raise
    index = out / "index.html"
    write_bytes(index, index_html(frames, title=f"{title}: {len(frames)} frames",
                                  fmt=used).encode())
    if missing:
        raise DotNotFound(render_failure_message(
            DotNotFound("Graphviz `dot` is not on PATH"), fmt,
            f"the DOT sources were written to {out}/ (frame-*.dot; index.html shows them as "
            "text)",
            f"cd {out} && for f in frame-*.dot; do dot -T{fmt} \"$f\" -o "
            f"\"${{f%.dot}}.{fmt}\"; done"))
    return frames, index
