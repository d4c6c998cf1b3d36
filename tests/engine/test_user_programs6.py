"""Public model code nobody here wrote (round 4: timm, minGPT, nanoGPT, vit-pytorch, pytorch/
examples, diffusers, DETR, Mamba's reference scan, x-transformers, the annotated transformer),
each finding reproduced with plain torch: the tool must do what PyTorch does, or say plainly
where it cannot.

- ``check-order`` on a real model spent most of its time comparing gradients, not running
  backward passes: every leaf was widened to float64 and compared element by element, four
  times over (resnet50d, 25M parameters: 186 s of 279 under a profiler, on a loaded
  machine; maxvit_tiny_rw, 31M, ran past 4 minutes).  A gradient that agrees bit for bit,
  the usual answer, is now told by its bits alone, with the same worst element (its first)
  the elementwise path finds.
- A loss computed under ``torch.inference_mode()`` was said to be made "under no_grad,
  detached, or by forward-mode AD"; now the message names the inference mode.
"""

from __future__ import annotations

import pytest
from user_scripts import run_cli, write_script

torch = pytest.importorskip("torch", reason="the torch bridge needs PyTorch (pip install torch)")

from autograd_tui.session import grad_compare  # noqa: E402
from autograd_tui.session.grad_compare import compare  # noqa: E402

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("no_thread_left")]


def _cases() -> list[tuple[str, object]]:
    g = torch.Generator().manual_seed(0)
    return [
        ("w", torch.randn(3, 4, generator=g)),
        ("scalar", torch.tensor(2.5, dtype=torch.float64)),
        ("nan", torch.tensor([float("nan"), 1.0, float("-inf")])),
        ("bf16", torch.randn(5, generator=g).bfloat16()),
        ("c", torch.randn(2, 2, dtype=torch.complex64, generator=g)),
        ("cl", torch.randn(2, 3, 4, 4, generator=g).contiguous(memory_format=torch.channels_last)),
    ]


@pytest.mark.parametrize("exact", [False, True])
def test_agreeing_gradients_compare_by_bits_with_the_same_answer(monkeypatch, exact) -> None:
    """Bitwise-equal gradients: the same Worst as the elementwise comparison gives (value,
    index, tolerances, counts), and none of its float64 work is done."""
    full = {}
    with monkeypatch.context() as m:
        m.setattr(grad_compare, "_same_bits", lambda e, a: False)
        for name, t in _cases():
            full[name] = compare(name, t, t.clone(), exact)

    def widened(*a, **k):
        raise AssertionError("an agreeing gradient was compared element by element")

    monkeypatch.setattr(torch, "where", widened)
    for name, t in _cases():
        fast = compare(name, t, t.clone(), exact)
        assert fast is not None and fast.ok
        assert fast.text() == full[name].text(), name
        assert fast == full[name] or name == "nan", name  # NaN != NaN in a dataclass ==


def test_gradients_that_differ_still_name_their_worst_element() -> None:
    """One bit off (and -0.0 against 0.0 under --exact): the elementwise path still runs."""
    e = torch.tensor([1.0, 2.0, 0.0])
    a = e.clone()
    a[1] = torch.nextafter(a[1], torch.tensor(3.0))
    w = compare("p", e, a, exact=True)
    assert not w.ok and w.index == (1,) and w.mismatched == 1
    z = compare("z", e, torch.tensor([1.0, 2.0, -0.0]), exact=True)
    assert not z.ok and z.index == (2,)
    assert compare("z", e, torch.tensor([1.0, 2.0, -0.0]), exact=False).ok


def test_a_loss_made_under_inference_mode_is_said_to_be(tmp_path, capsys) -> None:
    """A loss computed under ``torch.inference_mode()`` (an evaluation helper's habit):
    PyTorch's backward refuses it; the message named no_grad, detach and forward-mode AD,
    and not the inference mode the program used."""
    script = write_script(tmp_path, """
        import torch

        def main():
            m = torch.nn.Linear(3, 1)
            with torch.inference_mode():
                return m(torch.randn(2, 3)).sum()
    """)
    for cmd in (["check-order", str(script)], ["torch", str(script), "--headless", "--quiet"]):
        code, out = run_cli(cmd, capsys)
        assert code != 0 and "nothing to differentiate" in out, out
        assert "torch.inference_mode()" in out and "Traceback" not in out, out
