"""Writing files: one writer for every output path and one wording of why a path cannot
be written.

Recordings, Chrome traces and Graphviz exports all write through ``atomic_write``.
What it does depends on what the path names (following symbolic links):

- a regular file, or nothing yet: the data goes to a temporary file beside it and
  replaces it only when everything is written, so a failure (a full disk, Ctrl-C, a
  bad value) leaves any file that was there as it was.  A replaced file keeps its
  permission bits; a new one gets the usual mode (0666 less the umask), as ``open``
  would give it.
- a symbolic link: the same, for the file it points to; the link stays a link.  A
  dangling link is followed too (the file it names is created), as the shell's ``>``
  does; if that file's folder does not exist, the message says so.
- a FIFO, a character device (``/dev/null``, a terminal) or anything else that is
  not a regular file: the data is written straight into it, as ``>`` would.  There
  is nothing to replace (and renaming over ``/dev/null`` would replace the device
  itself), so such a write is not atomic: a failure midway leaves what was sent.
- a directory: refused, with one message.

Every ``OSError`` becomes one ``CannotWrite`` whose message names the path and what
is wrong, never a traceback.
"""

from __future__ import annotations

import gzip
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


class CannotWrite(Exception):
    """``<path>: cannot write: <why>``."""


def why(path: Path, e: OSError, folder: Path | None = None) -> str:
    """The one message for an ``OSError`` met while writing ``path``; ``folder`` is
    where the file goes (``path.parent`` unless ``path`` is a link)."""
    folder = path.parent if folder is None else folder
    if isinstance(e, IsADirectoryError):
        return f"{shown(path)}: cannot write: it is a directory"
    # What the OS said, with the path it said it of; the folder's absence only when it is
    # absent (a file system such as /proc refuses new files with the same ENOENT).
    if isinstance(e, FileNotFoundError) and not os.path.lexists(folder):
        return f"{shown(path)}: cannot write: the folder {shown(folder)} does not exist"
    if isinstance(e, NotADirectoryError) and not os.path.isdir(folder):
        return f"{shown(path)}: cannot write: {shown(folder)} is not a folder"
    if isinstance(e, PermissionError):
        return f"{shown(path)}: cannot write: permission denied in {shown(folder)}"
    where = "" if e.filename in (None, str(path)) else f" ({shown(e.filename)})"
    return f"{shown(path)}: cannot write: {e.strerror or e}{where}"


def shown(path: object) -> str:
    """A path as a message shows it: control, invisible and bidirectional characters
    written as escapes (a file name may hold a newline or ESC)."""
    from autograd_tui.words import plain  # words imports the engine: not at start-up

    return plain(os.fspath(path) if isinstance(path, os.PathLike) else path)


def _existing(p: Path) -> os.stat_result | None:
    """What ``p`` names, following links (None: nothing, or a dangling link)."""
    try:
        return os.stat(p)
    except FileNotFoundError:
        return None
    except OSError as e:  # a link loop, a file used as a folder, no permission to look
        raise CannotWrite(why(p, e)) from None


def _create_temp(target: Path, mode: int) -> tuple[int, Path]:
    """A new, empty file beside ``target`` opened for writing: ``(fd, path)``.

    Not ``tempfile.mkstemp``: that creates mode 0600 whatever the umask, and reading
    the umask (``os.umask``) means setting it, which is not thread-safe.  ``O_CREAT``
    with ``mode`` lets the kernel apply the umask (and any default ACL) itself."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = target.parent / f".{target.name}.{os.urandom(4).hex()}.tmp"
        try:
            return os.open(tmp, flags, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target}")


@contextmanager
def _wrap(raw: IO[bytes], compress: bool) -> Iterator[IO[bytes]]:
    if compress:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            yield gz  # type: ignore[misc]
    else:
        yield raw


@contextmanager
def atomic_write(path: str | os.PathLike[str], *, gzip_suffix: bool = True
                 ) -> Iterator[IO[bytes]]:
    """A binary file to write ``path`` through (gzip-compressed for ``*.gz`` when
    ``gzip_suffix``).  A regular file (or a new one) is replaced only if the block ends
    without an exception; a FIFO or a device is written into directly (see above)."""
    p = Path(path)
    compress = gzip_suffix and p.name.endswith(".gz")
    st = _existing(p)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise CannotWrite(f"{shown(p)}: cannot write: it is a directory")
    if st is not None and not stat.S_ISREG(st.st_mode):
        yield from _write_directly(p, compress)
        return
    # Through a link, replace the file it points to, not the link; a dangling link's
    # target is created.  realpath also settles links among the folders above.
    target = Path(os.path.realpath(p))
    folder = target.parent
    try:
        # Replacing: start private (0600) and take the old file's bits before any data
        # is written, so the new content is never more readable than the old.  The
        # set-id bits are dropped, as any write to the file would drop them.
        fd, tmp = _create_temp(target, 0o600 if st is not None else 0o666)
        if st is not None:
            try:
                os.fchmod(fd, stat.S_IMODE(st.st_mode) & 0o777)
            except OSError:  # a file system without modes (FAT, some mounts): keep going
                pass
    except OSError as e:
        raise CannotWrite(why(p, e, folder)) from None
    try:
        with os.fdopen(fd, "wb") as raw, _wrap(raw, compress) as out:
            yield out
        os.replace(tmp, target)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise CannotWrite(why(p, e, folder)) from None
        raise


def _write_directly(p: Path, compress: bool) -> Iterator[IO[bytes]]:
    """Write into a FIFO, a device or another non-regular file as it is.  Opening a
    FIFO waits for a reader, as ``>`` does."""
    try:
        raw = open(p, "wb")  # noqa: SIM115 - closed below, its errors reworded
    except OSError as e:
        raise CannotWrite(why(p, e)) from None
    try:
        with raw, _wrap(raw, compress) as out:
            yield out
    except OSError as e:
        raise CannotWrite(why(p, e)) from None


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through ``atomic_write`` (no compression)."""
    with atomic_write(path, gzip_suffix=False) as f:
        f.write(data)
