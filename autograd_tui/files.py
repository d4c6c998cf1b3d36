"""Writing files: one atomic writer and one wording of why a path cannot be written.

Recordings, Chrome traces and Graphviz exports all write through ``atomic_write``:
the data goes to a temporary file beside the target and replaces it only when
everything is written, so a failure (a full disk, Ctrl-C, a bad value) leaves any
file that was there as it was.  Every ``OSError`` becomes one ``CannotWrite``
whose message names the path and what is wrong, never a traceback.
"""

from __future__ import annotations

import gzip
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


class CannotWrite(Exception):
    """``<path>: cannot write: <why>``."""


def why(path: Path, e: OSError) -> str:
    """The one message for an ``OSError`` met while writing ``path``."""
    if isinstance(e, IsADirectoryError):
        return f"{path}: cannot write: it is a directory"
    if isinstance(e, FileNotFoundError):
        return f"{path}: cannot write: the folder {path.parent} does not exist"
    if isinstance(e, NotADirectoryError):
        return f"{path}: cannot write: {path.parent} is not a folder"
    if isinstance(e, PermissionError):
        return f"{path}: cannot write: permission denied in {path.parent}"
    return f"{path}: cannot write: {e.strerror or e}"


@contextmanager
def atomic_write(path: str | os.PathLike[str], *, gzip_suffix: bool = True
                 ) -> Iterator[IO[bytes]]:
    """A binary file to write ``path`` through (gzip-compressed for ``*.gz`` when
    ``gzip_suffix``); it replaces ``path`` only if the block ends without an exception."""
    p = Path(path)
    if p.is_dir():
        raise CannotWrite(f"{p}: cannot write: it is a directory")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    except OSError as e:
        raise CannotWrite(why(p, e)) from None
    try:
        with os.fdopen(fd, "wb") as raw:
            if gzip_suffix and p.name.endswith(".gz"):
                with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
                    yield gz  # type: ignore[misc]
            else:
                yield raw
        os.replace(tmp, p)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise CannotWrite(why(p, e)) from None
        raise


def write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (no compression)."""
    with atomic_write(path, gzip_suffix=False) as f:
        f.write(data)
