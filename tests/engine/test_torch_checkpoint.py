"""Non-reentrant checkpoint, multi-grad hooks and PyTorch's graph-task queries under the
bridge (engine/torch_bridge/queries.py, saved.py), each against plain PyTorch on the same
program.  Skipped without torch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the bridge needs PyTorch (pip install torch)")

from autograd_tui import engine  # noqa: E402
from autograd_tui.engine.torch_bridge import capture, from_torch  # noqa: E402

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("no_thread_left")]


def run_ours(build: Callable[[], Any], inputs: Callable[[Any], Any] | None = None
             ) -> tuple[Any, list[Any]]:
    """``build()`` under capture(), its backward on a fresh engine of ours: (the result of
    build, the events)."""
    eng, obs = engine.Engine(), engine.ListObserver()
    eng.add_observer(obs)
    try:
        with capture():
            res = build()
        loss = res[0] if isinstance(res, tuple) else res
        with engine.use_engine(eng):
            from_torch(loss, None, inputs(res) if inputs else None).backward()
    finally:
        eng.close()
    return res, obs.events


def run_torch(build: Callable[[], Any], inputs: Callable[[Any], Any] | None = None) -> Any:
    res = build()
    loss = res[0] if isinstance(res, tuple) else res
    torch.autograd.backward(loss, inputs=inputs(res) if inputs else None)
    return res


# --- non-reentrant checkpoint with a BatchNorm inside ---------------------------------------
class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc, self.bn = torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)
        self.calls = 0

    def forward(self, x: Any) -> Any:
        self.calls += 1
        return torch.tanh(self.bn(self.fc(x)))


def checkpointed(reentrant: bool) -> Callable[[], Any]:
    from torch.utils.checkpoint import checkpoint

    def build() -> Any:
        torch.manual_seed(0)
        m = torch.nn.ModuleDict({"a": torch.nn.Linear(3, 4), "b": Block(),
                                 "c": torch.nn.Linear(4, 1)}).double()
        x = torch.randn(5, 3, dtype=torch.float64)
        h = checkpoint(m["b"], m["a"](x), use_reentrant=reentrant)
        return m["c"](h).pow(2).mean(), m
    return build


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_runs_the_model_as_pytorch_does(reentrant: bool) -> None:
    (_, ref), (_, m) = run_torch(checkpointed(reentrant)), run_ours(checkpointed(reentrant))[0]
    assert m["b"].calls == ref["b"].calls == 2  # the forward, and one recompute
    assert int(m["b"].bn.num_batches_tracked) == int(ref["b"].bn.num_batches_tracked) == 2
    for k, v in ref.state_dict().items():  # running_mean/var, num_batches_tracked, weights
        assert torch.equal(m.state_dict()[k], v), k
    for k, p in ref.named_parameters():
        # The last bits of a bias's sum may differ (gradients reach a node as contiguous
        # NumPy arrays, PyTorch's may be expanded): that is check-order's tolerance.
        torch.testing.assert_close(dict(m.named_parameters())[k].grad, p.grad, rtol=1e-12,
                                   atol=1e-15, msg=k)


def test_the_recompute_and_its_unpacks_are_events() -> None:
    (_, m), events = run_ours(checkpointed(False))
    hooks = [e for e in events if e.kind == "hook"]
    rec = [e for e in hooks if e.data["hook_kind"] == "recompute"]
    unpacks = [e for e in hooks if e.data["hook_kind"] == "unpack"]
    assert len(rec) == 1 and m["b"].calls == 2
    assert unpacks and rec[0].seq < unpacks[0].seq
    # On a node the engine was running, inside its node_start .. node_end.
    starts = {e.node: e.seq for e in events if e.kind == "node_start"}
    ends = {e.node: e.seq for e in events if e.kind == "node_end"}
    for e in (*rec, *unpacks):
        assert starts[e.node] < e.seq < ends[e.node]
    # Saved tensors under hooks were not read for the node_meta summaries.
    saved = [s for e in events if e.kind == "node_meta" for s in e.data["saved"]]
    assert any("read when the node runs" in s for s in saved)


def test_reentrant_checkpoint_has_no_recompute_hook_events() -> None:
    _, events = run_ours(checkpointed(True))
    assert not [e for e in events if e.kind == "hook"
                and e.data["hook_kind"] in ("recompute", "unpack")]
    assert len({e.graph_task for e in events if e.graph_task is not None}) == 2


# --- multi-grad hooks and the graph-task queries ----------------------------------------------
def multi(log: list[Any]) -> Any:
    def build() -> Any:
        torch.manual_seed(0)
        a = torch.randn(2, 3, requires_grad=True, dtype=torch.float64)
        b = torch.randn(2, 3, requires_grad=True, dtype=torch.float64)
        c, d = a * b, a * b
        e = torch.randn(2, 3, requires_grad=True, dtype=torch.float64) * 2  # not in the graph
        out = c.sum() + (d * 0).sum()

        def summ(g: Any) -> Any:
            return None if g is None else round(float(g.sum()), 9)

        torch.autograd.graph.register_multi_grad_hook(
            (a, b, c, d), lambda gs: log.append(("all", [summ(g) for g in gs])))
        torch.autograd.graph.register_multi_grad_hook(
            (a, b, c), lambda g: log.append(("any", summ(g))), mode="any")

        def query(g: Any) -> None:
            node = torch._C._current_autograd_node()
            log.append(("queries", torch._C._current_graph_task_id() != -1,
                        [torch._C._will_engine_execute_node(n.grad_fn) for n in (c, d, e, out)],
                        node.name() if node is not None else None,
                        torch._C._autograd._get_current_graph_task_keep_graph()))

        c.register_hook(query)
        return out, a, b
    return build


@pytest.mark.parametrize("only_a", [False, True])
def test_multi_grad_hooks_and_queries_agree_with_pytorch(only_a: bool) -> None:
    inputs = (lambda r: (r[1],)) if only_a else None
    want: list[Any] = []
    run_torch(multi(want), inputs)
    got: list[Any] = []
    run_ours(multi(got), inputs)
    assert got == want
    assert [k for k, *_ in want] == ["any", "queries", "all"]


def test_queries_answer_as_pytorch_outside_a_backward_and_are_restored() -> None:
    before = (torch._C._current_graph_task_id, torch._C._will_engine_execute_node,
              torch._C._current_autograd_node)
    run_ours(multi([]))
    assert (torch._C._current_graph_task_id, torch._C._will_engine_execute_node,
            torch._C._current_autograd_node) == before
    assert torch._C._current_graph_task_id() == -1
    assert torch._C._current_autograd_node() is None


# --- the lesson, recorded and exported ---------------------------------------------------------
def test_the_lesson_records_the_recompute_and_export_draws_it(tmp_path: Path, capsys) -> None:
    """Both commands through ``main`` in this process (their real processes: test_cli's
    ``run --record``, test_numbering's ``export --at``)."""
    from autograd_tui.commands import main
    from autograd_tui.history import recordings

    rec = tmp_path / "ckpt.jsonl"
    code = main(["run", "torch-checkpoint-nonreentrant", "--headless", "--record", str(rec)])
    out_, err = capsys.readouterr()
    assert code == 0, err
    assert "recompute in TanhBackward0" in out_  # the headless event log
    events = recordings.load(rec).events
    k = next(i for i, e in enumerate(events, 1)
             if e.kind == "hook" and e.data["hook_kind"] == "recompute")
    assert any(e.kind == "reentrant_handoff" for e in events[k:])  # block1, after block2
    out = tmp_path / "at.dot"
    code = main(["export", str(rec), "--at", str(k), "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    assert "recompute in TanhBackward0" in out.read_text()
