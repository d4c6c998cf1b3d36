"""Leftovers of the torch bridge and its commands, found on users' programs (plain torch,
each test a second or two):

1. A forward pass that raises: ``torch --headless`` printed the error on stdout and on
   stderr, then a summary of a run that never started (``events: 0``, ``schedule: 1:1``).
   Now the program's error, once, on stderr; exit 1 as before.
2. Names: a leaf the program made (``q = torch.randn(3, requires_grad=True)``) read
   ``param q`` in the trace's meta line and ``parameter: q`` in the details: it is ``leaf
   q``.  A module first called inside a custom Function's forward was named by the
   Function's argument (``run.0.weight``), not by the program's variable (``block.0.weight``).
3. ``allow_mutation_on_saved_tensors()`` entered and never exited (on the program's
   thread): Python's exit closed it on the main thread, and PyTorch printed "Exception
   ignored ... INTERNAL ASSERT FAILED".  Now it is closed on the thread that entered it.
4. check-order on a program that steps its optimizer in a post-accumulate-grad hook: ours
   (the first backward) changed the parameters, and PyTorch's refused the shared forward
   pass.  Now PyTorch's runs on a fresh forward pass from the parameters and optimizer
   state the program had before ours; each stepped parameter is compared by its value.
5. check-order with a reentrant checkpoint: the nested backward that its node runs (on a
   graph made during the backward) was stepped but its order not compared.  Now PyTorch's
   ``torch.autograd.backward`` is wrapped during its run, the nested graph's nodes get the
   order-recording pre-hooks, and each nested GraphTask's order is compared.
6. Sparse gradients (``nn.Embedding(sparse=True)``) were refused.  Now a sparse COO
   gradient travels as itself and adds as ``InputBuffer::accumulate`` adds it (a sparse
   buffer: ``var + old``); the views read a dense copy, up to ``SPARSE_SHOWN`` elements.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from user_scripts import write_script

torch = pytest.importorskip("torch", reason="the torch bridge needs PyTorch (pip install torch)")

from autograd_tui.commands import main  # noqa: E402

pytestmark = pytest.mark.timeout(120)


FORWARD_RAISES = """
    import torch
    from torch import nn

    def main():
        net = nn.Linear(4, 3)
        print("built")
        return net(torch.randn(2, 5)).sum()
"""


@pytest.mark.parametrize("quiet", [[], ["--quiet"]])
def test_a_forward_that_raises_is_said_once_on_stderr(tmp_path: Path, capsys,
                                                      quiet: list[str]) -> None:
    script = write_script(tmp_path, FORWARD_RAISES)
    assert main(["torch", str(script), "--headless", *quiet]) == 1
    out, err = capsys.readouterr()
    assert out == "built\n", out  # the program's own output only: no empty run summary
    assert "events:" not in out + err and "schedule:" not in out + err
    shapes = "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x5 and 4x3)"
    assert err.count(shapes) == 1, err
    assert err.startswith(f"autograd-tui: {script}:8: {shapes}\n"), err
    assert "return net(torch.randn(2, 5)).sum()" in err and "Traceback" not in err


NAMES = """
    import torch
    from torch import nn

    class Recompute(torch.autograd.Function):
        @staticmethod
        def forward(ctx, run, x, *params):
            ctx.run = run
            ctx.save_for_backward(x, *params)
            with torch.no_grad():
                return run(x)

        @staticmethod
        def backward(ctx, g):
            x, *params = ctx.saved_tensors
            x = x.detach().requires_grad_(True)
            with torch.enable_grad():
                out = ctx.run(x)
            return (None, *torch.autograd.grad(out, [x] + params, g))

    def main():
        torch.manual_seed(0)
        block = nn.Sequential(nn.Linear(4, 3), nn.Tanh())
        head = nn.Linear(3, 1)
        q = torch.randn(3, requires_grad=True)
        x = torch.randn(2, 4, requires_grad=True)
        h = Recompute.apply(block, x, *block.parameters())
        return head(h * q).sum()
