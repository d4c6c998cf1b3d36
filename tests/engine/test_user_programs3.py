"""Autograd APIs and training constructs from programs users bring (round 2), each reproduced
with plain torch: ``check-order --exact``, ``torch --headless`` and the recording must say
exactly what PyTorch does, or say plainly where they cannot.

- Several roots (``torch.autograd.backward([a, b, c], [ga, gb, gc])``): both engines run a
  ``GraphRoot`` first, but PyTorch's has no Python node to hook, so check-order compared
  ours (with it) against PyTorch's (without it) and reported a difference at node 1.
- ``torch.func`` transforms: their wrappers of a module's parameters were named as
  parameters (``0.weight'``, "requires_grad is False"), and nothing said that the
  transforms' own backward passes (PyTorch's engine, during the forward) are not stepped.
- A forward pass that raises, with ``--record``: the recording held 0 events (nothing to
  replay, and replay did not even say why); now no file is written, and the output says so.
- ``set_detect_anomaly(True, check_nan=True)`` in the program: our engine checked its own
  flag, so a NaN a node returned went unseen (PyTorch raises, naming the node).
- check-order's one forward pass: a region under selective activation checkpoint allows
  one backward, and a hook that removes itself acts differently in the second; PyTorch's
  now runs on a fresh forward pass when the shared one cannot be compared.  Both raising
  the same error (a hook's, anomaly mode's) agree.
- ``backward(inputs=[...])``: the leaves left out were "not reached by the backward".
- ``torch.compile(module)`` warned of global module hooks: the tool's own.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from user_scripts import run_cli as _cli
from user_scripts import write_script as _script

torch = pytest.importorskip("torch", reason="the torch bridge needs PyTorch (pip install torch)")


pytestmark = pytest.mark.timeout(120)




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
    assert "model.py:7: RuntimeError: mat1 and mat2 shapes cannot be multiplied" in out, out
    assert "no recording written to" in out and "nothing to replay" in out, out
    assert "recorded 0 events" not in out and "Traceback" not in out, out


FUNCTORCH = """
    import torch
    from torch import nn
    from torch.func import functional_call, grad, jacrev

    def main():
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double()
        params = dict(net.named_parameters())
        x = torch.randn(2, 3, dtype=torch.float64)
        f = lambda p, xi: functional_call(net, p, (xi,)).squeeze(-1)
        jac = jacrev(f, argnums=1)(params, x[0])           # the parameters wrapped
        gx = grad(lambda xi: f(params, xi).sum())(x[1])
        return f(params, x).pow(2).mean() + jac.pow(2).sum() + gx.pow(2).sum()
"""


def test_torch_func_wrappers_are_not_named_as_frozen_parameters(tmp_path: Path,
                                                                 capsys) -> None:
    # a transform's wrapper of a parameter was named 0.weight' and said to be frozen
    code, out = _cli(["torch", str(_script(tmp_path, FUNCTORCH)), "--headless", "--quiet"],
                     capsys)
    assert code == 0, out
    for name in ("0.weight", "0.bias", "2.weight", "2.bias"):
        assert f"grad {name}: shape" in out, out
    assert "no grad" not in out and "'" not in out.split("completed")[1], out
    # what is stepped, said plainly: the transforms' own backward passes are not
    assert ("note: the script uses torch.func: its transforms (grad, vjp, jacrev, ...) run "
            "their own backward passes inside the forward pass, with PyTorch's engine") in out


SELECTIVE_CHECKPOINT = """
    import functools
    import torch
    from torch import nn
    from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                        create_selective_checkpoint_contexts)

    def policy(ctx, op, *args, **kwargs):
        return (CheckpointPolicy.MUST_SAVE if op == torch.ops.aten.addmm.default
                else CheckpointPolicy.PREFER_RECOMPUTE)

    def main():
        torch.manual_seed(0)
        block, head = nn.Sequential(nn.Linear(4, 4), nn.Tanh()), nn.Linear(4, 1)
        ctx_fn = functools.partial(create_selective_checkpoint_contexts, policy)
        h = checkpoint(block, torch.randn(2, 4), use_reentrant=False, context_fn=ctx_fn)
        return head(h).pow(2).mean()
