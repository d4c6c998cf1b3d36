"""A user's script written to a test's folder, as the torch bridge's tests give it one."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_script(tmp_path: Path, body: str, name: str = "model.py") -> Path:
    """``body`` (dedented) as ``tmp_path / name``."""
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


def run_cli(args: list[str], capsys) -> tuple[int, str]:
    """``autograd-tui ARGS`` in this process: its exit code and its stdout and stderr
    together, whitespace folded (messages wrap at the terminal's width)."""
    from autograd_tui.commands import main

    code = main(args)
    out = capsys.readouterr()
    return code, " ".join((out.out + out.err).split())
