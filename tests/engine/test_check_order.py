"""``check-order``'s comparison: tolerances by dtype as ``torch.testing.assert_close``,
``--exact``, float16/bfloat16/autocast models, and ``torch.compile``'d ones."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="check-order needs PyTorch (pip install torch)")

from autograd_tui.commands import main  # noqa: E402
from autograd_tui.session.grad_compare import compare  # noqa: E402
from autograd_tui.session.torch_script import OrderCheck  # noqa: E402

pytestmark = pytest.mark.timeout(300)

MODEL = """
import torch
from torch import nn

def main():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3))
    x = torch.randn(5, 6)
    {body}
"""


def check(tmp_path: Path, capsys, body: str, *args: str, top: str = "") -> tuple[int, str]:
    script = tmp_path / "model.py"
    script.write_text(textwrap.dedent(top) + MODEL.format(body=body))
    code = main(["check-order", str(script), *args])
    out = capsys.readouterr()
    return code, " ".join((out.out + out.err).split())  # the console wraps long lines


def _check(grads: dict, exact: bool = False) -> OrderCheck:
    return OrderCheck([("A", 1)], [("A", 1)], grads, exact)


def test_a_near_zero_gradient_off_by_1e300_relative_agrees() -> None:
    t = torch.tensor([0.0, 1e-300, 2.0], dtype=torch.float64)
    o = torch.tensor([1e-310, 2e-300, 2.0], dtype=torch.float64)
    res = _check({"w": (t, o)})
    assert res.agrees and res.grad_differences() == []
    assert not _check({"w": (t, o)}, exact=True).agrees  # but not the same bits


def test_a_real_difference_names_the_worst_element_with_both_values() -> None:
    t = torch.zeros(2, 3)
    o = t.clone()
    o[1, 2] = 0.5
    o[0, 1] = 1e-6  # within atol
    res = _check({"fc.weight": (t, o)})
    assert not res.agrees
    msg = res.grad_differences()[0]
    assert msg.startswith("1 of 6 elements differ; worst fc.weight[1, 2]: PyTorch 0.0, ours 0.5")
    assert "abs diff 0.5" in msg and "float32 rtol 1.3e-06, atol 1e-05" in msg


def test_tolerances_by_dtype_and_nans() -> None:
    e = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare("x", e, torch.tensor([1.0, float("nan"), float("inf")])).ok
    assert not compare("x", e, torch.tensor([1.0, 0.0, float("inf")])).ok
    h = torch.tensor([1.0], dtype=torch.float16)
    assert compare("h", h, h + 5e-4).ok and not compare("h", h, h + 4e-3).ok
    b = torch.tensor([1.0], dtype=torch.bfloat16)
    w = compare("b", b, b + 0.0078125)
    assert w.ok and (w.rtol, w.atol) == (1.6e-2, 1e-5)
    assert not compare("z", torch.tensor([0.0]), torch.tensor([-0.0]), exact=True).ok


def test_cli_agrees_on_float32_and_exact_is_bitwise(tmp_path: Path, capsys) -> None:
    code, out = check(tmp_path, capsys, "return net(x).square().mean()")
    assert code == 0, out
    assert "node order: agrees" in out and "leaves agree (as torch.testing.assert_close" in out
    code, out = check(tmp_path, capsys, "return net(x).square().mean()", "--exact")
    assert code == 0, out  # a bias broadcast is summed by ATen, as PyTorch's engine does
    assert "leaves agree (bitwise)" in out


@pytest.mark.parametrize("body", [
    "net = net.half(); return net(x.half()).float().square().mean()",
    "net = net.bfloat16(); return net(x.bfloat16()).float().square().mean()",
    "with torch.autocast('cpu', dtype=torch.bfloat16):\n        y = net(x)\n"
    "    return y.float().square().mean()",
], ids=["float16", "bfloat16", "autocast"])
def test_every_training_dtype_agrees(tmp_path: Path, capsys, body: str) -> None:
    code, out = check(tmp_path, capsys, body)
    assert code == 0, out
    assert "node order: agrees" in out and "leaves agree (as torch.testing" in out
    code, out = check(tmp_path, capsys, body, "--exact")  # and to the bit, summed in ATen
    assert code == 0, out
    assert "leaves agree (bitwise)" in out


def test_bfloat16_steps_in_the_app_summary_as_float32(tmp_path: Path, capsys) -> None:
    script = tmp_path / "model.py"
    script.write_text(MODEL.format(
        body="net = net.bfloat16(); return net(x.bfloat16()).float().square().mean()"))
    code = main(["torch", str(script), "--headless", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "completed" in out and "grad 0.weight: shape [8, 6]" in out


def test_a_compiled_model_steps_its_eager_graph_and_compares_with_the_compiled_run(
        tmp_path: Path, capsys) -> None:
    code, out = check(tmp_path, capsys,
                      "net = torch.compile(net, backend='aot_eager')\n"
                      "    return net(x).square().mean()")
    assert code == 0, out
    assert ("note: stepped the eager graph of a torch.compile'd model: Sequential (nn.Module); "
            "gradients compared with the compiled run's (6 parameters)") in out
    assert "CompiledFunctionBackward" not in out


def test_a_compile_that_cannot_run_here_is_said_plainly(tmp_path: Path, capsys) -> None:
    top = """
    def no_compiler(gm, inputs):
        raise RuntimeError("no C++ compiler found")
    """
    code, out = check(tmp_path, capsys,
                      "net = torch.compile(net, backend=no_compiler)\n"
                      "    return net(x).square().mean()", top=top)
    assert code == 0, out
    assert "torch.compile cannot run here (" in out and "no C++ compiler found" in out
    assert "gradients compared with PyTorch's eager run only" in out


CNN = """
import torch
from torch import nn

