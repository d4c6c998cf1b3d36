"""Constructs from programs users bring (torchvision, transformers, training loops), each
reproduced with plain torch: ``check-order --exact`` and the gradient summary must say
exactly what PyTorch does.

- A program that runs a backward of its own first (an auxiliary loss with
  ``retain_graph=True``, gradient accumulation): PyTorch's ``AccumulateGrad`` adds into the
  existing ``.grad`` in place, so check-order must start PyTorch's run from a copy of it, not
  from the tensor our run has just added into.
- A model whose submodules the program calls one by one (``m.layer1(h)``, torchvision's
  resnet stepped by hand around ``checkpoint``): each is named by its path from the
  program's variable (``m.layer1.0.weight``); by type, the layers were one name and the
  summary lost three of them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from user_scripts import write_script as _script

torch = pytest.importorskip("torch", reason="the torch bridge needs PyTorch (pip install torch)")

from autograd_tui.commands import main  # noqa: E402
from autograd_tui.session.run import Run  # noqa: E402
from autograd_tui.session.torch_script import load_entry, script_scenario  # noqa: E402

pytestmark = pytest.mark.timeout(120)



def _check_order(path: Path, capsys) -> tuple[int, str]:
    code = main(["check-order", str(path), "--exact"])
    out = capsys.readouterr()
    return code, " ".join((out.out + out.err).split())


AUX_FIRST = """
    import torch
    from torch import nn

    def main():
        torch.manual_seed(0)
        net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                            nn.Linear(4 * 4 * 4, 3))
        out = net(torch.randn(2, 3, 6, 6))
        out.pow(2).mean().backward(retain_graph=True)   # an auxiliary loss, first
        return nn.functional.cross_entropy(out, torch.tensor([0, 2]))
"""


def test_a_program_that_ran_a_backward_first_agrees_to_the_bit(tmp_path: Path, capsys) -> None:
    code, out = _check_order(_script(tmp_path, AUX_FIRST), capsys)
    assert "node order: agrees" in out, out
    assert "gradients: 6 leaves agree (bitwise)" in out, out  # was: every leaf ~2x off
    assert code == 0


def test_check_order_leaves_the_grads_as_pytorch_makes_them(tmp_path: Path) -> None:
    """After check-order, each .grad is the auxiliary loss's plus the returned loss's, once."""
    from autograd_tui.session.torch_script import check_order

    entry, mod = load_entry(str(_script(tmp_path, AUX_FIRST)))
    res = check_order(entry, exact=True, namespace=vars(mod))
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4),
                              torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(64, 3))
    out = net(torch.randn(2, 3, 6, 6))
    out.pow(2).mean().backward(retain_graph=True)
    torch.nn.functional.cross_entropy(out, torch.tensor([0, 2])).backward()
    want = dict(net.named_parameters())
    assert res.agrees and len(res.grads) == 6
    for name, (theirs, ours) in res.grads.items():
        assert torch.equal(theirs, want[name].grad), name
        assert torch.equal(ours, want[name].grad), name


LAYERS = """
    import torch
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    def block(n):
        return nn.Sequential(nn.Linear(n, n), nn.BatchNorm1d(n), nn.ReLU())

    class Net(nn.Module):          # torchvision's resnet: layer1..layer3, all Sequential
        def __init__(self):
            super().__init__()
            self.stem = nn.Linear(5, 6)
            self.layer1, self.layer2, self.layer3 = block(6), block(6), block(6)
            self.fc = nn.Linear(6, 2)

    def main():
        torch.manual_seed(0)
        m = Net()
        h = m.stem(torch.randn(4, 5))
        h = m.layer1(h)
        h = checkpoint(m.layer2, h, use_reentrant={reentrant})
        h = m.layer3(h)
        return m.fc(h).sum()
"""


@pytest.mark.parametrize("reentrant", [True, False])
def test_submodules_called_one_by_one_keep_every_gradient(tmp_path: Path, capsys,
                                                          reentrant: bool) -> None:
    path = _script(tmp_path, LAYERS.format(reentrant=reentrant))
    with Run(script_scenario(str(path))) as run:
        run.run()
        assert run.error is None
        grads = run.gradients()
    names = {f"m.{layer}.{i}.{w}" for layer in ("layer1", "layer2", "layer3")
             for i in (0, 1) for w in ("weight", "bias")}
    names |= {"m.stem.weight", "m.stem.bias", "m.fc.weight", "m.fc.bias"}
    assert set(grads) == names  # by type, the three layers were one name: 12 lost
    code, out = _check_order(path, capsys)
    assert "gradients: 16 leaves agree (bitwise)" in out, out
    assert code == 0


OPT_IN_BACKWARD = """
    import torch
    from torch import nn

    def main():       # PyTorch's tutorial: the optimizer step fused into the backward
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
        opts = {p: torch.optim.SGD([p], lr=0.1) for p in net.parameters()}

        def step(p):
            opts[p].step()
            opts[p].zero_grad()

        for p in net.parameters():
            p.register_post_accumulate_grad_hook(step)
        return net(torch.randn(3, 4)).sum()
