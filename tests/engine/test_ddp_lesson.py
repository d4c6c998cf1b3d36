"""The DDP lesson (scenarios/_torch_ddp_unused.py) run to its documented outcome on two
ranks (gloo, 127.0.0.1), by our tool and by PyTorch alone: without a fix, rank 1's buckets
holding ``b``'s parameters never become ready (the events and the words name the
parameter, the rank and the bucket), rank 1's next forward raises PyTorch's error, rank 0
fails waiting; each fix completes with PyTorch's gradients on both ranks."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the bridge needs PyTorch (pip install torch)")
if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

from ddp_ranks import ROOT, launch, tool  # noqa: E402

from autograd_tui.history import recordings  # noqa: E402
from autograd_tui.history.ddp import NEVER, REDUCED, ddp_state  # noqa: E402
from autograd_tui.words import event_words, never_ready_explanation  # noqa: E402

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("no_thread_left")]
LESSON = ROOT / "scenarios" / "_torch_ddp_unused.py"
ERROR = "Expected to have finished reduction in the prior iteration"


def test_without_a_fix_a_bucket_never_becomes_ready_on_rank_1(tmp_path: Path) -> None:
    # INFO: PyTorch's error names the parameters (DETAIL, which names them the same way,
    # segfaults in DDP's constructor in torch 2.13 CPU, in plain PyTorch too)
    env = {"LESSON_NEXT": "1", "LESSON_TIMEOUT": "60", "TORCH_DISTRIBUTED_DEBUG": "INFO"}
    ours = launch(tmp_path, "tool", tool(LESSON, "--record", str(tmp_path / "r{rank}.jsonl")),
                  env, check=False)
    plain = launch(tmp_path, "plain", [str(LESSON)], env, check=False)
    for runs in (ours, plain):  # what PyTorch says, and where: the same by both
        (rc0, out0), (rc1, out1) = runs
        assert rc1 == 0, out1  # rank 1's backward completes ...
        assert f"next iteration: RuntimeError: {ERROR}" in out1  # ... its next forward errs
        assert rc0 != 0 and "Connection closed by peer" in out0, out0  # rank 0 waited
    events = recordings.load(tmp_path / "r1.jsonl").events
    never = [e for e in events if e.kind == "ddp_bucket_never_ready"]
    assert never and all(e.rank == 1 for e in never)
    missing = sorted(p for e in never for p in e.missing)
    assert missing == ["b.bias", "b.weight"]
    # the names PyTorch itself gives them: "Parameters which did not receive grad for
    # rank 1: b.bias, b.weight" (its order is an unordered_map's)
    said = [line.rsplit(": ", 1)[1] for line in plain[1][1].splitlines()
            if line.startswith("next iteration: Parameters which did not receive grad for "
                               "rank 1: ")]
    assert len(said) == 1 and sorted(said[0].split(", ")) == missing, plain[1][1]
    assert not any(e.kind in ("ddp_finalize", "ddp_allreduce_start") for e in events)
    state = ddp_state(events)[1]
    for e in never:
        assert state.buckets[e.bucket].state == NEVER
        words = never_ready_explanation(1, e.bucket, list(e.missing), e.find_unused,
                                        e.static_graph)
        for name in e.missing:
            assert name in words and name in event_words(e)
        assert "rank 1" in words and f"bucket {e.bucket}" in words
        assert ERROR in words and "find_unused_parameters=True" in words \
            and "static_graph=True" in words


@pytest.mark.parametrize("fix", ["find_unused_parameters", "static_graph"])
def test_each_fix_completes_with_pytorchs_gradients(tmp_path: Path, fix: str) -> None:
    (tmp_path / "tool").mkdir()
    (tmp_path / "plain").mkdir()
    env = {"LESSON_FIX": fix, "LESSON_NEXT": "1", "LESSON_TIMEOUT": "60"}
    outs = launch(tmp_path, "tool", tool(LESSON, "--record", str(tmp_path / "r{rank}.jsonl")),
                  {**env, "LESSON_OUT": str(tmp_path / "tool")})
    launch(tmp_path, "plain", [str(LESSON)], {**env, "LESSON_OUT": str(tmp_path / "plain")})
    for r, (_, out) in enumerate(outs):
        assert "next iteration: completed" in out  # PyTorch's next iteration is fine too
        events = recordings.load(tmp_path / f"r{r}.jsonl").events
        assert not any(e.kind == "ddp_bucket_never_ready" for e in events)
        state = ddp_state(events)[r]
        assert state.finalized and state.buckets
        assert all(b.state == REDUCED for b in state.buckets.values())
        want = torch.load(tmp_path / "plain" / f"{r}.pt")
        got = torch.load(tmp_path / "tool" / f"{r}.pt")
        assert set(got) == set(want) == {"a.weight", "a.bias", "b.weight", "b.bias",
                                         "c.weight", "c.bias"}
        for name, g in want.items():
            assert torch.equal(got[name], g), f"rank {r}, {fix}: {name}"
    g0, g1 = (torch.load(tmp_path / "tool" / f"{r}.pt") for r in (0, 1))
    assert all(torch.equal(g0[n], g1[n]) for n in g0)  # averaged: the same on both ranks
