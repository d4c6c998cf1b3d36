"""Constructs from programs users bring, round 2 (models and ops: torch.fft and complex
layers, ...), each reproduced with plain torch: the tool must do what PyTorch does, or say
plainly where it cannot.

- A complex scalar loss: PyTorch's backward refuses to make its implicit gradient ("only
  for real scalar outputs"); ours made ``ones_like`` of it and ran the backward.
- A complex layer's gradients (``torch.fft.rfft`` into complex weights): the summaries cast
  them to float, keeping the real parts (a ``ComplexWarning`` and a wrong norm); now each
  value is its text, ``"(1+2j)"``, and the norm is of the moduli, as ``Tensor.norm`` gives.
- Tensors the program made to require grad (``q``, ``k``, ``v`` of one shape) were named
  ``leaf [2, 4, 7, 16]``, ``leaf [2, 4, 7, 16]'``, ...: now by the program's variables.
- A script that parses its command line at import got ours; one that calls ``sys.exit``
  was "a scenario's code" in check-order.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from user_scripts import write_script as _script

torch = pytest.importorskip("torch", reason="the torch bridge needs PyTorch (pip install torch)")

from autograd_tui.commands import main  # noqa: E402

pytestmark = pytest.mark.timeout(120)



def _said(capsys) -> str:
    out = capsys.readouterr()
    return " ".join((out.out + out.err).split())


COMPLEX_LOSS = """
    import torch

    def main():
        w = torch.randn(3, dtype=torch.cfloat, requires_grad=True)
        return (w * w).sum()
"""


def test_a_complex_loss_is_refused_in_pytorchs_words(tmp_path: Path, capsys) -> None:
    path = _script(tmp_path, COMPLEX_LOSS)
    code = main(["torch", str(path), "--headless", "--quiet"])
    out = _said(capsys)
    said = "grad can be implicitly created only for real scalar outputs but got torch.complex64"
    assert code == 1 and said in out, out  # was: completed, with gradients PyTorch never makes
    assert "completed" not in out
    code = main(["check-order", str(path), "--exact"])
    out = _said(capsys)
    assert code == 1 and said in out and "Traceback" not in out, out


COMPLEX_LAYER = """
    import torch

    def main():
        torch.manual_seed(0)
        w = torch.nn.Parameter(torch.randn(5, 5, dtype=torch.cfloat))
        x = torch.randn(2, 8)
        z = torch.fft.rfft(x) @ w.t()
        return torch.fft.irfft(z, n=8).pow(2).mean() + z.imag.abs().mean()
"""


def test_complex_gradients_are_summarized_with_their_imaginary_parts(tmp_path: Path,
                                                                     capsys) -> None:
    path = _script(tmp_path, COMPLEX_LAYER)
    rec = tmp_path / "run.jsonl.gz"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's ComplexWarning: the imaginary parts dropped
        code = main(["torch", str(path), "--headless", "--quiet", "--record", str(rec)])
    out = _said(capsys)
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(5, 5, dtype=torch.cfloat))
    z = torch.fft.rfft(torch.randn(2, 8)) @ w.t()
    (torch.fft.irfft(z, n=8).pow(2).mean() + z.imag.abs().mean()).backward()
    assert code == 0, out
    assert f"grad w: shape [5, 5], norm {w.grad.norm().item():.6g}" in out, out
    code = main(["replay", str(rec), "--headless"])
    out = _said(capsys)
    first = complex(w.grad[0, 0].item())
    assert code == 0 and f"grad w = ['{first!r}', " in out, out
    assert f".grad = [{first.real:.4g}{first.imag:+.4g}j, " in out, out  # the trace: 4 digits


ARGPARSE = """
    import argparse, sys
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=3)
    args = parser.parse_args()          # at import, as training scripts do
    SEEN = list(sys.argv)

    def main():
        assert sys.argv == SEEN, sys.argv
        w = torch.ones(args.hidden, requires_grad=True)
        return (w * 2).sum()
