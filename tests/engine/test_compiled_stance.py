"""``watch_compile`` sets dynamo's force-eager stance only once dynamo is loaded: importing
``torch._dynamo`` costs about 1.3 s of CPU, which every ``autograd-tui torch`` process (and
every rank of ``--ranks``) paid for a program that compiles nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("torch")

PROGRAM = """
import sys
import torch
from autograd_tui.engine.torch_bridge.compiled import watch_compile

with watch_compile():
    pass
print("loaded" if "torch._dynamo" in sys.modules else "not loaded")
with watch_compile() as w:
    f = torch.compile(lambda x: x * 2)
    from torch._dynamo import eval_frame
    print(eval_frame._stance.stance)
print(eval_frame._stance.stance, w.note())
"""


@pytest.mark.timeout(120)
def test_dynamo_is_loaded_only_when_the_program_compiles() -> None:
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                         timeout=110)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "not loaded", "force_eager",
        "default stepped the eager graph of a torch.compile'd model: <lambda>()"]
