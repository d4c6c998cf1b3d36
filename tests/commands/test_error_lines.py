"""A library's multi-line error (a gloo error with PyTorch's "At:" trace) in a script run
by ``autograd-tui torch --headless``: shown as lines in the located error on stderr (the
program failed before its backward pass: no summary on stdout), each line still filtered
(an ESC stays escaped); no ``\\x0a`` in place of a newline.  (A rank of ``--ranks`` keeps
the summary's lines, which the launcher reads back: tests/commands/test_torch_ranks.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from autograd_tui.commands.parser import main

pytest.importorskip("torch", reason="the bridge needs PyTorch (pip install torch)")
pytestmark = pytest.mark.timeout(120)

SCRIPT = '''import torch

def main():
    x = torch.ones(2, requires_grad=True)
    raise RuntimeError("Connection closed by peer [127.0.0.1]:553.\\n\\nAt:\\n"
                       "  hooks.py(31): \\x1b[2J<lambda>\\n")
'''


def test_a_multi_line_error_is_shown_as_its_lines(tmp_path: Path, capsys) -> None:
    script = tmp_path / "gloo.py"
    script.write_text(SCRIPT)
    assert main(["torch", str(script), "--headless", "--quiet"]) == 1
    out, err = capsys.readouterr()
    assert out == "", out
    assert (f"autograd-tui: {script}:5: RuntimeError: Connection closed by peer "
            "[127.0.0.1]:553.\n    At:\n      hooks.py(31): \\x1b[2J<lambda>\n") in err
    assert "\\x0a" not in out + err and "\x1b" not in out + err


def test_a_rank_of_ranks_keeps_the_lines_on_stdout(tmp_path: Path, capsys,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # the launcher of --ranks reads a rank's outcome from its summary (session/ranks.py)
    monkeypatch.setenv("AUTOGRAD_TUI_RANKS", "1")
    script = tmp_path / "gloo.py"
    script.write_text(SCRIPT)
    assert main(["torch", str(script), "--headless", "--quiet"]) == 1
    out, err = capsys.readouterr()
    assert ("error in the script RuntimeError: Connection closed by peer [127.0.0.1]:553.\n"
            "    At:\n      hooks.py(31): \\x1b[2J<lambda>\n") in out
    assert "\\x0a" not in out + err and "\x1b" not in out + err
