"""Real programs run unmodified through the plain-script mode (``autograd-tui torch
SCRIPT``), reduced to their smallest plain-PyTorch reproduction: what they found
(``engine/torch_bridge/script_run.py``).  The CLI runs in this process."""

from __future__ import annotations

from pathlib import Path

import pytest
from user_scripts import run_cli, write_script

pytest.importorskip("torch", reason="the torch bridge needs PyTorch")

pytestmark = pytest.mark.timeout(60)

# pytorch/examples mnist_hogwild: every backward runs in a multiprocessing child, the
# parent only starts, joins and tests
HOGWILD = """\
    import multiprocessing as mp
    import torch

    def train(w):
        (w * 2).sum().backward()

    if __name__ == "__main__":
        w = torch.ones(3, requires_grad=True)
        procs = [mp.get_context("fork").Process(target=train, args=(w,)) for _ in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        assert all(p.exitcode == 0 for p in procs)
        {after}
    """


def test_backward_only_in_child_processes_is_said(tmp_path: Path, capsys) -> None:
    script = write_script(tmp_path, HOGWILD.format(after="pass"), "hogwild.py")
    code, out = run_cli(["torch", str(script), "--headless", "--quiet"], capsys)
    assert code == 1
    assert "called no backward (loss.backward(), torch.autograd.backward): nothing to " \
           "step; it started 2 child processes (multiprocessing): their backward calls ran " \
           "there, on PyTorch's engine; only the script's own process and thread are " \
           "stepped" in out
    assert "Traceback" not in out


def test_children_said_when_too_few_own_calls_and_not_when_stepped(tmp_path: Path,
                                                                   capsys) -> None:
    script = write_script(tmp_path, HOGWILD.format(after="(w * 3).sum().backward()"),
                          "hogwild_then_own.py")
    code, out = run_cli(["check-order", str(script), "--exact", "--backward", "2"], capsys)
    assert code == 1
    assert "ran to its end after 1 backward call; --backward 2 asks for a 2nd; it started " \
           "2 child processes (multiprocessing)" in out
    code, out = run_cli(["check-order", str(script), "--exact"], capsys)  # the parent's 1st
    assert code == 0, out
    assert "node order: agrees" in out and "child process" not in out


def test_inplace_op_on_an_inference_tensor_before_the_nth_call(tmp_path: Path,
                                                                capsys) -> None:
    # timm's train.py: validate() runs under torch.inference_mode between the epochs' steps,
    # and its in-place ops on inference tensors went through the forward's in-place log,
    # which read their version counter: "Inference tensors do not track version counter"
    script = write_script(tmp_path, """\
        import torch
        w = torch.ones(3, requires_grad=True)
        (w * 2).sum().backward()
        with torch.inference_mode():
            acc = torch.zeros(2)
            acc.add_(1)
            acc[0] = 5.0
        (w * acc.sum()).sum().backward()
        """, "validate_between.py")
    code, out = run_cli(["torch", str(script), "--headless", "--quiet", "--backward", "2"],
                        capsys)
    assert code == 0, out
    assert "stepped the script's 2nd backward call" in out and "grad w: shape [3]" in out
