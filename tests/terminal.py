"""Running the command as a person does: piped, or with standard error on a
pseudo-terminal (where progress bars are drawn).  POSIX only (``pty``)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path


def _env() -> dict[str, str]:
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="120")
    env.pop("NO_COLOR", None)
    return env


def run_piped(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autograd_tui", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=150, env=_env())


def run_on_terminal(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """Standard error on a pseudo-terminal, standard output a pipe: (rc, out, terminal)."""
    import pty  # POSIX only: the callers skip elsewhere

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "autograd_tui", *args], cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave,
                            env=_env())
    os.close(slave)
    chunks: list[bytes] = []

    def read_terminal() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read_terminal, name="pty-reader")
    reader.start()
    try:
        out, _ = proc.communicate(timeout=150)
    finally:
        reader.join(10)
        os.close(master)
    assert not reader.is_alive()
    return proc.returncode, out.decode(), b"".join(chunks).decode(errors="replace")