"""


def test_a_script_that_parses_its_command_line_gets_its_defaults(tmp_path: Path,
                                                                 capsys) -> None:
    """``python train.py`` gives the script ``sys.argv == ['train.py']``; it got ours
    (``check-order train.py --exact``) and argparse exited: 'unrecognized arguments'."""
    import sys

    path = _script(tmp_path, ARGPARSE, "train.py")
    argv = list(sys.argv)
    code = main(["check-order", str(path), "--exact"])
    out = _said(capsys)
    assert code == 0 and "gradients: 1 leaves agree (bitwise)" in out, out
    assert sys.argv == argv  # ours again afterwards


EXITS = """
    import sys
    import torch

    def main():
        w = torch.ones(3, requires_grad=True)
        if len(sys.argv) < 3:
            sys.exit("usage: train.py DATA OUT")
        return w.sum()
"""


def test_check_order_says_the_script_called_sys_exit(tmp_path: Path, capsys) -> None:
    """It said "a scenario's code called sys.exit(...)": the script's, in the torch
    command's words."""
    code = main(["check-order", str(_script(tmp_path, EXITS)), "--exact"])
    out = _said(capsys)
    assert code == 1, out
    assert "model.py: the script called sys.exit('usage: train.py DATA OUT')" in out, out


QKV = """
    import torch

    SCALE = torch.tensor(0.5, requires_grad=True)   # a global leaf

    def attend(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    def main():
        torch.manual_seed(0)
        q, k, v = (torch.randn(1, 2, 5, 4, requires_grad=True) for _ in range(3))
        t = torch.randn(1, 2, 5, 4, requires_grad=True)
        t = t * 2                                   # rebound: no variable holds the leaf
        return (attend(q, k, v) * SCALE).pow(2).sum() + t.sum()
"""


def test_leaves_the_program_made_are_named_by_its_variables(tmp_path: Path, capsys) -> None:
    path = _script(tmp_path, QKV)
    code = main(["torch", str(path), "--headless", "--quiet"])
    out = _said(capsys)
    assert code == 0, out
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 4, requires_grad=True) for _ in range(3))
    t = torch.randn(1, 2, 5, 4, requires_grad=True)
    scale = torch.tensor(0.5, requires_grad=True)
    loss = (torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            * scale).pow(2).sum() + (t * 2).sum()
    loss.backward()
    for name, x in (("q", q), ("k", k), ("v", v), ("SCALE", scale),
                    ("leaf [1, 2, 5, 4]", t)):
        assert f"grad {name}: shape {list(x.shape)}, norm {x.grad.norm().item():.6g}" in out, (
            name, out)
    code = main(["check-order", str(path), "--exact"])
    out = _said(capsys)
    assert code == 0 and "gradients: 5 leaves agree (bitwise)" in out, out


UNSTABLE = """
    import torch

    CALLS = [0]

    class Wobble(torch.autograd.Function):   # a backward whose last bits vary by call
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def backward(ctx, g):
            CALLS[0] += 1
            return g * (3 + 1e-6 * CALLS[0])

    def main():
        w = torch.ones(4, requires_grad=True)
        return Wobble.apply(w).sum()
"""


@pytest.mark.parametrize("cbwr", [None, "AVX2,STRICT"])
def test_check_order_exact_names_mkls_reproducibility_switch(tmp_path: Path, capsys,
                                                             monkeypatch, cbwr) -> None:
    """maxvit_t's gradients differed in a few last bits, from MKL's run-to-run results;
    with MKL_CBWR=AVX2,STRICT they agreed bit for bit: --exact says so where it applies."""
    if cbwr is None:
        monkeypatch.delenv("MKL_CBWR", raising=False)
    else:
        monkeypatch.setenv("MKL_CBWR", cbwr)
    code = main(["check-order", str(_script(tmp_path, UNSTABLE)), "--exact"])
    out = _said(capsys)
    assert code == 1 and "gradients differ (bitwise)" in out, out
    said = "run with MKL_CBWR=AVX2,STRICT in the environment" in out
    assert said == (cbwr is None and torch.backends.mkl.is_available()), out
