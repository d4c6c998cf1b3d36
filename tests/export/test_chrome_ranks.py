"""Several ranks' runs in one Chrome trace (``chrome_ranks.merge_chrome_traces``, and
``chrome-trace`` given a folder or several recordings): one process per rank, pid = rank,
named "rank K", every event of rank K in process K, flow ids unique in the file."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import graphs
import pytest
from test_chrome_trace import run_controlled, validate

from autograd_tui.commands.parser import main
from autograd_tui.export.chrome_ranks import merge_chrome_traces, rank_of
from autograd_tui.export.chrome_trace import CLOCK_NOTE, to_chrome_trace
from autograd_tui.history import recordings as trace
from autograd_tui.history.recordings import TraceError, make_header

pytestmark = pytest.mark.timeout(120)


def header(rank: int | None) -> dict[str, Any]:
    h = make_header(scenario="device-last")
    if rank is not None:
        h["distributed"] = {"rank": rank, "world_size": 2, "backend": "gloo"}
    return h


def split(t: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The merged trace, one single-process trace per pid."""
    pids = sorted({ev["pid"] for ev in t["traceEvents"]})
    return {pid: {"traceEvents": [ev for ev in t["traceEvents"] if ev["pid"] == pid],
                  "displayTimeUnit": "ms", "metadata": {"clock": CLOCK_NOTE}}
            for pid in pids}


@pytest.fixture(scope="module")
def two_runs() -> list[Any]:
    return [run_controlled(graphs.device_last), run_controlled(graphs.device_last)]


def test_one_process_per_rank_named_and_ordered_by_rank(two_runs: list[Any]) -> None:
    # given rank 1 first: the header's rank decides, not the order
    t = merge_chrome_traces([(two_runs[0], header(1)), (two_runs[1], header(0))])
    names = {ev["pid"]: ev["args"]["name"] for ev in t["traceEvents"]
             if ev["ph"] == "M" and ev["name"] == "process_name"}
    assert names == {0: "rank 0", 1: "rank 1"}
    parts = split(t)
    assert set(parts) == {0, 1}
    single = to_chrome_trace(two_runs[0])
    for part in parts.values():
        validate(part)  # each process is a whole, valid trace of its rank
        # every event of the rank is in its process: as many as the run alone draws
        kinds = Counter(ev["ph"] for ev in part["traceEvents"] if ev["ph"] != "M")
        assert kinds == Counter(ev["ph"] for ev in single["traceEvents"] if ev["ph"] != "M")
    assert [r["rank"] for r in t["metadata"]["ranks"]] == [0, 1]
    assert t["metadata"]["ranks"][1]["distributed"]["rank"] == 1
    # flow ids are global to a file: the two ranks' wake-up arrows do not share one
    starts = [ev["id"] for ev in t["traceEvents"] if ev["ph"] == "s"]
    assert len(starts) == 2 and len(set(starts)) == 2
    flows = {ev["id"]: ev["pid"] for ev in t["traceEvents"] if ev["ph"] == "f"}
    assert sorted(flows.values()) == [0, 1]


def test_without_a_rank_in_the_header_the_order_gives_it(two_runs: list[Any]) -> None:
    assert rank_of(header(None), 3) == 3 and rank_of({"distributed": {"rank": True}}, 2) == 2
    t = merge_chrome_traces([(two_runs[0], None), (two_runs[1], header(None))])
    assert {ev["pid"] for ev in t["traceEvents"]} == {0, 1}
    with pytest.raises(TraceError, match="the same rank"):
        merge_chrome_traces([(two_runs[0], header(0)), (two_runs[1], header(0))])


def test_the_command_merges_a_folder_and_several_files(two_runs: list[Any], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    for k, events in enumerate(two_runs):
        trace.save(runs / f"rank{k}.jsonl.gz", header(k), events, {"schedule": ""})
    (runs / "logs").mkdir()  # torch --ranks's logs: not a recording
    out = tmp_path / "t.json"
    assert main(["chrome-trace", str(runs), "-o", str(out)]) == 0
    assert "of 2 ranks: 0, 1, a process each" in capsys.readouterr().out
    t = json.loads(out.read_text())
    assert {ev["pid"] for ev in t["traceEvents"]} == {0, 1}
    assert main(["chrome-trace", str(runs / "rank1.jsonl.gz"), str(runs / "rank0.jsonl.gz"),
                 "-o", str(out)]) == 0
    assert json.loads(out.read_text()) == t
    # one rank's recording: its own process, pid = its rank
    assert main(["chrome-trace", str(runs / "rank0.jsonl.gz"), "-o", str(out)]) == 0
    assert "events of rank 0)" in capsys.readouterr().out
    one = json.loads(out.read_text())["traceEvents"]
    assert {ev["pid"] for ev in one} == {0}
    assert [ev["args"]["name"] for ev in one if ev["name"] == "process_name"] == ["rank 0"]
    capsys.readouterr()
    assert main(["chrome-trace", str(tmp_path), "-o", str(out)]) == 1
    assert "no recording of a rank in it" in capsys.readouterr().err
    assert main(["chrome-trace", "linear-relu", str(runs / "rank0.jsonl.gz"),
                 "-o", str(out)]) == 2
    assert "must all be recordings" in capsys.readouterr().err
