"""Autograd APIs and training constructs from programs users bring (round 2), each reproduced
with plain torch: ``check-order --exact``, ``torch --headless`` and the recording must say
exactly what PyTorch does, or say plainly where they cannot.

- Several roots (``torch.autograd.backward([a, b, c], [ga, gb, gc])``): both engines run a
  ``GraphRoot`` first, but PyTorch's has no Python node to hook, so check-order compared
  ours (with it) against PyTorch's (without it) and reported a difference at node 1.
- A forward pass that raises, with ``--record``: the recording held 0 events (nothing to
  replay, and replay did not even say why); now no file is written, and the output says so.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the torch bridge needs PyTorch (pip install torch)")

from autograd_tui.commands import main  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def _script(tmp_path: Path, body: str, name: str = "model.py") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


def _cli(args: list[str], capsys) -> tuple[int, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, " ".join((out.out + out.err).split())


SEVERAL_ROOTS = """
    import torch
    from torch import nn

    def main():
        torch.manual_seed(0)
        enc, h1 = nn.Linear(3, 4), nn.Linear(4, 2)
        z = torch.tanh(enc(torch.randn(2, 3)))
        a = h1(z).pow(2).mean()
        c = z.sum(0)                                   # a non-scalar root
        return [a, c], [torch.tensor(1.0), torch.linspace(-1, 1, 4)]
"""


def test_several_roots_agree_without_pytorchs_hidden_graph_root(tmp_path: Path,
                                                                 capsys) -> None:
    code, out = _cli(["check-order", str(_script(tmp_path, SEVERAL_ROOTS)), "--exact"],
                     capsys)
    assert "node order: agrees" in out, out
    assert "GraphRoot" not in out, out
    assert "leaves agree (bitwise)" in out, out
    assert code == 0, out


FORWARD_RAISES = """
    import torch
    from torch import nn

    def main():
        net = nn.Linear(4, 3)
        return net(torch.randn(2, 5)).sum()
"""


def test_a_forward_that_raises_writes_no_empty_recording(tmp_path: Path, capsys) -> None:
    rec = tmp_path / "run.jsonl.gz"
    code, out = _cli(["torch", str(_script(tmp_path, FORWARD_RAISES)), "--headless",
                      "--quiet", "--record", str(rec)], capsys)
    assert code == 1, out
    assert not rec.exists()
    assert "error in the script RuntimeError: mat1 and mat2 shapes cannot be multiplied" in out
    assert "no recording written to" in out and "nothing to replay" in out, out
    assert "recorded 0 events" not in out and "Traceback" not in out, out
