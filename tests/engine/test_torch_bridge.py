"""The PyTorch bridge: PyTorch's nodes scheduled by our engine (engine/torch_bridge/).

Each test compares with PyTorch's own engine run on the same graph: the node
order (from node pre-hooks) and every leaf's ``.grad``.  Skipped without torch.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the bridge needs PyTorch (pip install torch)")

from autograd_tui import engine  # noqa: E402
from autograd_tui.engine.torch_bridge import TorchBridgeError, capture, from_torch  # noqa: E402
from autograd_tui.session.torch_script import check_order  # noqa: E402

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("no_thread_left")]
ROOT = Path(__file__).resolve().parents[2]
EXE = str(Path(sys.executable).parent / "autograd-tui")
ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120"}
EXAMPLES = ["torch_mlp", "torch_cnn", "torch_attention", "torch_checkpoint",
            "torch_checkpoint_nonreentrant"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=240, env=ENV)


def in_process(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """The same command through ``main`` in this process (no fresh interpreter and torch
    import): for the steps whose real process another step or test already runs."""
    from autograd_tui.commands import main

    code = main(list(args))
    out = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, out.out, out.err)


def ours(loss, grad_outputs=None, inputs=None) -> list[str]:
    """Run the backward on a fresh engine of ours; return the order of node names."""
    eng, obs = engine.Engine(), engine.ListObserver()
    eng.add_observer(obs)
    try:
        with engine.use_engine(eng):
            from_torch(loss, grad_outputs, inputs).backward()
    finally:
        eng.close()
    return [e.data["name"] for e in obs.events if e.kind == "node_start"]


def assert_agrees(res) -> None:
    assert res.torch_order, "PyTorch ran no node"
    assert res.order_difference() is None, res.order_difference()
    assert res.grad_differences() == []
    assert any(t is not None for t, _ in res.grads.values())


@pytest.mark.parametrize("name", EXAMPLES)
def test_examples_agree_with_pytorch(name: str) -> None:
    from autograd_tui.session.torch_script import load_entry

    entry, _ = load_entry(str(ROOT / "scenarios" / f"{name}.py"))
    assert_agrees(check_order(entry, exact=True))  # float64 examples: the same bits


def _model(seed: int, width: int, shared: bool, residual: bool, act: str):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv2d(2, width, 3, padding=1)
            self.c2 = self.c1 if shared and width == 2 else nn.Conv2d(width, 2, 3, padding=1)
            self.fc = nn.Linear(2 * 5 * 5, 3)
            self.fc2 = nn.Linear(3, 3)

        def forward(self, x):
            a = getattr(torch, act)
            h = a(self.c1(x))
            h2 = a(self.c2(h))
            if residual:
                h2 = h2 + x
            y = self.fc(h2.flatten(1))
            y = y + a(self.fc2(y)) if residual else self.fc2(y)
            return self.fc2(y).sum() if shared else y.pow(2).mean()

    def main():
        torch.manual_seed(seed)
        net = Net().double()
        return net(torch.randn(2, 2, 5, 5, dtype=torch.float64))

    return main


@pytest.mark.parametrize("seed,width,shared,residual,act", [
    (0, 2, True, True, "relu"), (1, 3, False, True, "tanh"), (2, 2, True, False, "sigmoid"),
    (3, 4, False, False, "relu"), (4, 2, False, True, "sigmoid"),
])
def test_small_nn_programs_agree(seed, width, shared, residual, act) -> None:
    assert_agrees(check_order(_model(seed, width, shared, residual, act)))


def test_hooks_run_as_in_pytorch() -> None:
    calls: list[str] = []

    def build():
        torch.manual_seed(0)
        lin = torch.nn.Linear(3, 3).double()
        lin.register_full_backward_hook(lambda m, gi, go: calls.append("module"))
        x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
        x.register_hook(lambda g: calls.append("leaf") or g * 3)
        h = lin(x)
        h.register_hook(lambda g: calls.append("tensor") or g * 2)
        h.retain_grad()
        y = h.tanh()
        y.grad_fn.register_prehook(lambda go: calls.append("pre") or None)
        y.grad_fn.register_hook(lambda gi, go: calls.append("post") or None)
        return y.sum(), (x, h, lin)

    with capture():
        loss, (x, h, lin) = build()
    torch.autograd.backward(loss, retain_graph=True)
    theirs = [t.grad.clone() for t in (x, h, lin.weight)]
    torch_calls = sorted(calls)
    calls.clear()
    for t in (x, h, lin.weight, lin.bias):
        t.grad = None
    order = ours(loss)
    assert sorted(calls) == torch_calls  # every hook once, as in PyTorch
    assert {"leaf", "tensor", "pre", "post", "module"} <= set(calls)
    for a, b in zip(theirs, (x.grad, h.grad, lin.weight.grad)):
        assert b is not None and torch.allclose(a, b, rtol=1e-12, atol=0)
    assert "TanhBackward0" in order


def test_inputs_and_grad_outputs() -> None:
    torch.manual_seed(1)
    a = torch.randn(3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, dtype=torch.float64, requires_grad=True)
    y = (a * b).exp()
    g = torch.linspace(0, 1, 3, dtype=torch.float64)
    order = ours(y, g, inputs=[a])
    assert b.grad is None  # only the inputs asked for
    assert torch.allclose(a.grad, g * y.detach() * b.detach(), rtol=1e-12)
    assert order.count("AccumulateGrad") == 1


def test_node_meta_events_name_modules_creation_and_saved_tensors() -> None:
    from autograd_tui import scenarios
    from autograd_tui.session.run import Run

    with Run(scenarios.get("torch-mlp")) as run:
        run.run()
        assert run.error is None
        state = run.history.head
    metas = state.node_meta
    assert len(metas) == len(state.nodes) > 5
    by_name = {}
    for nid, meta in metas.items():
        by_name.setdefault(state.nodes[nid].name, []).append(meta)
    assert {m["module"] for m in by_name["AddmmBackward0"]} == {"0", "2", "4"}
    assert any(m["tensor"] == "0.weight" for m in by_name["AccumulateGrad"])
    tanh = by_name["TanhBackward0"][0]
    assert tanh["created"].startswith(str(ROOT / "scenarios" / "torch_mlp.py"))
    assert "model(x)" in tanh["source"]
    assert any(s.startswith("result: Tensor[5, 8] float64") for s in tanh["saved"])


def test_unsupported_graphs_name_the_node() -> None:
    w = torch.randn(3, device="meta", requires_grad=True)
    with pytest.raises(TorchBridgeError, match=r"\(sequence_nr \d+\) runs on device meta"):
        from_torch((w * 2).sum())
    nt = torch.nested.nested_tensor([torch.randn(2), torch.randn(3)], requires_grad=True)
    with pytest.raises(TorchBridgeError,
                       match=r"AccumulateGrad \(sequence_nr \d+\) takes a nested tensor"):
        from_torch(nt * 2, grad_outputs=nt)


def test_a_node_that_cannot_run_here_is_named() -> None:
    """A node that cannot be called from Python, or a CUDA graph where PyTorch finds no
    GPU: one TorchBridgeError naming the node (the CLI prints it, exit 1)."""
    from autograd_tui.engine.torch_bridge import TorchNode
    from autograd_tui.engine.torch_bridge.convert import check_device

    class OpaqueBackward0:  # what a graph node that Python cannot call looks like to us
        next_functions = ()

        def _sequence_nr(self) -> int:
            return 7

    with pytest.raises(TorchBridgeError, match=r"OpaqueBackward0 \(sequence_nr 7\) cannot "
                       "be called from Python"):
        TorchNode(OpaqueBackward0())
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: a CUDA graph runs")
    fn = (torch.ones(2, requires_grad=True) * 2).sum().grad_fn
    with pytest.raises(TorchBridgeError, match=r"SumBackward0 \(sequence_nr \d+\) runs on "
                       "cuda:0, but PyTorch finds no GPU here"):
        check_device(torch.device("cuda"), fn)


def test_cli_torch_headless_record_and_check_order(tmp_path: Path, capsys) -> None:
    script = ROOT / "scenarios" / "torch_cnn.py"
    rec = tmp_path / "cnn.jsonl"
    p = cli("torch", str(script), "--headless", "--record", str(rec))
    assert p.returncode == 0, p.stderr
    assert "ConvolutionBackward0" in p.stdout and "completed" in p.stdout
    assert "grad conv.weight: shape [3, 3, 3, 3]" in p.stdout
    assert rec.exists() and b"node_meta" in rec.read_bytes()
    p = cli("replay", str(rec), "--headless")
    assert p.returncode == 0, p.stderr
    assert "meta ConvolutionBackward0" in p.stdout and "in conv (Conv2d)" in p.stdout
    p = in_process(capsys, "check-order", str(script))  # its process: test_real_models
    assert p.returncode == 0, p.stderr
    assert "node order: agrees" in p.stdout
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\ndef main():\n    return (torch.ones(2, device='meta', "
                   "requires_grad=True) * 2).sum()\n")
    p = in_process(capsys, "check-order", str(bad))
    assert p.returncode == 1 and "runs on device meta" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    p = in_process(capsys, "torch", str(bad), "--entry", "nope", "--headless")
    assert p.returncode == 2 and "defines no function 'nope'" in p.stderr


def test_a_script_recording_reexecutes_identically(tmp_path: Path, capsys) -> None:
    """replay --reexecute --scenario SCRIPT runs the script's main() and our backward under
    the recorded schedule: the same events."""
    rec = tmp_path / "cnn.jsonl"
    script = str(ROOT / "scenarios" / "torch_cnn.py")
    p = in_process(capsys, "torch", script, "--headless", "--quiet", "--record", str(rec))
    assert p.returncode == 0, p.stderr
    p = cli("replay", str(rec), "--reexecute", "--scenario", script)
    assert p.returncode == 0, p.stderr
    assert "identical to the recording" in p.stdout


def test_a_torch_program_run_as_a_scenario_is_told_where_to_go(tmp_path: Path) -> None:
    f = tmp_path / "prog.py"
    f.write_text("import torch\nNAME = 'x'\ndef program():\n    return {}\n")
    p = cli("run", str(f), "--headless")
    assert p.returncode == 1
    assert f"autograd-tui torch {f}" in p.stderr


def test_without_torch_everything_else_works(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['torch'] = None\n"
            "import importlib.util as u; real = u.find_spec\n"
            "u.find_spec = lambda n, *a: None if n == 'torch' else real(n, *a)\n"
            "from autograd_tui.commands import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    run = lambda *a: subprocess.run([sys.executable, "-c", code, *a], capture_output=True,  # noqa: E731
                                    text=True, timeout=120, env=ENV)
    p = run("list")
    assert p.returncode == 0, p.stderr
    assert "skipped torch-mlp: needs torch" in p.stdout
    p = run("list", "--names")
    assert "torch-mlp" not in p.stdout.split()
    p = run("torch", str(ROOT / "scenarios" / "torch_mlp.py"), "--headless")
    assert p.returncode == 1 and "pip install" in p.stderr and "Traceback" not in p.stderr
    p = run("run", "linear-relu", "--headless", "--quiet")
    assert p.returncode == 0, p.stderr


def test_import_autograd_tui_does_not_import_torch() -> None:
    code = ("import sys, autograd_tui, autograd_tui.engine, autograd_tui.scenarios\n"
            "from autograd_tui.engine import torch_bridge\n"
            "from autograd_tui import scenarios; scenarios.builtins()\n"
            "print('torch' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == "False", p.stderr


def test_the_bridge_is_layered_with_no_import_cycle() -> None:
    """convert at the bottom; capture and hooks import only convert; bridge, then program,
    on top.  Every import counts: at the top, inside a function, under TYPE_CHECKING."""
    import ast

    pkg = ROOT / "engine" / "torch_bridge"
    below = {"convert": set(), "saved": {"convert"}, "queries": {"convert"},
             "sites": set(), "naming": {"sites"},
             "capture": {"convert", "saved", "sites", "naming"}, "hooks": {"convert"},
             "compiled": {"convert"}, "ddp": {"convert"}, "nested": {"convert"},
             "stepped": {"convert"}, "script_run": {"convert", "sites", "compiled"},
             "recompute": {"capture"},
             "bridge": {"convert", "capture", "hooks", "queries", "saved", "ddp", "recompute",
                        "sites"},
             "inplace": {"convert", "capture"},
             "program": {"convert", "capture", "compiled", "hooks", "bridge", "inplace", "ddp",
                         "script_run"}}
    assert {p.stem for p in pkg.glob("*.py")} == {*below, "__init__"}
    for name, allowed in below.items():
        tree = ast.parse((pkg / f"{name}.py").read_text())
        mine = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                mine |= ({node.module.split(".")[0]} if node.module
                         else {a.name for a in node.names})
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module.startswith("autograd_tui"):
                    mine.add(node.module)  # the engine imports nothing from the debugger
            elif isinstance(node, ast.Import):
                mine |= {a.name for a in node.names if a.name.startswith("autograd_tui")}
        assert mine <= allowed, (name, mine - allowed)
    # The bridge sits on the engine: no engine module imports it back.
    for path in (ROOT / "engine").rglob("*.py"):
        if pkg not in path.parents:
            assert "torch_bridge" not in {
                m for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.ImportFrom)
                for m in [*(node.module or "").split("."), *(a.name for a in node.names)]
            }, path


def test_gradients_are_float64_exact_against_torch() -> None:
    torch.manual_seed(3)
    w = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    x = torch.randn(2, 4, dtype=torch.float64)
    loss = ((x @ w).relu() @ w).tanh().sum()  # w used twice
    torch.autograd.backward(loss, retain_graph=True)
    expected = w.grad.clone()
    w.grad = None
    ours(loss)
    np.testing.assert_allclose(w.grad.numpy(), expected.numpy(), rtol=1e-12, atol=0)


def test_graphviz_clusters_and_details_show_modules(tmp_path: Path) -> None:
    from autograd_tui import scenarios
    from autograd_tui.app.render import node_details
    from autograd_tui.export.dot import to_dot
    from autograd_tui.session.run import Run

    with Run(scenarios.get("torch-cnn")) as run:
        run.run()
        state = run.history.head
    dot = to_dot(state)
    assert 'id="cluster_m_cpu_conv"' in dot and "conv <I>Conv2d</I>" in dot
    conv = [n for n, i in state.nodes.items() if i.name == "ConvolutionBackward0"]
    assert len(conv) == 2  # the shared layer, called twice
    text = node_details(state, conv[0]).plain
    assert "module: conv (Conv2d)" in text
    assert "torch_cnn.py" in text and "self.conv(" in text
    assert "saved tensors (" in text and "weight: Tensor[3, 3, 3, 3] float64" in text
    assert text.count("648 B") == 1  # its size, said once (the bridge's, not again)


def test_node_meta_events_are_no_steps() -> None:
    """A step does not stop at each node's node_meta (a model has thousands): the step after
    dependencies_computed holds every node_meta and ends at the engine's next event."""
    from autograd_tui import scenarios
    from autograd_tui.session import Session
    from autograd_tui.session.run import Run

    run = Run(scenarios.get("torch-attention"), {"layers": 2})
    try:
        s = Session.from_run(run)
        kinds = []
        while not kinds or kinds[-1] != "dependencies_computed":
            kinds = [e.kind for e in s.step_any().events]
        step = [e.kind for e in s.step_any().events]
        assert step[:-1] == ["node_meta"] * (len(step) - 1) and len(step) > 100
        assert step[-1] != "node_meta"
        s.run_until_breakpoint()
        metas = sum(e.kind == "node_meta" for e in run.events)
        runs = run.controller.schedule_string().split(",")
        assert sum(int(r.split(":")[1]) for r in runs) == len(run.events) - metas + 1
    finally:
        assert run.close()
