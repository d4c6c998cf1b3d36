"""Real models nobody here wrote, stepped through our engine (issue 28).

GPT-2 and BERT from ``transformers`` (built from small configs, random weights: nothing is
downloaded), a ResNet written out as torchvision's resnet18 is built, and a MobileNet
written out as torchvision's mobilenet_v3_small is built (torchvision has no CPU build
here). The scripts are in ``tests/models/``. Each command a user would type on them
(``autograd-tui check-order SCRIPT``, with ``--exact``, ``autograd-tui torch SCRIPT
--headless``) runs once per script and module, and each test asserts its own point on
that run's output. One script per command runs the real console script in a subprocess,
as a user would (``E2E``); the others call the same ``main`` in this process, which
checks the same code from the argument parser down without paying a fresh interpreter,
torch and transformers import per run (about 5 s each on the CI machine).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

pytest.importorskip("torch", reason="the bridge needs PyTorch (pip install torch)")

from autograd_tui.commands import main  # noqa: E402

pytestmark = [pytest.mark.timeout(180), pytest.mark.usefixtures("no_thread_left"),
              pytest.mark.filterwarnings("ignore::FutureWarning")]
MODELS = Path(__file__).resolve().parents[1] / "models"
EXE = str(Path(sys.executable).parent / "autograd-tui")
ENV = {"NO_COLOR": "1", "COLUMNS": "120"}

# script -> the package it needs beyond torch (the `models` extra), or None
SCRIPTS = {"gpt2_lm": "transformers", "bert_classify": "transformers",
           "t5_seq2seq": "transformers", "llama_train": "transformers",
           "resnet_small": None, "mobilenet_small": None}
CHECK, EXACT, HEADLESS = ("check-order",), ("check-order", "--exact"), ("torch", "--headless")
# (command, script) run as a subprocess of the installed console script: one per command
E2E = {(CHECK, "gpt2_lm"), (EXACT, "resnet_small"), (HEADLESS, "bert_classify")}


class Ran(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


_runs: dict[tuple[tuple[str, ...], str], Ran] = {}


def _subprocess(argv: list[str]) -> Ran:
    p = subprocess.run([EXE, *argv], capture_output=True, text=True, timeout=150,
                       env={**os.environ, **ENV}, cwd=MODELS.parent.parent)
    return Ran(p.returncode, p.stdout, p.stderr)


def _in_process(argv: list[str]) -> Ran:
    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in ENV}
    os.environ.update(ENV)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return Ran(code, out.getvalue(), err.getvalue())


def ran(command: tuple[str, ...], name: str) -> Ran:
    """``autograd-tui COMMAND SCRIPT [OPTION]`` on one script, run once per module."""
    needs = SCRIPTS[name]
    if needs:
        pytest.importorskip(needs, reason=f"{name} needs {needs} (pip install "
                                          "'autograd-tui[models]')")
    if (command, name) not in _runs:
        argv = [command[0], str(MODELS / f"{name}.py"), *command[1:]]
        run = _subprocess if (command, name) in E2E else _in_process
        _runs[command, name] = run(argv)
    return _runs[command, name]


def test_each_command_has_an_end_to_end_run() -> None:
    assert {c for c, _ in E2E} == {CHECK, EXACT, HEADLESS}
    assert all(name in SCRIPTS for _, name in E2E)


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_check_order_node_order_agrees(name: str) -> None:
    p = ran(CHECK, name)
    m = re.search(r"PyTorch ran (\d+) nodes, ours (\d+)", p.stdout)
    assert m, p.stdout + p.stderr
    assert m[1] == m[2] and int(m[1]) > 50, p.stdout
    assert "node order: agrees" in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("name", SCRIPTS)
def test_check_order_gradients_agree(name: str) -> None:
    p = ran(CHECK, name)
    assert re.search(r"gradients: \d+ leaves agree", p.stdout), p.stdout + p.stderr
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_torch_headless_completes(name: str) -> None:
    p = ran(HEADLESS, name)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "completed" in p.stdout.splitlines(), p.stdout
    assert re.search(r"^grad \S+: shape ", p.stdout, re.M), p.stdout


@pytest.mark.parametrize("name", SCRIPTS)
def test_check_order_exact_gradients_are_bitwise_equal(name: str) -> None:
    """Gradients summed in torch's order and layout (docs/torch.md): the same bits."""
    p = ran(EXACT, name)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"gradients: \d+ leaves agree \(bitwise\)", p.stdout), p.stdout
