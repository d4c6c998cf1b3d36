"""Recording format version 5 (DDP's ``ddp_*`` kinds and the header's ``distributed``):
files are written as version 5; a version 5 file with DDP's kinds loads; a version 4 file
(with or without them: the release that added them wrote version 4) loads as before,
event for event; a newer version is refused with one clear message, not misread."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograd_tui import scenarios
from autograd_tui.engine.events import make_event
from autograd_tui.history import recordings as trace
from autograd_tui.history.ddp import NEVER, REDUCED, ddp_state, never_ready_lines
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(120)
DISTRIBUTED = {"rank": 1, "world_size": 2, "backend": "gloo"}


def _run(tmp_path: Path) -> trace.Recording:
    run = Run(scenarios.get("linear-relu"))
    assert run.run().status == "finished"
    run.save(tmp_path / "run.jsonl")
    return trace.load(tmp_path / "run.jsonl")


def _with_ddp(rec: trace.Recording) -> list:
    """The run's events, then one rank's DDP events (bucket 0 reduced, bucket 1 never
    ready), numbered on: event k has seq k."""
    n, t = len(rec.events), rec.events[-1].thread
    ddp = [("ddp_bucket_assigned", {"rank": 1, "bucket": 0, "params": ["c.weight"]}),
           ("ddp_bucket_assigned", {"rank": 1, "bucket": 1, "params": ["b.bias"]}),
           ("ddp_bucket_ready", {"rank": 1, "bucket": 0, "params": ["c.weight"]}),
           ("ddp_allreduce_start", {"rank": 1, "bucket": 0, "hook": "allreduce_hook"}),
           ("ddp_allreduce_end", {"rank": 1, "bucket": 0}),
           ("ddp_bucket_never_ready", {"rank": 1, "bucket": 1, "params": ["b.bias"],
                                       "missing": ["b.bias"], "find_unused": False,
                                       "static_graph": False})]
    return [*rec.events, *(make_event(n + 1 + i, k, t, None, None, None, d)
                           for i, (k, d) in enumerate(ddp))]


def _save(tmp_path: Path, name: str, rec: trace.Recording, version: int, events: list,
          **header: object) -> Path:
    p = tmp_path / name
    trace.save(p, {**rec.header, **header, "version": version}, events, rec.footer)
    return p


def test_files_are_written_as_version_5(tmp_path: Path) -> None:
    rec = _run(tmp_path)
    assert trace.VERSION == 5 and rec.header["version"] == 5
    assert (tmp_path / "run.jsonl").read_bytes().split(b"\n", 1)[0].endswith(b'"version":5}')
    assert trace.SUPPORTED_VERSIONS == (1, 2, 3, 4, 5)


def test_a_version_5_file_with_ddps_kinds_loads(tmp_path: Path) -> None:
    rec = _run(tmp_path)
    got = trace.load(_save(tmp_path, "v5.jsonl", rec, 5, _with_ddp(rec),
                           distributed=DISTRIBUTED))
    assert got.header["version"] == 5 and got.header["distributed"] == DISTRIBUTED
    assert [e.kind for e in got.events][-6:] == [
        "ddp_bucket_assigned", "ddp_bucket_assigned", "ddp_bucket_ready",
        "ddp_allreduce_start", "ddp_allreduce_end", "ddp_bucket_never_ready"]
    buckets = ddp_state(got.events)[1].buckets
    assert buckets[0].state == REDUCED and buckets[1].state == NEVER
    (line,) = never_ready_lines(got.events)
    assert line.startswith("b.bias got no gradient on rank 1")


@pytest.mark.parametrize("ddp", [False, True])
def test_a_version_4_file_loads_as_before(tmp_path: Path, ddp: bool) -> None:
    rec = _run(tmp_path)
    events = _with_ddp(rec) if ddp else list(rec.events)
    extra = {"distributed": DISTRIBUTED} if ddp else {}
    v5 = trace.load(_save(tmp_path, "v5.jsonl", rec, 5, events, **extra))
    v4 = trace.load(_save(tmp_path, "v4.jsonl", rec, 4, events, **extra))
    assert v4.header["version"] == 4 and {**v4.header, "version": 5} == v5.header
    assert list(v4.events) == list(v5.events)
    same = {k: v for k, v in v5.footer.items() if k != "checksum"}  # the header differs
    assert {k: v for k, v in v4.footer.items() if k != "checksum"} == same
    for k in range(len(events) + 1):
        assert v4.state_at(k) == v5.state_at(k)


def test_a_newer_version_is_refused_with_one_clear_message(tmp_path: Path) -> None:
    rec = _run(tmp_path)
    p = _save(tmp_path, "v6.jsonl", rec, 6, _with_ddp(rec), distributed=DISTRIBUTED)
    with pytest.raises(trace.TraceError) as e:
        trace.load(p)
    assert str(e.value) == (f"{p}, line 1: format version 6 is not understood; this "
                            "program reads version(s) 1, 2, 3, 4, 5")
