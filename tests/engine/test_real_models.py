"""Real models nobody here wrote, stepped through our engine (issue 28).

GPT-2 and BERT from ``transformers`` (built from small configs, random weights: nothing is
downloaded), a ResNet written out as torchvision's resnet18 is built, and a MobileNet
written out as torchvision's mobilenet_v3_small is built (torchvision has no CPU build
here). The scripts are in ``tests/models/``; each test runs the real console script in a
subprocess, as a user would: ``autograd-tui check-order SCRIPT`` (node order and
gradients agree with PyTorch's own run) and ``autograd-tui torch SCRIPT --headless``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the bridge needs PyTorch (pip install torch)")

pytestmark = pytest.mark.timeout(180)
MODELS = Path(__file__).resolve().parents[1] / "models"
EXE = str(Path(sys.executable).parent / "autograd-tui")
ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120"}

# script -> the package it needs beyond torch (the `models` extra), or None
SCRIPTS = {"gpt2_lm": "transformers", "bert_classify": "transformers",
           "t5_seq2seq": "transformers", "llama_train": "transformers",
           "resnet_small": None, "mobilenet_small": None}



def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=150, env=ENV,
                          cwd=MODELS.parent.parent)


_check_order_runs: dict[str, subprocess.CompletedProcess[str]] = {}


def check_order(name: str) -> subprocess.CompletedProcess[str]:
    """``autograd-tui check-order`` on one script, run once for the order and gradient tests."""
    needs = SCRIPTS[name]
    if needs:
        pytest.importorskip(needs, reason=f"{name} needs {needs} (pip install "
                                          "'autograd-tui[models]')")
    if name not in _check_order_runs:
        _check_order_runs[name] = _cli("check-order", str(MODELS / f"{name}.py"))
    return _check_order_runs[name]


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_check_order_node_order_agrees(name: str) -> None:
    p = check_order(name)
    m = re.search(r"PyTorch ran (\d+) nodes, ours (\d+)", p.stdout)
    assert m, p.stdout + p.stderr
    assert m[1] == m[2] and int(m[1]) > 50, p.stdout
    assert "node order: agrees" in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("name", SCRIPTS)
def test_check_order_gradients_agree(name: str) -> None:
    p = check_order(name)
    assert re.search(r"gradients: \d+ leaves agree", p.stdout), p.stdout + p.stderr
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_torch_headless_completes(name: str) -> None:
    needs = SCRIPTS[name]
    if needs:
        pytest.importorskip(needs)
    p = _cli("torch", str(MODELS / f"{name}.py"), "--headless")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "completed" in p.stdout.splitlines(), p.stdout
    assert re.search(r"^grad \S+: shape ", p.stdout, re.M), p.stdout


@pytest.mark.parametrize("name", SCRIPTS)
def test_check_order_exact_gradients_are_bitwise_equal(name: str) -> None:
    """Gradients summed in torch's order and layout (docs/torch.md): the same bits."""
    if SCRIPTS[name] is not None:
        pytest.importorskip(SCRIPTS[name], reason="the `models` extra is not installed")
    p = _cli("check-order", str(MODELS / f"{name}.py"), "--exact")
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"gradients: \d+ leaves agree \(bitwise\)", p.stdout), p.stdout
