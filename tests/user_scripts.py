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


#: a custom Function whose backward the environment nudges (WOBBLE=1: 1e-6 more), so a
#: recording made without it diverges, bit for bit, when re-executed with it
WOBBLE = """
    import os
    import torch

    class Wobble(torch.autograd.Function):   # a backward whose result the environment sets
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def backward(ctx, g):
            return g * (3 + 1e-6 * int(os.environ.get("WOBBLE", "0")))

    def main():
        w = torch.ones(4, requires_grad=True)
        return Wobble.apply(w).sum()
"""
