"""Leftovers of the torch bridge and its commands, found on users' programs (plain torch,
each test a second or two):

1. A forward pass that raises: ``torch --headless`` printed the error on stdout and on
   stderr, then a summary of a run that never started (``events: 0``, ``schedule: 1:1``).
   Now the program's error, once, on stderr; exit 1 as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from user_scripts import write_script

torch = pytest.importorskip("torch", reason="the torch bridge needs PyTorch (pip install torch)")

from autograd_tui.commands import main  # noqa: E402

pytestmark = pytest.mark.timeout(120)


FORWARD_RAISES = """
    import torch
    from torch import nn

    def main():
        net = nn.Linear(4, 3)
        print("built")
        return net(torch.randn(2, 5)).sum()
"""


@pytest.mark.parametrize("quiet", [[], ["--quiet"]])
def test_a_forward_that_raises_is_said_once_on_stderr(tmp_path: Path, capsys,
                                                      quiet: list[str]) -> None:
    script = write_script(tmp_path, FORWARD_RAISES)
    assert main(["torch", str(script), "--headless", *quiet]) == 1
    out, err = capsys.readouterr()
    assert out == "built\n", out  # the program's own output only: no empty run summary
    assert "events:" not in out + err and "schedule:" not in out + err
    shapes = "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x5 and 4x3)"
    assert err.count(shapes) == 1, err
    assert err.startswith(f"autograd-tui: {script}:8: {shapes}\n"), err
    assert "return net(torch.randn(2, 5)).sum()" in err and "Traceback" not in err