"""


def test_an_optimizer_step_in_backward_is_not_called_unreached(tmp_path: Path) -> None:
    path = _script(tmp_path, OPT_IN_BACKWARD)
    with Run(script_scenario(str(path))) as run:
        run.run()
        assert run.error is None
        assert run.gradients() == {}  # every .grad None afterwards, as in PyTorch
        why = run.footer()["no_gradient"]
    assert sorted(why) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    assert all(w.startswith("its gradient was accumulated, then .grad set to None")
               for w in why.values()), why


def test_check_order_compares_an_optimizer_in_backward_on_a_fresh_forward(
        tmp_path: Path, capsys) -> None:
    # it said it could not (one forward pass for both); seeded, PyTorch's now runs on a
    # fresh one (a model built in main(): new parameters) and each stepped value is compared
    code, out = _check_order(_script(tmp_path, OPT_IN_BACKWARD), capsys)
    assert "note: the program steps its optimizer in the backward" in out, out
    assert "gradients: 4 leaves agree (bitwise)" in out and "Traceback" not in out, out
    assert code == 0, out


def test_a_module_run_while_the_model_is_built_names_its_parameters_by_the_model(
        tmp_path: Path) -> None:
    """spectral_norm runs its parametrization at construction, inside main(): its
    parameter was named ``ParametrizationList.original`` and every other one got a
    ``net.`` prefix, as if the program called two models."""
    path = _script(tmp_path, """
        import torch
        from torch import nn
        from torch.nn.utils import parametrizations as P

        def main():
            torch.manual_seed(0)
            net = nn.Sequential(P.spectral_norm(nn.Linear(3, 4)), nn.Tanh(), nn.Linear(4, 1))
            return net(torch.randn(2, 3)).sum()
        """)
    with Run(script_scenario(str(path))) as run:
        run.run()
        assert run.error is None
        names = sorted(run.gradients())
    assert names == ["0.bias", "0.parametrizations.weight.original", "2.bias", "2.weight"]


SPARSE = """
    import torch
    from torch import nn

    def main():
        torch.manual_seed(0)
        emb, lin = nn.Embedding(20, 4, sparse=True), nn.Linear(4, 1)
        return lin(emb(torch.tensor([[1, 2, 3], [4, 5, 1]]))).sum()
"""


def test_a_big_sparse_gradient_steps_summarised_without_densifying(
        tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    # a small one is densified for the views (tests/engine/test_bridge_leftovers.py); one
    # bigger than SPARSE_SHOWN is summarised from its values (tests/engine/
    # test_leftovers3.py), here made "big" by lowering the limit to 16
    from autograd_tui.engine.torch_bridge import convert

    monkeypatch.setattr(convert, "SPARSE_SHOWN", 16)
    path = _script(tmp_path, SPARSE)
    code = main(["torch", str(path), "--headless", "--quiet"])
    out = " ".join(capsys.readouterr().out.split())
    torch.manual_seed(0)
    emb, lin = torch.nn.Embedding(20, 4, sparse=True), torch.nn.Linear(4, 1)
    lin(emb(torch.tensor([[1, 2, 3], [4, 5, 1]]))).sum().backward()
    norm = float(emb.weight.grad.to_dense().double().norm())
    assert code == 0, out
    assert f"grad emb.weight: shape [20, 4], norm {norm:.6g}" in out, out
    code, out = _check_order(path, capsys)
    assert code == 0 and "Traceback" not in out, out


RETURNS = """
    import torch
    from torch import nn

    def main():
        torch.manual_seed(0)
        net = nn.Linear(4, 3)
        logits = net(torch.randn(2, 4))
        loss = nn.functional.cross_entropy(logits, torch.tensor([0, 2]))
        return {ret}