"""


def test_leaves_and_parameters_are_named_as_the_program_holds_them(tmp_path: Path,
                                                                   capsys) -> None:
    script = write_script(tmp_path, NAMES)
    assert main(["torch", str(script), "--headless"]) == 0
    out = capsys.readouterr().out
    # the block, first called inside Recompute.forward (where it is ``run``), by its path
    for name in ("block.0.weight", "block.0.bias", "head.weight", "head.bias", "q", "x"):
        assert f"grad {name}: shape" in out, out
    assert "run." not in out, out
    metas = [line for line in out.splitlines() if " meta AccumulateGrad#" in line]
    assert any(line.endswith(" leaf q") for line in metas), metas
    assert any(line.endswith(" leaf x") for line in metas), metas
    assert any(line.endswith(", param block.0.weight") for line in metas), metas
    assert not any("param q" in line or "param x" in line for line in metas), metas


def test_the_details_say_leaf_for_a_leaf_and_parameter_for_a_parameter(tmp_path: Path,
                                                                      capsys) -> None:
    from rich.text import Text

    from autograd_tui.app.render import _torch_meta
    from autograd_tui.history import recordings

    def details(meta: dict[str, object]) -> str:
        t = Text()
        _torch_meta(t, meta)
        return t.plain

    rec = tmp_path / "names.jsonl.gz"
    assert main(["torch", str(write_script(tmp_path, NAMES)), "--headless", "--quiet",
                 "--record", str(rec)]) == 0
    capsys.readouterr()
    metas = {e.data["tensor"]: e.data for e in recordings.load(rec).events
             if e.kind == "node_meta" and e.data["tensor"]}
    assert "leaf: q" in details(metas["q"]) and "parameter" not in details(metas["q"])
    assert "parameter: head.weight" in details(metas["head.weight"])
    assert "parameter: block.0.bias" in details(metas["block.0.bias"])


LEFT_OPEN = """
    import torch
    from torch import nn

    CTX = []

    def main():
        torch.manual_seed(0)
        lin = nn.Linear(5, 5)
        ctx = torch.autograd.graph.allow_mutation_on_saved_tensors()
        ctx.__enter__()                 # never exited
        CTX.append(ctx)
        h = lin(torch.randn(3, 5))
        s = h.sin()                     # saves h
        h.mul_(2)                       # mutated: the context keeps a clone for the backward
        return (s * h).sum()
"""


def test_a_mutation_context_left_open_is_closed_on_its_own_thread(tmp_path: Path,
                                                                  capsys) -> None:
    import gc
    import inspect
    import types

    graph = torch.autograd.graph
    script = write_script(tmp_path, LEFT_OPEN)
    assert main(["torch", str(script), "--headless", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "completed" in out and err == "", (out, err)
    # PyTorch's gradients: the mutation did not reach the backward (the clone did)
    torch.manual_seed(0)
    lin = torch.nn.Linear(5, 5)
    with graph.allow_mutation_on_saved_tensors():
        h = lin(torch.randn(3, 5))
        s = h.sin()
        h.mul_(2)
        (s * h).sum().backward()
    norm = float(lin.weight.grad.norm())
    assert f"grad weight: shape [5, 5], norm {norm:.6g}" in out, (out, norm)
    # closed on the program's thread: nothing left for the main thread to close at exit
    code = graph.allow_mutation_on_saved_tensors.__wrapped__.__code__
    left = [g for g in gc.get_objects() if type(g) is types.GeneratorType and g.gi_code is code
            and inspect.getgeneratorstate(g) == inspect.GEN_SUSPENDED]
    assert not graph._allow_mutation_on_saved_tensors_enabled and not left, left


STEP_IN_BACKWARD = """
    import torch
    from torch import nn

    torch.manual_seed(0)
    NET = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))   # built at import
    OPTS = {p: torch.optim.SGD([p], lr=0.1, momentum=0.9) for p in NET.parameters()}

    def hook(p):
        OPTS[p].step()
        OPTS[p].zero_grad()

    for p in NET.parameters():
        p.register_post_accumulate_grad_hook(hook)

    def loss():
        torch.manual_seed(1)
        return nn.functional.cross_entropy(NET(torch.randn(5, 4)), torch.tensor([0, 1, 2, 0, 1]))

    for _ in range(2):                       # steps before: momentum buffers to put back
        loss().backward()

    def main():
        return loss()
