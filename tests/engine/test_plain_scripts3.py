"""The official example scripts of transformers and accelerate run unmodified through the
plain-script mode (``autograd-tui torch SCRIPT``), reduced to their smallest plain-PyTorch
reproduction: what they found (``engine/torch_bridge/script_run.py``,
``autograd_tui/commands/torch_cmd.py``).  The CLI runs in this process."""

from __future__ import annotations

from pathlib import Path

import pytest
from user_scripts import run_cli, write_script

pytest.importorskip("torch", reason="the torch bridge needs PyTorch")

pytestmark = pytest.mark.timeout(60)

# accelerate's nlp_example.py: a fixed 3 epochs of 2 steps, 6 backward calls; --backward 7
# runs it to its end.  It did not fail, yet --record said "the program failed before its
# backward pass began".
TWO_CALLS = """\
    import torch

    w = torch.ones(3, requires_grad=True)
    for _ in range(2):
        (w * 2).sum().backward()
    """


def test_record_of_a_script_that_ended_says_it_ended_not_failed(tmp_path: Path,
                                                                 capsys) -> None:
    script = write_script(tmp_path, TWO_CALLS, "train.py")
    record = tmp_path / "r.jsonl"
    code, out = run_cli(["torch", str(script), "--headless", "--quiet", "--backward", "3",
                         "--record", str(record)], capsys)
    assert code == 1
    assert "train.py ran to its end after 2 backward calls; --backward 3 asks for a 3rd" in out
    assert "no recording written to" in out
    assert ("the script ended before the backward call asked for, so there is nothing to "
            "replay") in out
    assert "failed" not in out and "Traceback" not in out
    assert not record.exists()


def test_record_of_a_failed_forward_still_says_failed(tmp_path: Path, capsys) -> None:
    script = write_script(tmp_path, """\
        import torch

        w = torch.ones(3, requires_grad=True)
        (w @ torch.ones(2, 2)).sum().backward()
        """, "bad.py")
    record = tmp_path / "r.jsonl"
    code, out = run_cli(["torch", str(script), "--headless", "--quiet", "--record",
                         str(record)], capsys)
    assert code == 1
    assert "the program failed before its backward pass began, so there is nothing to " \
           "replay" in out
    assert not record.exists()
