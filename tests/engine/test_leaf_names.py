"""How the torch bridge names a program's leaves (``naming.py``'s rule), on the programs
where the names were found wrong: the name is the program's own variable, or the path
from the variable that holds the thing as a part, never a loop's or a comprehension's
variable while another holds it.

- ``for p in params`` under ``no_grad`` (a manual SGD step): the bias ``bf`` was ``p``;
- heads of a ``ModuleList`` called in a comprehension: ``hd.weight``, ``hd'.weight``, ...;
- coupling layers of a ``ModuleList`` called in a loop: ``c''.s.2.weight`` (``flow.2``);
- two models in a plain list: ``Sequential.2.weight`` and ``Sequential'.2.weight``;
- blocks of a model called one by one in a loop: ``blk``, ``blk'``, ... (``model.blocks.1``);
- one model beside a leaf of the program's own (a hypernetwork and its task embedding):
  ``2.weight`` beside ``task``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from user_scripts import write_script

torch = pytest.importorskip("torch", reason="the torch bridge needs PyTorch (pip install torch)")

from autograd_tui.engine.torch_bridge import run_program  # noqa: E402
from autograd_tui.engine.torch_bridge.naming import loop_names  # noqa: E402
from autograd_tui.session.torch_script import check_order, load_entry  # noqa: E402

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("no_thread_left")]


def _names(tmp_path: Path, body: str) -> list[str]:
    entry, _ = load_entry(str(write_script(tmp_path, body)))
    grads = run_program(entry)
    return sorted([*grads, *grads.no_grad])


def test_a_leaf_updated_in_a_loop_is_named_by_its_own_variable(tmp_path: Path) -> None:
    names = _names(tmp_path, """
        import torch

        def main():
            torch.manual_seed(0)
            w = torch.randn(3, 2, requires_grad=True)
            bf = torch.zeros(2, requires_grad=True)
            params = [w, bf]
            x = torch.randn(4, 3)

            def forward(x):  # w and bf become cells of main: after its plain locals
                return x @ w + bf

            for step in range(2):
                loss = forward(x).pow(2).sum()
                if step == 1:
                    return loss
                loss.backward()
                with torch.no_grad():
                    for p in params:
                        p -= 0.1 * p.grad
                        p.grad.zero_()
    """)
    assert names == ["bf", "w"]


def test_modulelist_heads_called_in_a_comprehension(tmp_path: Path) -> None:
    names = _names(tmp_path, """
        import torch
        from torch import nn

        def main():
            torch.manual_seed(0)
            trunk = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
            heads = nn.ModuleList([nn.Linear(4, 1), nn.Linear(4, 1)])
            h = trunk(torch.randn(5, 3))
            return sum(hd(h).sum() for hd in heads)
    """)
    assert names == ["heads.0.bias", "heads.0.weight", "heads.1.bias", "heads.1.weight",
                     "trunk.0.bias", "trunk.0.weight"]


def test_modulelist_layers_called_in_a_for_loop(tmp_path: Path) -> None:
    names = _names(tmp_path, """
        import torch
        from torch import nn

        class Coupling(nn.Module):
            def __init__(self):
                super().__init__()
                self.s = nn.Sequential(nn.Linear(2, 2), nn.Tanh())

            def forward(self, x):
                return x * torch.exp(self.s(x))

        def main():
            torch.manual_seed(0)
            flow = nn.ModuleList([Coupling(), Coupling()])
            z = torch.randn(3, 2)
            for c in flow:
                z = c(z)
            return z.sum()
    """)
    assert names == ["flow.0.s.0.bias", "flow.0.s.0.weight",
                     "flow.1.s.0.bias", "flow.1.s.0.weight"]


def test_blocks_of_a_model_called_one_by_one_are_named_by_their_path(tmp_path: Path) -> None:
    """The model is never called: its blocks and head are, from a loop (``blk``, ``blk'``
    and ``blk''`` before); each is named by its path from the model the program holds."""
    names = _names(tmp_path, """
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
                self.head = nn.Linear(2, 1)

        def main():
            torch.manual_seed(0)
            model = Net()
            h = torch.randn(3, 2)
            for blk in model.blocks:
                h = torch.tanh(blk(h))
            return model.head(h).sum()
    """)
    assert names == [f"model.blocks.{i}.{w}" for i in range(3) for w in ("bias", "weight")] \
        + ["model.head.bias", "model.head.weight"]


def test_models_in_a_plain_list(tmp_path: Path) -> None:
    names = _names(tmp_path, """
        import torch
        from torch import nn

        def main():
            torch.manual_seed(0)
            nets = [nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
                    for _ in range(2)]
            x = torch.randn(4, 2)
            return nets[0](x).sum() + nets[1](x).pow(2).sum()
    """)
    assert names == [f"nets.{i}.{j}.{w}" for i in (0, 1) for j in (0, 2)
                     for w in ("bias", "weight")]


def test_a_model_beside_a_leaf_of_the_program_is_prefixed(tmp_path: Path) -> None:
    names = _names(tmp_path, """
        import torch
        from torch import nn

        def main():
            torch.manual_seed(0)
            task = nn.Parameter(torch.randn(4))
            hyper = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
            return hyper(task).pow(2).sum()
    """)
    assert names == ["hyper.0.bias", "hyper.0.weight", "hyper.2.bias", "hyper.2.weight",
                     "task"]


def test_a_model_alone_keeps_torchs_names_and_a_nameless_one_its_type(tmp_path: Path) -> None:
    """One model and nothing else: ``named_parameters()``' names, as the student's own
    ``model.named_parameters()`` prints them; two models no variable holds: by type."""
    assert _names(tmp_path, """
        import torch
        from torch import nn

        def main():
            model = nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 1))
            return model(torch.randn(3, 2)).sum()
    """) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    assert _names(tmp_path, """
        import torch
        from torch import nn

        def main():
            x = torch.randn(3, 2)
            return nn.Linear(2, 1)(x).sum() + nn.Linear(2, 1)(x).sum()
    """) == ["Linear'.bias", "Linear'.weight", "Linear.bias", "Linear.weight"]


def test_check_order_names_leaves_alike(tmp_path: Path) -> None:
    """check-order ("gradients differ at NAME") reads the same names."""
    entry, _ = load_entry(str(write_script(tmp_path, """
        import torch
        from torch import nn

        def main():
            torch.manual_seed(0)
            heads = nn.ModuleList([nn.Linear(2, 1), nn.Linear(2, 1)])
            x = torch.randn(3, 2)
            return sum(hd(x).sum() for hd in heads)
    """)))
    res = check_order(entry)
    assert sorted(res.grads) == ["heads.0.bias", "heads.0.weight", "heads.1.bias",
                                 "heads.1.weight"]


def test_loop_names_reads_for_targets_and_comprehensions() -> None:
    def f(xs: list[tuple[int, tuple[int, int]]]) -> int:
        total = 0
        for i, (a, b) in xs:
            total += i + a + b
        return total

    assert loop_names(f.__code__) == {"i", "a", "b"}
    gen = (y for y in range(3))  # a generator expression has a frame of its own
    assert "y" in loop_names(gen.gi_code)
    gen.close()


def test_temporary_models_do_not_take_each_others_names(tmp_path: Path) -> None:
    """A model made and called in one expression is freed after its call (the graph keeps
    only its parameters), so the next one may get its ``id()``: capture keeps each model
    it named, or the second was taken for the first (``Linear'.bias'``, two
    models under one name; 6 of 30 runs of two, with ten in a loop every time)."""
    names = _names(tmp_path, """
        import torch
        from torch import nn

        def main():
            x = torch.randn(3, 2)
            loss = 0
            for _ in range(10):
                loss = loss + nn.Linear(2, 1)(x).sum()
            return loss
    """)
    # ten models, each its own name: Linear, Linear', ..., never two in one (Linear'.bias')
    primes = ["'" * i for i in range(10)]
    assert sorted(names) == sorted(f"Linear{q}.{p}" for q in primes
                                   for p in ("bias", "weight")), names