class SE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, c // 4, 1), nn.Conv2d(c // 4, c, 1)

    def forward(self, x):
        w = x.mean((2, 3), keepdim=True)
        return x * nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(w))))

class Block(nn.Module):  # MobileNetV3's: depthwise conv, BatchNorm, squeeze-excite, residual
    def __init__(self, c):
        super().__init__()
        self.dw, self.bn1 = nn.Conv2d(c, c, 3, padding=1, groups=c), nn.BatchNorm2d(c)
        self.se, self.pw, self.bn2 = SE(c), nn.Conv2d(c, c, 1), nn.BatchNorm2d(c)

    def forward(self, x):
        return x + self.bn2(self.pw(self.se(nn.functional.hardswish(self.bn1(self.dw(x))))))

def main():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), Block(16), Block(16),
                        Block(16))
    tokens = net(torch.randn(4, 3, 32, 32)).flatten(2).transpose(1, 2)  # [4, 256, 16]
    logits = nn.Linear(16, 10)(tokens.mean(1))
    return nn.functional.cross_entropy(logits, torch.tensor([1, 2, 3, 4]))
"""


def test_a_mobilenet_like_cnn_agrees_to_the_bit(tmp_path: Path, capsys) -> None:
    """The gradient into the blocks is channels_last (the transpose); summed with a
    contiguous one at a residual, ATen keeps the first operand's layout and NumPy would
    not, and the next convolution's backward then rounds differently: the bridge adds
    PyTorch's gradients in ATen (summed by NumPy, they differed in the last bits)."""
    script = tmp_path / "cnn.py"
    script.write_text(CNN)
    code = main(["check-order", str(script), "--exact"])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0, out
    assert "node order: agrees" in out and "leaves agree (bitwise)" in out


def test_the_app_and_a_headless_run_say_a_compiled_model_steps_its_eager_graph(
        tmp_path: Path, capsys) -> None:
    from autograd_tui.session.torch_script import script_scenario

    script = tmp_path / "model.py"
    script.write_text(MODEL.format(body="net = torch.compile(net, backend='aot_eager')\n"
                                        "    return net(x).square().mean()"))
    note = "stepped the eager graph of a torch.compile'd model"
    assert script_scenario(str(script)).banner.startswith(note)
    code = main(["torch", str(script), "--headless", "--quiet"])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0, out
    assert f"note: {note}" in out and "grad 0.weight: shape [8, 6]" in out
    assert "CompiledFunctionBackward" not in out


def test_a_compiled_function_is_named_and_compared_with_the_eager_run(
        tmp_path: Path, capsys) -> None:
    top = """
    import torch

    @torch.compile(backend="aot_eager")
    def act(h):
        return torch.tanh(h) * 2
    """
    code, out = check(tmp_path, capsys, "return act(net(x)).square().mean()", top=top)
    assert code == 0, out
    assert "note: stepped the eager graph of a torch.compile'd model: act()" in out
    assert "gradients compared with PyTorch's eager run (only a compiled nn.Module's" in out


def test_the_banner_reads_compile_calls_not_re_compile() -> None:
    from autograd_tui.engine.torch_bridge.compiled import script_note

    assert script_note({}, "import re\nPAT = re.compile('x+')\n") is None
    for src in ("net = torch.compile(net)", "net.compile()", "net.compile(mode='max-autotune')"):
        assert (script_note({}, src) or "").startswith("stepped the eager graph"), src


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    import autograd_tui.session.torch_script as ts

    calls: list[str] = []

    def counted(name, *args):  # type: ignore[no-untyped-def]
        calls.append(name)
        return compare(name, *args)

    monkeypatch.setattr(ts, "compare", counted)
    return calls


def test_worst_is_computed_once_per_leaf_until_a_gradient_changes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    t = torch.zeros(3)
    res = _check({"a": (t, t.clone()), "b": (t, t + 1.0), "c": (None, None)})
    first = res.worst()
    assert [w.name for w in first] == ["b", "a"]  # the failing one first
    assert not res.agrees and len(res.grad_differences()) == 1 and res.worst() == first
    assert sorted(calls) == ["a", "b"]  # once each, not once per question
    res.grads["b"] = (t, t.clone())  # compiled_grads replaces a gradient in place
    assert res.agrees and sorted(calls) == ["a", "a", "b", "b"]
    res.exact = True
    res.worst()
    assert len(calls) == 6


def test_check_order_compares_each_leaf_once(tmp_path: Path, capsys,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    code, out = check(tmp_path, capsys, "return net(x).square().mean()")
    assert code == 0, out
    assert "gradients: 6 leaves agree (as torch.testing.assert_close, by dtype); closest: " in out
    assert sorted(calls) == ["0.bias", "0.weight", "2.bias", "2.weight", "3.bias", "3.weight"]