"""


@pytest.mark.parametrize("ret, said", [
    # ours ran this backward and PyTorch's refused it: now both refuse, in PyTorch's words
    ("loss, logits", "Mismatch in shape: grad_output[0] has a shape of torch.Size([2, 3]) "
                     "and output[0] has a shape of torch.Size([])."),
    ("loss, logits.argmax(1).float().mean().item()", "its grad_outputs is a float, not a "
                                                     "tensor or a sequence of tensors"),
])
def test_a_tuple_that_is_not_loss_and_grad_outputs_is_said_plainly(
        tmp_path: Path, capsys, ret: str, said: str) -> None:
    path = _script(tmp_path, RETURNS.format(ret=ret))
    code = main(["torch", str(path), "--headless", "--quiet"])
    o = capsys.readouterr()  # before the backward: said on stderr, no summary on stdout
    out = " ".join(o.err.split())
    assert code == 1 and said in out and o.out == "", (out, o.out)
    assert "return a dict such as {'loss': loss, 'logits': logits}" in out
    code, out = _check_order(path, capsys)
    assert code == 1 and said in out and "Traceback" not in out, out


def test_a_dict_with_more_than_the_loss_steps(tmp_path: Path, capsys) -> None:
    path = _script(tmp_path, RETURNS.format(ret="{'loss': loss, 'logits': logits}"))
    code, out = _check_order(path, capsys)
    assert code == 0 and "gradients: 2 leaves agree (bitwise)" in out, out


MAML = """
    import torch
    from torch import nn
    from torch.func import functional_call

    def main():        # MAML: one inner step with create_graph, the outer loss
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)).double()
        params = dict(net.named_parameters())
        x, y = torch.randn(5, 3, dtype=torch.float64), torch.randn(5, 1, dtype=torch.float64)
        inner = nn.functional.mse_loss(functional_call(net, params, (x,)), y)
        grads = torch.autograd.grad(inner, list(params.values()), create_graph=True)
        fast = {k: v - 0.1 * g for (k, v), g in zip(params.items(), grads)}
        return nn.functional.mse_loss(functional_call(net, fast, (x * 2,)), y)
"""


def test_functional_call_with_adapted_weights_compares_the_real_parameters(
        tmp_path: Path, capsys) -> None:
    """The adapted weights (not leaves) took the parameters' names: check-order compared
    their .grad (None against None: "agree") instead of the parameters', and the summary
    said each parameter had a gradient and was not reached."""
    path = _script(tmp_path, MAML)
    code, out = _check_order(path, capsys)
    assert code == 0 and "gradients: 4 leaves agree (bitwise); closest: " in out, out
    assert "not a leaf Tensor" not in out  # no .grad read of a non-leaf: PyTorch's warning
    with Run(script_scenario(str(path))) as run:
        run.run()
        assert run.error is None
        assert sorted(run.gradients()) == ["0.bias", "0.weight", "2.bias", "2.weight"]
        assert run.no_grad == {}


def test_check_order_says_how_many_leaves_had_no_gradient_to_compare(tmp_path: Path,
                                                                      capsys) -> None:
    """Fine-tuning a head: the frozen leaves agree only vacuously (None and None)."""
    path = _script(tmp_path, """
        import torch
        from torch import nn

        def main():
            torch.manual_seed(0)
            net = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
            net[0].requires_grad_(False)
            return net(torch.randn(3, 4)).sum()
        """)
    code, out = _check_order(path, capsys)
    assert code == 0 and "gradients: 4 leaves agree (bitwise); closest: " in out, out
    assert out.endswith("; 2 of them have no .grad in either run"), out


def test_replay_reexecute_finds_the_scripts_sibling_module(tmp_path: Path, capsys) -> None:
    """`torch` puts the script's folder on sys.path; `replay --reexecute --scenario` did
    not, so a script importing a helper beside it failed there ("No module named")."""
    (tmp_path / "helper.py").write_text("from torch import nn\n\n"
                                        "def net():\n    return nn.Linear(3, 2)\n")
    path = _script(tmp_path, """
        import torch
        import helper

        def main():
            torch.manual_seed(0)
            return helper.net()(torch.randn(4, 3)).pow(2).sum()
        """)
    rec = tmp_path / "run.jsonl.gz"
    assert main(["torch", str(path), "--headless", "--quiet", "--record", str(rec)]) == 0
    capsys.readouterr()
    sys.modules.pop("helper", None)  # as a new process starts: the helper not yet imported
    code = main(["replay", str(rec), "--headless", "--reexecute", "--scenario", str(path)])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0 and "identical to the recording" in out, out


def test_a_second_backward_of_a_kept_graph_is_stepped(tmp_path: Path, capsys) -> None:
    """loss.backward(retain_graph=True), then return loss: PyTorch runs the second backward
    (adding to the first's .grad); `torch` refused it as a backward the program ran itself,
    while check-order compared it."""
    path = _script(tmp_path, """
        import torch
        from torch import nn

        def main():
            torch.manual_seed(0)
            net = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 1))
            loss = net(torch.randn(3, 4)).pow(2).mean()
            loss.backward(retain_graph=True)
            return loss
        """)
    with Run(script_scenario(str(path))) as run:
        run.run()
        assert run.error is None
        grads = run.gradients()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 1))
    loss = net(torch.randn(3, 4)).pow(2).mean()
    loss.backward(retain_graph=True)
    loss.backward()
    for name, p in net.named_parameters():
        assert torch.equal(torch.from_numpy(grads[name]), p.grad), name  # both backwards
    code, out = _check_order(path, capsys)
    assert code == 0 and "gradients: 4 leaves agree (bitwise)" in out, out
