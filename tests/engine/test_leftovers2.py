"""Leftovers of the torch bridge and its commands, round 2 (plain torch, each test a second
or two):

1. A nested graph's nodes (a reentrant checkpoint's recomputed forward, a reversible
   block's backward that calls its modules again, as Reformer's) had no module, while the
   outer graph's had theirs: the module hooks watched the forward pass only.  Now the
   module calls a bridged backward makes are noted too (``recompute.py``), with the paths
   the forward pass gave those modules.
2. Module paths and parameter names differed for one model: a model held as ``enc`` (an
   ``nn.Sequential``) beside a leaf of the program's had modules ``0``, ``1`` and
   parameters ``enc.0.bias``.  Now its modules are ``enc.0``, ``enc.1``; a model alone
   keeps torch's names for both.
4. A warning a hook raised with ``stacklevel=2`` was shown at our engine's line
   (``engine/torch_bridge/hooks.py``), where plain PyTorch shows its own call into the C++
   engine (``torch/autograd/graph.py``).  Now each warning of the backward is shown where
   plain PyTorch shows it (the test compares the two runs of one script).
5. A model held only as an object's attribute (a trainer's ``self.net``) was named by its
   type (``Net.fc.weight``).  Now by the attribute: ``trainer.net.fc.weight``, or
   ``net.fc.weight`` where only the method's ``self`` holds it.
6. The MKL note (PyTorch's CPU kernels may differ in the last bits between runs) was said
   by ``check-order --exact`` only; ``replay --reexecute`` of a PyTorch program compares
   values bit for bit too, and its divergence said nothing of it.  Now both say it (one
   text); ``torch --headless`` compares nothing, so has no note.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from user_scripts import WOBBLE, run_cli, write_script

torch = pytest.importorskip("torch", reason="the torch bridge needs PyTorch (pip install torch)")

pytestmark = pytest.mark.timeout(120)


NESTED = """
    import torch
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    class Rev(torch.autograd.Function):     # a reversible block: recomputes in backward
        @staticmethod
        def forward(ctx, x, f):
            ctx.f = f
            ctx.save_for_backward(x)
            with torch.no_grad():
                return x + f(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with torch.enable_grad():
                x = x.detach().requires_grad_()
                torch.autograd.backward(x + ctx.f(x), g)
            return x.grad, None

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.pre = nn.Linear(3, 3)
            self.enc = nn.Sequential(nn.Linear(3, 3), nn.Tanh())
            self.rev = nn.Sequential(nn.Linear(3, 3), nn.ReLU())

        def forward(self, x):
            h = checkpoint(self.enc, self.pre(x), use_reentrant=True)
            return Rev.apply(h, self.rev)

    def main():
        torch.manual_seed(0)
        model = Net()
        return model(torch.randn(2, 3)).sum()
"""


def test_a_nested_graphs_nodes_have_their_modules(tmp_path: Path, capsys) -> None:
    code, out = run_cli(["torch", str(write_script(tmp_path, NESTED)), "--headless"], capsys)
    assert code == 0, out
    # GraphTask 2: the reversible block's backward; 3: the checkpoint's recompute
    for node in ("GT2 meta ReluBackward0#10 in rev.1 (ReLU)",
                 "GT2 meta AddmmBackward0#11 in rev.0 (Linear)",
                 "GT2 meta TBackward0#13 in rev.0 (Linear)",
                 "GT3 meta TanhBackward0#15 in enc.1 (Tanh)",
                 "GT3 meta AddmmBackward0#16 in enc.0 (Linear)",
                 "GT3 meta TBackward0#19 in enc.0 (Linear)"):
        assert node in out, out


HELD = """
    import torch
    from torch import nn

    def main():
        torch.manual_seed(0)
        enc = nn.Sequential(nn.Linear(3, 3), nn.Tanh())
        x = torch.randn(2, 3, requires_grad=True)
        return enc(x).sum()
"""


def test_module_paths_have_the_root_name_of_the_parameters(tmp_path: Path, capsys) -> None:
    code, out = run_cli(["torch", str(write_script(tmp_path, HELD)), "--headless"], capsys)
    assert code == 0, out
    # a leaf beside the model: its parameters are enc.0.*, so its modules are enc.0, enc.1
    assert "meta TanhBackward0#2 in enc.1 (Tanh)" in out, out
    assert "meta AddmmBackward0#3 in enc.0 (Linear)" in out, out
    assert "in enc.0 (Linear), param enc.0.bias" in out, out
    assert " in 0 (Linear)" not in out and " in 1 (Tanh)" not in out, out
    # the model alone: torch's own names for both
    alone = HELD.replace("requires_grad=True", "requires_grad=False")
    code, out = run_cli(["torch", str(write_script(tmp_path, alone)), "--headless"], capsys)
    assert code == 0, out
    assert "meta TanhBackward0#2 in 1 (Tanh)" in out, out
    assert "in 0 (Linear), param 0.bias" in out, out


WARNS = """
    import warnings
    import torch

    class Noisy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            warnings.warn("noisy backward")                 # at this line
            warnings.warn("noisy backward, up", stacklevel=2)  # at its caller: torch's
            return g * 2

    def hook(g):
        warnings.warn("noisy hook")
        warnings.warn("noisy hook, up", stacklevel=2)    # its caller: PyTorch's engine call
        return g

    def main():
        x = torch.randn(3, requires_grad=True)
        y = Noisy.apply(x)
        y.register_hook(hook)
        return y.sum()
"""


def test_a_warning_in_the_backward_is_shown_where_pytorchs_is(tmp_path: Path, capsys) -> None:
    import runpy
    import warnings

    script = write_script(tmp_path, WARNS)

    def shown(run) -> list[tuple[str, str, int]]:
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            run()
        return sorted((str(w.message), w.filename, w.lineno) for w in got
                      if str(w.message).startswith("noisy"))

    theirs = shown(lambda: runpy.run_path(str(script))["main"]().backward())
    ours = shown(lambda: run_cli(["torch", str(script), "--headless", "--quiet"], capsys))
    assert len(theirs) == 4 and ours == theirs, (ours, theirs)
    assert not any("/engine/" in f for _, f, _ in ours), ours


TRAINER = """
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            return self.fc(x)

    class Trainer:
        def __init__(self):
            self.net = Net()

        def step(self, x):
            return self.net(x).sum()

    def main():
        torch.manual_seed(0)
        x = torch.randn(4, 3, requires_grad=True)
        HELD
"""


@pytest.mark.parametrize("held, name", [
    ("trainer = Trainer()\n        return trainer.step(x)", "trainer.net"),
    ("return Trainer().step(x)", "net"),  # only the method's self holds it
])
def test_a_model_held_by_an_objects_attribute_is_named_by_it(tmp_path: Path, capsys,
                                                             held: str, name: str) -> None:
    script = write_script(tmp_path, TRAINER.replace("HELD", held))
    code, out = run_cli(["torch", str(script), "--headless"], capsys)
    assert code == 0, out
    for param in ("fc.weight", "fc.bias"):
        assert f"grad {name}.{param}: shape" in out, out
    assert f"in {name}.fc (Linear), param {name}.fc.bias" in out, out
    assert "Net." not in out, out


@pytest.mark.parametrize("cbwr", [None, "AVX2,STRICT"])
def test_a_reexecuted_torch_program_that_diverges_names_mkls_switch(
        tmp_path: Path, capsys, monkeypatch, cbwr: str | None) -> None:
    """replay --reexecute compares a PyTorch program's values bit for bit, as check-order
    --exact does: where they differ it says what MKL may do, as check-order says."""
    script, rec = write_script(tmp_path, WOBBLE), tmp_path / "wobble.jsonl.gz"
    monkeypatch.delenv("WOBBLE", raising=False)
    code, _ = run_cli(["torch", str(script), "--headless", "--quiet", "--record", str(rec)],
                      capsys)
    assert code == 0
    monkeypatch.setenv("WOBBLE", "1")
    if cbwr is None:
        monkeypatch.delenv("MKL_CBWR", raising=False)
    else:
        monkeypatch.setenv("MKL_CBWR", cbwr)
    code, out = run_cli(["replay", str(rec), "--reexecute", "--scenario", str(script)], capsys)
    assert code == 1 and "diverged at event" in out, out
    said = "run with MKL_CBWR=AVX2,STRICT in the environment" in out
    assert said == (cbwr is None and torch.backends.mkl.is_available()), out
