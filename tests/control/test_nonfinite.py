"""The "first non-finite gradient" breakpoint (autograd_tui/control/nonfinite.py)."""

from __future__ import annotations

import pytest

from autograd_tui import engine, scenarios
from autograd_tui.control.nonfinite import explain, first_nonfinite, nonfinite
from autograd_tui.engine.events import ListObserver, summarize
from autograd_tui.history import History
from autograd_tui.session import Breakpoint, Session
from autograd_tui.session.run import Run


def test_nonfinite_reads_a_summary() -> None:
    assert nonfinite(summarize(engine.tensor([1.0, 2.0]))) is None
    assert nonfinite(summarize(engine.tensor([1.0, float("inf")]))) == "Inf"
    assert nonfinite(summarize(engine.tensor([float("inf"), float("nan")]))) == "NaN"
    # beyond the four values a summary keeps, the norm still tells
    assert nonfinite(summarize(engine.tensor([0.0] * 9 + [float("nan")]))) == "NaN"
    assert nonfinite(None) is None
    assert nonfinite({"shape": "?", "values": 3}) is None  # damaged: not a finding


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("op", "node", "what"), [("pow", "PowBackward0", "NaN"),
                                                    ("log", "LogBackward0", "NaN"),
                                                    ("div", "DivBackward0", "Inf")])
def test_the_breakpoint_stops_where_anomaly_mode_would(op: str, node: str, what: str) -> None:
    """A session with the breakpoint stops at the node_end of the node that anomaly mode
    names, in the first GraphTask, before the AccumulateGrad runs."""
    run = Run(scenarios.get("anomaly-nan"), params={"op": op})
    try:
        s = Session.from_run(run)
        s.breakpoints = [Breakpoint(nonfinite=True)]
        r = s.run_until_breakpoint()
        assert r.status == "breakpoint"
        hit = r.events[-1]
        assert hit.kind == "node_end" and hit.graph_task == 1
        f = first_nonfinite(hit)
        assert f is not None and f.what == what and f.slot == 0
        words = explain(f, run.history)
        assert words.startswith(f"first non-finite gradient: {node}#")
        assert f"holds {what}" in words and "so this node made it" in words
        assert "AccumulateGrad" in words
        state = run.history.state_at(hit.seq)
        assert all(st.state != "done" for n, st in state.node_states.items()
                   if state.nodes[n].name == "AccumulateGrad")
    finally:
        assert run.close()


@pytest.mark.timeout(60)
def test_a_non_finite_root_gradient_is_passed_on_not_made() -> None:
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3.0
    obs = ListObserver()
    with engine.Engine() as eng, engine.use_engine(eng):
        eng.add_observer(obs)
        y.backward(engine.tensor([float("nan"), 1.0]))
    h = History(sorted(obs.events, key=lambda e: e.seq))
    found = [f for e in h.events if (f := first_nonfinite(e)) is not None]
    assert found and found[0].event.node is not None
    words = explain(found[0], h)
    assert "MulBackward0" in words and "already non-finite" in words


@pytest.mark.timeout(60)
def test_a_finite_run_never_stops() -> None:
    run = Run(scenarios.get("linear-relu"))
    try:
        s = Session.from_run(run)
        s.breakpoints = [Breakpoint(nonfinite=True)]
        assert s.run_until_breakpoint().status == "finished"
    finally:
        assert run.close()


@pytest.mark.timeout(120)
def test_the_breakpoint_works_on_pytorchs_nodes(tmp_path) -> None:
    """A real PyTorch graph through the bridge: the same summaries, the same breakpoint."""
    pytest.importorskip("torch", reason="the PyTorch bridge needs torch (pip install torch)")
    from autograd_tui.session.torch_script import script_scenario

    script = tmp_path / "nan.py"
    script.write_text(
        "import torch\nfrom torch import nn\n\n"
        "def main():\n"
        "    torch.manual_seed(0)\n"
        "    lin = nn.Linear(3, 2).double()\n"
        "    x = torch.tensor([[0.0, 1.0, 2.0]], dtype=torch.float64)\n"
        "    return (lin(x).relu().sqrt() * 0).sum() + lin.weight.sum()\n")
    run = Run(script_scenario(str(script)))
    try:
        s = Session.from_run(run)
        s.breakpoints = [Breakpoint(nonfinite=True)]
        r = s.run_until_breakpoint()
        assert r.status == "breakpoint"
        f = first_nonfinite(r.events[-1])
        assert f is not None and f.what == "NaN"
        words = explain(f, run.history)
        assert words.startswith("first non-finite gradient: SqrtBackward0#")
        assert "ReluBackward0" in words and "so this node made it" in words
    finally:
        assert run.close()


def test_summaries_are_numpys_norm_and_values_bit_for_bit() -> None:
    """summarize computes the norm as np.linalg.norm does (sqrt(x.dot(x))) and the first
    values as floats, non-finite ones as strings: checked against NumPy itself."""
    import math

    import numpy as np

    rng = np.random.default_rng(7)
    arrays = [np.array(0.3), np.zeros((0, 3)), np.array([1e200, 1e200]), np.float32([1.5, 3e38]),
              np.arange(5), np.array([True, False]), rng.standard_normal((4, 3)).T]
    for _ in range(200):
        a = rng.standard_normal(tuple(int(x) for x in rng.integers(0, 4, rng.integers(0, 3))))
        if a.size and rng.random() < 0.3:
            a.flat[0] = rng.choice([np.nan, np.inf, -np.inf])
        arrays.append(a.astype(rng.choice([np.float64, np.float32])))
    with np.errstate(all="ignore"):
        for a in arrays:
            s = summarize(a)
            flat = np.asarray(a, dtype=float).reshape(-1)
            norm = float(np.linalg.norm(flat)) if flat.size else 0.0
            assert s["norm"] == (norm if math.isfinite(norm) else repr(norm))
            want = [float(v) if math.isfinite(v) else repr(float(v)) for v in flat[:4]]
            assert s["values"] == want and s["shape"] == list(np.shape(a))
            assert s["dtype"] == str(np.asarray(a).dtype)


@pytest.mark.timeout(120)
def test_run_headless_stop_at_nonfinite(tmp_path, capsys) -> None:
    """``--stop-at nonfinite``: the trace up to the node that made the NaN, what it found,
    exit 4; the recording holds the run so far; a finite run ends as usual (exit 0); the
    app has no such flag (its breakpoints dialog does it)."""
    from autograd_tui.commands import main
    from autograd_tui.history import recordings as trace

    rec = tmp_path / "nan.jsonl"
    assert main(["run", "anomaly-nan", "--headless", "--stop-at", "nonfinite",
                 "--record", str(rec)]) == 4
    out = capsys.readouterr().out
    assert "stopped at a non-finite gradient" in out
    assert "first non-finite gradient: PowBackward0#3 output 0 holds NaN" in out
    loaded = trace.load(rec)
    assert loaded.footer["status"] == "running" and loaded.events[-1].kind == "node_end"
    assert main(["run", "linear-relu", "--headless", "--quiet", "--stop-at", "nonfinite"]) == 0
    assert "completed" in capsys.readouterr().out
    assert main(["run", "anomaly-nan", "--stop-at", "nonfinite"]) == 2
    assert "--stop-at needs --headless" in capsys.readouterr().err
