"""A user's script written to a test's folder, as the torch bridge's tests give it one."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_script(tmp_path: Path, body: str, name: str = "model.py") -> Path:
    """``body`` (dedented) as ``tmp_path / name``."""
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p