"""


def _check_order(path: Path, capsys) -> tuple[int, str]:
    code = main(["check-order", str(path), "--exact"])
    out = capsys.readouterr()
    return code, " ".join((out.out + out.err).split())


def test_an_optimizer_step_in_the_backward_is_compared_on_a_fresh_forward(
        tmp_path: Path, capsys) -> None:
    path = write_script(tmp_path, STEP_IN_BACKWARD)
    code, out = _check_order(path, capsys)
    assert "node order: agrees" in out, out
    assert ("PyTorch's ran on a fresh forward pass (the entry run again) from the parameters "
            "and optimizer state the program had before ours") in out, out
    assert "gradients: 4 leaves agree (bitwise)" in out and "no .grad" not in out, out
    assert code == 0, out


def test_a_real_difference_after_the_step_still_shows(tmp_path: Path, capsys,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from autograd_tui.engine.torch_bridge import bridge

    accumulate = bridge.accumulate

    def wrong(fn, grad, *args):  # ours accumulates twice the last layer's bias gradient
        return accumulate(fn, grad * 2 if fn.variable.shape == (3,) else grad, *args)

    monkeypatch.setattr(bridge, "accumulate", wrong)
    code, out = _check_order(write_script(tmp_path, STEP_IN_BACKWARD), capsys)
    assert "gradients differ (bitwise)" in out and "2.bias[" in out, out
    assert code == 1, out


def test_an_optimizer_step_in_the_backward_not_seeded_is_said_plainly(tmp_path: Path,
                                                                      capsys) -> None:
    body = STEP_IN_BACKWARD.replace("        torch.manual_seed(1)\n", "")
    assert body != STEP_IN_BACKWARD
    code, out = _check_order(write_script(tmp_path, body), capsys)
    assert ("and a fresh forward pass from the parameters it had before ours made another "
            "loss or graph: is the program seeded?") in out, out
    assert "Traceback" not in out and code == 1, out


TWO_CHECKPOINTS = """
    import torch
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

        def forward(self, x):           # two branches ready at once: the order matters
            return x + torch.tanh(self.a(x)) * torch.sigmoid(self.b(x))

    def main():
        torch.manual_seed(0)
        b1, b2, head = Block(), Block(), nn.Linear(4, 1)
        h = checkpoint(b1, torch.randn(3, 4, requires_grad=True), use_reentrant=True)
        h = checkpoint(b2, h, use_reentrant=True)
        return head(h).sum()
