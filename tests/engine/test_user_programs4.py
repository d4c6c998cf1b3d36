"""Models, libraries and whole training scripts users bring (round 3), each construct
reproduced with plain torch: ``check-order --exact`` and ``torch --headless`` must say exactly
what PyTorch does, or say plainly where they cannot.

- A ``main()`` that returns what ``transformers.Trainer.train()`` returns (a ``TrainOutput``,
  a named tuple whose first item is the global step): it was read as ``(loss,
  grad_outputs)`` and refused because "its grad_outputs is a float"; now the message says
  the first item is not the loss, and that a loop that runs its backward itself leaves
  nothing to step.
- A custom ``Function`` whose backward recomputes and calls ``torch.autograd.backward``
  itself (Reformer's reversible layers): its backward passes are nested GraphTasks, stepped,
  their gradients and their order compared; check-order said nothing of them.
- transformers' ``enable_input_require_grads()`` (LoRA with gradient checkpointing): a
  module's forward hook makes the embeddings' output a leaf that requires grad; no variable
  holds it, so it was ``leaf [2, 12, 64]``; now it is named by the module that returned it.
- A forward pass that raises (XLNet in float64, in PyTorch itself): ``torch`` named the
  script's line, check-order only the file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from user_scripts import run_cli as _cli
from user_scripts import write_script as _script

torch = pytest.importorskip("torch", reason="the torch bridge needs PyTorch (pip install torch)")


pytestmark = pytest.mark.timeout(120)



TRAIN_OUTPUT = """
    from typing import NamedTuple

    import torch

    class TrainOutput(NamedTuple):  # transformers.trainer_utils.TrainOutput's fields
        global_step: int
        training_loss: float
        metrics: dict

    def main():
        torch.manual_seed(0)
        w = torch.nn.Parameter(torch.randn(3))
        for step in range(2):                  # the loop runs its own backward passes
            (w * torch.randn(3)).sum().backward()
        return TrainOutput(2, 0.5, {})
"""


@pytest.mark.parametrize("cmd", [["check-order"], ["torch", "--headless", "--quiet"]])
def test_a_trainers_train_output_is_named_not_read_as_loss_and_grad_outputs(
        tmp_path: Path, capsys, cmd: list[str]) -> None:
    code, out = _cli([cmd[0], str(_script(tmp_path, TRAIN_OUTPUT)), *cmd[1:]], capsys)
    assert code != 0
    assert "returned TrainOutput whose first item is an int, not the loss" in out
    assert "grad_outputs is a float" not in out
    assert "trainer.compute_loss(model, batch)" in out
    assert "Traceback" not in out


REVERSIBLE = """
    import torch
    from torch import nn

    class Reversible(torch.autograd.Function):
        # Reformer's _ReversibleFunction, one block: y1 = x1 + F(x2), y2 = x2 + G(y1); the
        # forward keeps no graph, the backward recomputes F and G and backwards through them
        @staticmethod
        def forward(ctx, x1, x2, f, g):
            with torch.no_grad():
                y1 = x1 + f(x2)
                y2 = x2 + g(y1)
            ctx.f, ctx.g = f, g
            ctx.save_for_backward(y1, y2)
            return y1, y2

        @staticmethod
        def backward(ctx, dy1, dy2):
            y1, y2 = ctx.saved_tensors
            with torch.enable_grad():
                y1 = y1.detach().requires_grad_()
                gy1 = ctx.g(y1)
                torch.autograd.backward(gy1, dy2)       # into G's parameters and y1
            dy1 = dy1 + y1.grad
            with torch.no_grad():
                x2 = y2 - gy1
            with torch.enable_grad():
                x2 = x2.detach().requires_grad_()
                fx2 = ctx.f(x2)
                torch.autograd.backward(fx2, dy1)       # into F's parameters and x2
            return dy1, dy2 + x2.grad, None, None

    def main():
        torch.manual_seed(0)
        f, g = nn.Sequential(nn.Linear(4, 4), nn.Tanh()), nn.Linear(4, 4)
        emb = nn.Linear(3, 8)
        h = emb(torch.randn(5, 3))
        y1, y2 = Reversible.apply(h[:, :4], h[:, 4:], f, g)
        return (y1 * y2).sum()
"""


def test_a_function_whose_backward_calls_backward_is_compared_and_said(tmp_path: Path,
                                                                       capsys) -> None:
    code, out = _cli(["check-order", str(_script(tmp_path, REVERSIBLE)), "--exact"], capsys)
    assert code == 0, out
    assert "node order: agrees" in out
    # F's and G's parameters are reached by the nested backward passes only: compared
    assert "gradients: 6 leaves agree (bitwise)" in out
    # the nested backward passes' order is compared too (engine/torch_bridge/nested.py)
    assert ("nested backward passes (called inside a node, as a reentrant checkpoint "
            "does; GraphTask 2 on): PyTorch ran 2 with 11 nodes, ours 2 with 11") in out


INPUT_REQUIRE_GRADS = """
    import torch
    from torch import nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(10, 4)
            self.proj = nn.Linear(4, 4)

        def forward(self, ids):
            return self.proj(self.embed(ids)).tanh().sum()

    def main():
        torch.manual_seed(0)
        lm = LM()
        lm.embed.weight.requires_grad_(False)       # a frozen base, as LoRA's
        # transformers' enable_input_require_grads: the embeddings' output requires grad
        # (a leaf), so that a reentrant checkpoint's input does
        lm.embed.register_forward_hook(lambda m, i, out: out.requires_grad_(True))
        return lm(torch.tensor([[1, 2, 3]]))
"""


def test_a_leaf_a_modules_hook_made_is_named_by_the_module(tmp_path: Path, capsys) -> None:
    script = str(_script(tmp_path, INPUT_REQUIRE_GRADS))
    code, out = _cli(["torch", script, "--headless", "--quiet"], capsys)
    assert code == 0, out
    # was "leaf [1, 3, 4]"; the module by the root name its parameters have (lm.proj.weight)
    assert "grad lm.embed (output): shape [1, 3, 4]" in out, out
    assert "leaf [" not in out
    code, out = _cli(["check-order", script, "--exact"], capsys)
    assert code == 0, out
    assert "gradients: 4 leaves agree (bitwise)" in out
    assert out.endswith("; 1 of them has no .grad in either run"), out  # embed.weight


DTYPE_MISMATCH = """
    import torch

    def main():
        torch.manual_seed(0)
        lin = torch.nn.Linear(3, 2).double()    # a model in float64, a float32 tensor inside
        return lin(torch.randn(4, 3)).sum()
"""


def test_check_order_names_the_scripts_line_of_a_forward_error(tmp_path: Path,
                                                                capsys) -> None:
    # XLNet in float64 fails so in PyTorch itself; `torch` said where, check-order did not
    script = str(_script(tmp_path, DTYPE_MISMATCH))
    code, out = _cli(["check-order", script], capsys)
    assert code != 0
    assert f"{script}:7: RuntimeError: mat1 and mat2 must have the same dtype" in out, out
    assert "Traceback" not in out
    code, out = _cli(["torch", script, "--headless", "--quiet"], capsys)
    assert code != 0
    assert f"{script}:7: RuntimeError: mat1 and mat2 must have the same dtype" in out, out