"""


def test_selective_checkpoint_is_compared_on_a_fresh_forward(tmp_path: Path, capsys) -> None:
    # a region under SAC allows one backward: PyTorch's, the second on the shared forward
    # pass, raised "Trying to backward an extra time"
    path = _script(tmp_path, SELECTIVE_CHECKPOINT)
    code, out = _cli(["check-order", str(path), "--exact"], capsys)
    assert "node order: agrees" in out, out
    assert ("note: a region under selective activation checkpoint (checkpoint's context_fn) "
            "allows one backward, and ours ran it: PyTorch's ran on a fresh forward pass "
            "(the entry run again)") in out, out
    assert "gradients: 4 leaves agree (bitwise)" in out, out
    assert code == 0, out


def test_selective_checkpoint_not_seeded_is_said_plainly(tmp_path: Path, capsys) -> None:
    # a fresh forward pass of a program that is not seeded is another graph's values:
    # nothing to compare, one plain message
    body = SELECTIVE_CHECKPOINT.replace("torch.manual_seed(0)", "pass")
    path = _script(tmp_path, body)
    code, out = _cli(["check-order", str(path), "--exact"], capsys)
    assert code == 1, out
    assert ("a region under selective activation checkpoint (checkpoint's context_fn) "
            "allows one backward (ours: it completed)") in out, out
    assert "PyTorch said: Trying to backward an extra time." in out, out
    assert "Traceback" not in out and "RuntimeError:" not in out, out
    code, out = _cli(["torch", str(path), "--headless", "--quiet"], capsys)  # steps it
    assert code == 0 and "completed" in out, out


HOOK_RAISES = """
    import torch
    from torch import nn

    def main():
        lin = nn.Linear(3, 2)
        h = torch.relu(lin(torch.ones(1, 3)))
        h.register_hook(lambda g: (_ for _ in ()).throw(ValueError("my hook says no")))
        return h.sum()
"""


def test_replay_says_the_error_the_recorded_run_ended_with(tmp_path: Path, capsys) -> None:
    rec = tmp_path / "run.jsonl.gz"
    code, out = _cli(["torch", str(_script(tmp_path, HOOK_RAISES)), "--headless", "--quiet",
                      "--record", str(rec)], capsys)
    assert code == 1 and "ValueError: my hook says no" in out, out
    code, out = _cli(["replay", str(rec), "--headless"], capsys)
    assert "status: error error: my hook says no schedule:" in out, out


COMPILED = """
    import torch
    from torch import nn

    def main():
        torch.manual_seed(0)
        net = torch.compile(nn.Sequential(nn.Linear(3, 2), nn.Tanh()), backend="eager")
        return net(torch.randn(2, 3)).sum()
"""


def test_compile_warns_not_of_the_tools_own_module_hooks(tmp_path: Path, capsys,
                                                         recwarn) -> None:
    # torch.compile(module) warns of global module hooks: capture()'s, not the program's
    code, out = _cli(["torch", str(_script(tmp_path, COMPILED)), "--headless", "--quiet"],
                     capsys)
    assert code == 0 and "completed" in out, out
    said = [str(w.message) for w in recwarn]
    assert not [m for m in said if "global hooks on modules" in m], said


FORWARD_AD_ONLY = """
    import torch
    import torch.autograd.forward_ad as fwAD

    def main():
        with fwAD.dual_level():
            y = fwAD.make_dual(torch.ones(3), torch.ones(3)).sin().sum()
            return fwAD.unpack_dual(y).tangent
"""


def test_a_forward_mode_result_is_said_to_have_no_backward_graph(tmp_path: Path,
                                                                  capsys) -> None:
    code, out = _cli(["torch", str(_script(tmp_path, FORWARD_AD_ONLY)), "--headless",
                      "--quiet"], capsys)
    assert code == 1, out
    assert "nothing to differentiate" in out and "forward-mode AD" in out, out
    assert "Traceback" not in out, out


ANOMALY_NAN = """
    import torch
    from torch import nn

    def main():
        torch.manual_seed(0)
        torch.autograd.set_detect_anomaly(True, check_nan=True)
        lin = nn.Linear(3, 3)
        h = torch.relu(lin(torch.randn(2, 3)) - 10.0)     # all zeros
        return (torch.sqrt(h) * 0.0).sum()                 # SqrtBackward0: 0 / (2 * 0)