"""


def test_a_reentrant_checkpoints_nested_order_is_compared(tmp_path: Path, capsys) -> None:
    backward = torch.autograd.backward
    code, out = _check_order(write_script(tmp_path, TWO_CHECKPOINTS), capsys)
    assert torch.autograd.backward is backward  # PyTorch's own again
    assert ("nested backward passes (called inside a node, as a reentrant checkpoint does; "
            "GraphTask 2 on): PyTorch ran 2 with 26 nodes, ours 2 with 26") in out, out
    assert "node order: agrees" in out and "11 leaves agree (bitwise)" in out, out
    assert code == 0, out


def test_a_different_nested_order_is_found_in_its_graph_task(
        tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    from autograd_tui.engine import ready_queue

    key = ready_queue.task_key

    def lowest_first_when_nested(task):  # ours, nested only: the lower sequence_nr first
        if task._seq is None or task.is_shutdown_task or task.get_reentrant_depth() < 1:
            return key(task)
        return -((task.get_reentrant_depth() << 64) | ((1 << 64) - 1 - task._seq))

    monkeypatch.setattr(ready_queue, "task_key", lowest_first_when_nested)
    code, out = _check_order(write_script(tmp_path, TWO_CHECKPOINTS), capsys)
    assert ("node order differs at node 3 of GraphTask 2 (a nested backward): PyTorch ran "
            "SigmoidBackward0") in out, out
    assert "ours ran TanhBackward0" in out and code == 1, out


def test_the_nested_recording_gives_pytorchs_functions_back_when_it_raises() -> None:
    from autograd_tui.engine.torch_bridge.nested import recording_nested

    backward, grad = torch.autograd.backward, torch.autograd.grad
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError), recording_nested() as orders:
        torch.autograd.backward((x * 3).sum())
        assert torch.autograd.backward is not backward
        raise RuntimeError("stop")
    assert torch.autograd.backward is backward and torch.autograd.grad is grad
    assert orders == [[("SumBackward0", orders[0][0][1]), ("MulBackward0", orders[0][1][1]),
                       ("AccumulateGrad", 2**64 - 1)]], orders


SPARSE = """
    import torch
    from torch import nn

    EMB = []

    def main():
        torch.manual_seed(0)
        emb, lin = nn.Embedding(12, 4, sparse=True), nn.Linear(4, 1)
        EMB.append(emb)
        opt = torch.optim.SparseAdam(list(emb.parameters()))
        emb(torch.tensor([[2, 5, 5]])).pow(2).sum().backward()   # a step, its sparse .grad
        opt.step()                                               # kept: accumulated into
        a = emb(torch.tensor([[1, 2, 3], [4, 5, 1]]))    # sparse gradients meet in
        b = emb(torch.tensor([[7, 1, 1]]))               # emb.weight's buffer,
        tied = a @ emb.weight.t()                        # and a dense one (tied weights)
        return lin(a).sum() + b.pow(2).sum() + tied.logsumexp(-1).sum()
"""


def test_sparse_gradients_step_and_agree_with_pytorch(tmp_path: Path, capsys) -> None:
    path = write_script(tmp_path, SPARSE)
    code, out = _check_order(path, capsys)
    assert "node order: agrees" in out and "3 leaves agree (bitwise)" in out, out
    assert code == 0, out
    assert main(["torch", str(path), "--headless", "--quiet"]) == 0
    out = capsys.readouterr().out
    ns: dict[str, Any] = {}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    ns["main"]().backward()  # PyTorch's: the .grad it leaves, by its norm
    grad = ns["EMB"][0].weight.grad  # dense: the tied projection's dense gradient added
    assert f"grad emb.weight: shape [12, 4], norm {float(grad.norm()):.6g}" in out, out


def test_a_sparse_buffer_adds_as_pytorchs_input_buffer() -> None:
    from autograd_tui.engine.torch_bridge.convert import to_ours

    i = torch.tensor([[1, 3, 1]])
    old = torch.sparse_coo_tensor(i, torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), (5, 2),
                                  check_invariants=True)
    var = torch.sparse_coo_tensor(torch.tensor([[3, 0]]), torch.ones(2, 2), (5, 2),
                                  check_invariants=True)
    dense = torch.arange(10.0).reshape(5, 2)
    both = to_ours(old, None).buffer_add(to_ours(var, None))
    assert both.held.is_sparse and torch.equal(both.held._indices(), (var + old)._indices())
    assert both.data.tolist() == (old + var).to_dense().tolist()  # the views: dense values
    mixed = to_ours(old, None).buffer_add(to_ours(dense, None))   # sparse old + dense var
    assert not mixed.held.is_sparse and torch.equal(mixed.held, dense + old)
