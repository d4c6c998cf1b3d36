"""Recordings are untrusted data: sizes checked before allocating, streamed
decompression with a cap, semantically wrong files refused with one message, and
loading leaves nothing pinned in memory.  Each file here has a valid checksum (the
checksum is unkeyed: anyone can recompute it, and ``recordings.save`` does)."""

from __future__ import annotations

import gc
import gzip
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from forge import signed

from autograd_tui import scenarios
from autograd_tui.history import recordings as trace
from autograd_tui.history.checks import MAX_NODE_INPUTS
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("untrusted") / "linear-relu.jsonl"
    with Run(scenarios.get("linear-relu")) as run:
        run.run()
        run.save(path)
    return path


def _forge(tmp_path: Path, good: Path, change, footer: dict | None = None) -> Path:
    """``good`` with its events changed, saved with a recomputed checksum."""
    rec = trace.load(good)
    p = tmp_path / "forged.jsonl"
    trace.save(p, rec.header, change(list(rec.events)), footer or {
        k: v for k, v in rec.footer.items() if k not in ("checksum", "events")})
    return p


def _with_nodes(edit):
    def change(events):
        i = next(i for i, e in enumerate(events) if e.kind == "dependencies_computed")
        events[i] = msgspec.structs.replace(events[i], nodes=edit(list(events[i].nodes)))
        return events
    return change


def test_a_huge_stated_number_of_inputs_is_refused_before_allocating(good, tmp_path):
    p = _forge(tmp_path, good, _with_nodes(
        lambda ns: [ns[0]._replace(num_inputs=10**9), *ns[1:]]))
    with pytest.raises(trace.TraceError, match=rf"states 1000000000 inputs \(0..{MAX_NODE_INPUTS}"):
        trace.load(p)


def test_a_node_listed_twice_is_refused(good, tmp_path):
    p = _forge(tmp_path, good, _with_nodes(lambda ns: [*ns, ns[0]]))
    with pytest.raises(trace.TraceError, match="node 1 is listed twice"):
        trace.load(p)


def test_dependencies_of_a_node_that_does_not_exist_are_refused(good, tmp_path):
    def change(events):
        i = next(i for i, e in enumerate(events) if e.kind == "dependencies_computed")
        deps = [*events[i].dependencies, (999, 1)]
        events[i] = msgspec.structs.replace(events[i], dependencies=deps)
        return events
    with pytest.raises(trace.TraceError, match="dependencies name node 999, which does not"):
        trace.load(_forge(tmp_path, good, change))


def test_a_graph_task_completed_twice_is_refused(good, tmp_path):
    def change(events):
        done = next(e for e in events if e.kind == "completion")
        return [*events, msgspec.structs.replace(done, seq=len(events) + 1)]
    with pytest.raises(trace.TraceError, match="GraphTask 1 completed twice"):
        trace.load(_forge(tmp_path, good, change))


@pytest.mark.parametrize("status,message", [
    ("deadlock", "the footer says a deadlock, but the recording holds no deadlock event"),
    ("exploded", r"footer: Invalid enum value 'exploded' - at `\$.status`"),
])
def test_a_footer_status_that_contradicts_the_events_is_refused(good, tmp_path, status,
                                                                 message):
    rec = trace.load(good)
    footer = {"schedule": rec.footer["schedule"], "status": status}
    with pytest.raises(trace.TraceError, match=message):
        trace.load(_forge(tmp_path, good, lambda events: events, footer))


def test_a_gzip_bomb_is_stopped_at_the_cap(tmp_path, monkeypatch):
    p = tmp_path / "bomb.jsonl.gz"
    with gzip.open(p, "wb", compresslevel=9) as f:
        for _ in range(64):
            f.write(b"\0" * 2**20)  # 64 MB of zeros: 64 KB on disk
    assert p.stat().st_size < 2**20
    monkeypatch.setenv("AUTOGRAD_TUI_MAX_RECORDING_MB", "8")
    with pytest.raises(trace.TraceError, match="would take more than 8 MB, the memory "
                                               "limit for a recording; set "
                                               "AUTOGRAD_TUI_MAX_RECORDING_MB"):
        trace.load(p)