"""


@pytest.fixture
def anomaly_restored():
    yield
    torch.autograd.set_detect_anomaly(False)


@pytest.mark.filterwarnings("ignore:Error detected in SqrtBackward0")
def test_anomaly_modes_nan_check_raises_as_pytorchs_naming_the_node(
        tmp_path: Path, capsys, anomaly_restored) -> None:
    # the program's torch.autograd.set_detect_anomaly was not our engine's flag: the NaN
    # that ReluBackward0 then masked went unseen, and the backward completed
    path = _script(tmp_path, ANOMALY_NAN)
    code, out = _cli(["torch", str(path), "--headless", "--quiet"], capsys)
    assert code == 1, out
    assert ("error in the script (in SqrtBackward0) RuntimeError: Function 'SqrtBackward0' "
            "returned nan values in its 0th output.") in out, out
    assert "completed" not in out, out
    code, out = _cli(["check-order", str(path), "--exact"], capsys)
    assert "node order: agrees" in out, out
    assert ("both backward passes raised the same error: RuntimeError in SqrtBackward0: "
            "Function 'SqrtBackward0' returned nan values in its 0th output.") in out, out
    assert code == 0, out


def test_check_order_agrees_on_a_hook_that_raises(tmp_path: Path, capsys) -> None:
    # PyTorch's recorder (a node pre-hook) runs after the tensor hook that raised: the
    # node that failed is not in its order, and is in ours
    code, out = _cli(["check-order", str(_script(tmp_path, HOOK_RAISES)), "--exact"], capsys)
    assert "PyTorch ran 1 nodes, ours 1 node order: agrees" in out, out  # SumBackward0
    assert ("both backward passes raised the same error: ValueError in ReluBackward0: "
            "my hook says no") in out, out
    assert code == 0, out


INPUTS_SUBSET = """
    import torch
    from torch import nn

    def main():
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
        h = net[1](net[0](torch.randn(2, 3)))
        return net[2](h).square().sum(), None, [net[2].weight, h, net[0].bias]
"""


def test_leaves_left_out_of_inputs_are_said_so_not_unreached(tmp_path: Path, capsys) -> None:
    code, out = _cli(["torch", str(_script(tmp_path, INPUTS_SUBSET)), "--headless",
                      "--quiet"], capsys)
    assert code == 0, out
    assert "grad net.2.weight: shape [2, 4]" in out and "grad net.0.bias: shape [4]" in out
    for name in ("net.0.weight", "net.2.bias"):
        assert (f"no grad {name}: not among the backward's inputs= (PyTorch leaves its .grad "
                "as it was)") in out, out
    assert "not reached" not in out, out


HOOK_ONCE = """
    import torch
    from torch import nn

    def main():
        torch.manual_seed(0)
        lin = nn.Linear(3, 3)
        h = lin(torch.randn(2, 3))
        handles = []

        def once(g):                      # removes itself: PyTorch's run, the second,
            handles[0].remove()           # finds it gone on the shared forward pass
            return g * 2

        handles.append(h.register_hook(once))
        return (h * h).sum()
"""


def test_a_hook_that_removes_itself_is_compared_on_a_fresh_forward(tmp_path: Path,
                                                                   capsys) -> None:
    code, out = _cli(["check-order", str(_script(tmp_path, HOOK_ONCE)), "--exact"], capsys)
    assert ("note: the gradients differed on the forward pass both backward passes shared "
            "(the program's state, a hook that removes itself or counts its calls, changed "
            "in ours, the first); PyTorch's on a fresh forward pass are compared") in out, out
    assert "gradients: 2 leaves agree (bitwise)" in out, out
    assert code == 0, out


def test_a_difference_a_fresh_forward_does_not_explain_stays_reported(tmp_path: Path,
                                                                      capsys) -> None:
    # not seeded: the fresh forward pass's input is another, its gradients differ from
    # ours too, so the first report stands
    body = HOOK_ONCE.replace("torch.manual_seed(0)", "pass")
    code, out = _cli(["check-order", str(_script(tmp_path, body)), "--exact"], capsys)
    assert "gradients differ (bitwise)" in out and "fresh forward" not in out, out
    assert code == 1, out
