"""DDP through the bridge (engine/torch_bridge/ddp.py): two ranks, gloo on 127.0.0.1.

Each rank is a process of its own (started here as ``torch.distributed.run`` would, with
RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, and killed at the end whatever happens); the
program (``ddp_program.py``) writes each rank's ``.grad`` and DDP's own bucket assignment
at exit.  Skipped without torch or without torch.distributed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the bridge needs PyTorch (pip install torch)")
if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

import ddp_ranks  # noqa: E402
from ddp_ranks import PROGRAM, RANKS, launch  # noqa: E402

from autograd_tui.history import recordings  # noqa: E402

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("no_thread_left")]


def tool(*extra: str) -> list[str]:
    return ddp_ranks.tool(PROGRAM, *extra)


def saved(tmp: Path, mode: str, rank: int) -> dict:
    return torch.load(tmp / f"{mode}-{rank}.pt")


def test_every_rank_ends_with_plain_ddps_gradients_headless_and_recorded(
        tmp_path: Path, ddp_recorded: Path):
    launch(tmp_path, "plain", [str(PROGRAM)])
    launch(tmp_path, "headless", tool())
    recorded = ddp_recorded  # the recorded run (conftest.py), which test_ddp_pane reads too
    for r in range(RANKS):
        want = saved(tmp_path, "plain", r)["grads"]
        assert set(want) == {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"}
        for mode, folder in (("headless", tmp_path), ("recorded", recorded)):
            got = saved(folder, mode, r)["grads"]
            for name, g in want.items():
                assert torch.equal(got[name], g), f"rank {r}, {mode}: {name}"
        # averaged across ranks: the same on both (each rank's own batch differs)
        other = saved(tmp_path, "plain", 1 - r)["grads"]
        assert all(torch.equal(g, other[n]) for n, g in want.items())
        rec = recordings.load(recorded / f"rank{r}.jsonl")
        assert any(e.kind == "ddp_finalize" and e.rank == r for e in rec.events)


def test_bucket_and_allreduce_events_follow_ddps_own_buckets(tmp_path: Path):
    outs = launch(tmp_path, "recorded", tool("--record", str(tmp_path / "rank{rank}.jsonl")),
                  {"AGT_DDP_HOOK": "1"})
    for r in range(RANKS):
        assert "my_hook called 2 times" in outs[r][1]  # the program's hook wrapped, still run
        buckets = dict(saved(tmp_path, "recorded", r)["buckets"])
        assert len(buckets) >= 2, buckets
        events = recordings.load(tmp_path / f"rank{r}.jsonl").events
        pos: dict[tuple[str, int], int] = {}
        for i, e in enumerate(events):
            if e.kind.startswith("ddp_") and e.kind != "ddp_finalize":
                assert e.rank == r
                assert (e.kind, e.bucket) not in pos, f"{e.kind} {e.bucket} twice"
                pos[e.kind, e.bucket] = i
        ready = {e.bucket: e.params for e in events if e.kind == "ddp_bucket_ready"}
        assert ready == buckets  # DDP's assignment, DDP's order of parameters
        assert all(e.hook.endswith("my_hook") for e in events
                   if e.kind == "ddp_allreduce_start")
        for k in buckets:
            assert pos["ddp_bucket_ready", k] < pos["ddp_allreduce_start", k] \
                < pos["ddp_allreduce_end", k]
        # a bucket is ready once its last parameter's AccumulateGrad ran
        names = {}
        for e in events:
            if e.kind == "node_meta" and e.tensor:
                names[e.node] = e.tensor.removeprefix("module.")
        starts = {names[e.node]: i for i, e in enumerate(events)
                  if e.kind == "node_start" and e.node in names}
        for k, params in buckets.items():
            assert max(starts[p] for p in params) < pos["ddp_bucket_ready", k]
        # the first bucket's all-reduce starts while the backward still runs (the overlap)
        last_node = max(i for i, e in enumerate(events) if e.kind == "node_end")
        assert pos["ddp_allreduce_start", 0] < last_node
        fin = next(i for i, e in enumerate(events) if e.kind == "ddp_finalize")
        assert max(pos["ddp_allreduce_end", k] for k in buckets) < fin
        assert not any(e.kind == "ddp_bucket_never_ready" for e in events)


# --- one process: the hooks PyTorch runs around an AccumulateGrad, each once --------------------
def test_every_hook_on_a_leaf_runs_once_as_under_pytorch() -> None:
    from autograd_tui import engine
    from autograd_tui.engine.torch_bridge import capture, from_torch

    def program(calls: list[str]) -> tuple:
        w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
        w.register_hook(lambda g: calls.append("tensor") or g * 3)
        w.register_post_accumulate_grad_hook(lambda p: calls.append(f"post_acc {p.grad}"))
        with capture():
            loss = (w * w).sum()
        acc = loss.grad_fn.next_functions[0][0].next_functions[0][0]
        acc.register_prehook(lambda go: calls.append("pre") or None)
        acc.register_hook(lambda gi, go: calls.append("post") or None)
        return w, loss

    theirs: list[str] = []
    w, loss = program(theirs)
    loss.backward()
    want = w.grad.clone()
    ours: list[str] = []
    w, loss = program(ours)
    eng, obs = engine.Engine(), engine.ListObserver()
    eng.add_observer(obs)
    try:
        with engine.use_engine(eng):
            from_torch(loss).backward()
    finally:
        eng.close()
    assert ours == theirs  # each hook once, in PyTorch's order, none lost or doubled
    assert theirs.count("tensor") == 1 and any(c.startswith("post_acc") for c in theirs)
    assert torch.equal(w.grad, want)  # the tensor hook's * 3 reached .grad once
    kinds = [e.hook_kind for e in obs.events if e.kind == "hook"]
    assert {"tensor_pre", "pre", "post"} <= set(kinds)  # ours to run, with their events