def test_a_plain_file_over_the_cap_is_refused(good, tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOGRAD_TUI_MAX_RECORDING_MB", "0.001")  # about 1 KB
    with pytest.raises(trace.TraceError, match="would take more than 0 MB"):
        trace.load(good)


def test_the_cap_is_on_memory_and_says_how_much(good, tmp_path, monkeypatch):
    """The file is under the cap, but its lines (each an event of the fold) make the
    estimate pass it: refused before decoding, with the memory it would take and the
    setting that allows it; that setting then loads it."""
    from autograd_tui.history import lines as lines_mod
    data = good.read_bytes()
    need = lines_mod.estimate(len(data), data.count(b"\n"), data.index(b"\n"))
    assert need > 2 * len(data)  # the estimate counts the events, not only the bytes
    monkeypatch.setenv("AUTOGRAD_TUI_MAX_RECORDING_MB", str(len(data) * 1.5 / 2**20))
    decoded = []
    monkeypatch.setattr(trace, "stream", lambda *a: decoded.append(a))  # never reached
    with pytest.raises(trace.TraceError) as err:
        trace.load(good)
    msg = str(err.value)
    assert not decoded
    assert f"would take about {need / 2**20:,.0f} MB of memory" in msg, msg
    mb = -(-need // 2**20)
    assert f"set AUTOGRAD_TUI_MAX_RECORDING_MB (MB of memory) to at least {mb:,}" in msg
    monkeypatch.undo()
    monkeypatch.setenv("AUTOGRAD_TUI_MAX_RECORDING_MB", str(mb))
    assert len(trace.load(good).events) == data.count(b"\n") - 2  # header, footer


def test_a_million_event_recording_is_under_the_default_cap(monkeypatch):
    """bench_trace's recording (1,000,000 events, 147 MB) is estimated under the default
    cap, and under 1 GB: it opens by default."""
    from autograd_tui.history import lines as lines_mod
    monkeypatch.delenv("AUTOGRAD_TUI_MAX_RECORDING_MB", raising=False)
    need = lines_mod.estimate(147_488_752, 1_001_662, 14_500_000)
    assert need < lines_mod.max_bytes() == 2**30


def test_the_cap_does_not_change_what_loads(good, tmp_path):
    gz = tmp_path / "g.jsonl.gz"
    gz.write_bytes(gzip.compress(good.read_bytes()))
    assert trace.load(gz).events == trace.load(good).events


def test_deep_nesting_is_one_message(good, tmp_path):
    lines = good.read_bytes().splitlines(keepends=True)
    header = json.loads(lines[0])
    deep = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    text = json.dumps(header).encode()[:-1] + b',"deep":' + deep + b"}\n"
    p = tmp_path / "deep.jsonl"
    p.write_bytes(text + b"".join(lines[1:]))
    with pytest.raises(trace.TraceError) as err:
        trace.load(p)
    assert "line 1" in str(err.value)


def test_a_small_load_freezes_nothing(good):
    gc.collect()
    frozen = gc.get_freeze_count()
    for _ in range(5):
        trace.load(good)
    assert gc.get_freeze_count() == frozen and gc.isenabled()


def test_repeated_big_loads_do_not_pile_up_frozen_objects(good, monkeypatch):
    """A big load freezes what it built (so the collector skips it); the next load
    releases that first, so loading again and again holds one load's worth at most."""
    monkeypatch.setattr(trace, "FREEZE_ABOVE", 0)  # every load is "big"
    counts = []
    try:
        for _ in range(5):
            trace.load(good)
            counts.append(gc.get_freeze_count())
    finally:
        gc.unfreeze()
        monkeypatch.setattr(trace, "_frozen", False)
    assert counts[0] > 0 and max(counts[1:]) <= counts[0] * 1.2 + 1000, counts
    assert gc.isenabled()


@pytest.mark.parametrize("stated", ["inputs", "bomb"])
def test_crafted_files_under_a_1_gb_address_space_limit(good, tmp_path, stated):
    """The sizes a file states are checked before allocating: under a 1 GiB RLIMIT_AS
    (the whole process: Python, NumPy, the app's modules) the command ends with its
    one message, not a MemoryError or a traceback."""
    if stated == "inputs":
        p = _forge(tmp_path, good, _with_nodes(
            lambda ns: [ns[0]._replace(num_inputs=10**9), *ns[1:]]))
        message = "states 1000000000 inputs"
    else:  # 2 GB of zeros, 2 MB on disk: the default cap (128 MB) stops it
        p = tmp_path / "bomb.jsonl.gz"
        with gzip.open(p, "wb", compresslevel=9) as f:
            for _ in range(2048):
                f.write(b"\0" * 2**20)
        message = "gzip data would take more than 1,024 MB"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))

    out = subprocess.run([sys.executable, "-m", "autograd_tui", "replay", str(p),
                          "--headless"], capture_output=True, text=True, timeout=100,
                         cwd=ROOT, preexec_fn=limit, env={**os.environ,
                                                          "OPENBLAS_NUM_THREADS": "1"})
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr and message in out.stderr


def test_deep_nesting_in_an_event_is_one_message(good, tmp_path):
    lines = good.read_bytes().splitlines(keepends=True)
    i = next(i for i, line in enumerate(lines) if b'"buffer_accumulate"' in line)
    event = json.loads(lines[i])
    event[8] = "DEEP"  # the slot's value summary
    deep = b"[" * 100_000 + b"1" + b"]" * 100_000
    lines[i] = json.dumps(event, separators=(",", ":")).encode().replace(b'"DEEP"', deep) + b"\n"
    rec = trace.load(good)
    p = tmp_path / "deep-event.jsonl"
    p.write_bytes(signed(lines[0], lines[1:-1], {
        "events": len(lines) - 2, "schedule": rec.footer["schedule"],
        "status": rec.footer["status"]}))
    with pytest.raises(trace.TraceError, match=rf"line {i + 1}: nested too deeply"):
        trace.load(p)


def test_a_cycle_in_the_graph_is_refused(good, tmp_path):
    """A self-loop made the app's layout raise NetworkXUnfeasible: topological_nr falls
    along every edge of a backward graph, so an edge that does not is refused."""
    p = _forge(tmp_path, good, _with_nodes(
        lambda ns: [ns[0], ns[1]._replace(next=((ns[1].id, 0), *ns[1].next)), *ns[2:]]))
    with pytest.raises(trace.TraceError, match="does not go down in topological_nr"):
        trace.load(p)
