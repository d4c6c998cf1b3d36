"""Issue 31: recordings built to be expensive, not broken (tests/hostile.py).  Each file
is under 10 MB; each command on it (``replay --headless``, ``export``, ``chrome-trace``,
the app opening it and stepping to the end) runs in a child process and must finish, or
stop with one message, within 1 GiB of resident memory (``os.wait4``'s ``ru_maxrss`` of
that child) and a wall-clock bound.

The wall-clock bound is the issue's requirement for hostile input (10 s), not a speed
goal, and kept generous: WALL_S is three times it, for a shared 2-core machine.  (Before
the fix these files took 790 MB to 2 GB, 36 s, or no answer in 120 s.)"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hostile import CASES

from autograd_tui.history import lines
from autograd_tui.history import recordings as trace

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parents[2]
GiB = 2**30
WALL_S = 30.0  # three times the 10 s: generous, see above
CLI = [sys.executable, "-m", "autograd_tui"]
WALK = """
import asyncio, sys
sys.path.insert(0, sys.argv[2])
from autograd_tui.history import recordings as trace
from autograd_tui.app import AutogradApp
from pilot import settle
try:
    rec = trace.load(sys.argv[1])
except trace.TraceError as e:
    print(f"autograd-tui: {e}")
    sys.exit(1)
app = AutogradApp(recording=rec)
async def walk():
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, timeout=120)
        await pilot.press("end")
        await settle(pilot, timeout=120)
        print("shown:", app.debugger.sub_title)
asyncio.run(walk())
"""


def measure(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, float, int]:
    """(exit code, output, seconds, peak resident bytes) of one child process."""
    t0 = time.monotonic()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         env={**os.environ, **(env or {})}, cwd=ROOT)
    killer = threading.Timer(240, p.kill)  # a hang fails below, instead of the whole run
    killer.start()
    try:
        out = p.stdout.read().decode(errors="replace")  # type: ignore[union-attr]
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    finally:
        killer.cancel()
        p.stdout.close()  # type: ignore[union-attr]
    return p.returncode, out, time.monotonic() - t0, usage.ru_maxrss * 1024


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("hostile")
    out = {}
    for name, make in CASES.items():
        p = out[name] = folder / f"{name}.jsonl"
        p.write_bytes(make())
        assert p.stat().st_size < 10 * 2**20
    return out


def commands(p: Path) -> dict[str, list[str]]:
    return {
        "replay": [*CLI, "replay", "--headless", str(p)],
        "export": [*CLI, "export", str(p), "-o", str(p.with_suffix(".dot"))],
        "chrome-trace": [*CLI, "chrome-trace", str(p), "-o", str(p.with_suffix(".json"))],
        "app": [sys.executable, "-c", WALK, str(p), str(ROOT / "tests" / "app")],
    }


REFUSED = {"last-node-repeated": "node 190000 is listed twice"}


@pytest.mark.parametrize("command", ["replay", "export", "chrome-trace", "app"])
@pytest.mark.parametrize("case", list(CASES))
def test_each_command_on_each_crafted_file_is_bounded(files, case, command):
    rc, out, wall, rss = measure(commands(files[case])[command])
    assert "Traceback" not in out, out[-3000:]
    if case in REFUSED:  # one message, exit 1
        assert rc == 1 and out.count("autograd-tui:") == 1 and REFUSED[case] in out, out
    else:
        assert rc == 0, out[-3000:]
    assert rss < GiB, f"{case} {command}: {rss / 2**20:.0f} MB"
    assert wall < WALL_S, f"{case} {command}: {wall:.1f} s"
    if command == "app" and case not in REFUSED:
        n = trace.load(files[case]).footer["events"]
        assert f"event {n}/{n}" in out


def test_wide_nodes_store_only_their_filled_slots(files):
    head = trace.load(files["wide-inputs-waiting"]).history.head
    buf = next(iter(head.buffers.values()))
    assert len(buf) == 65_536 and buf[65_535] is not None and buf[0] is None
    assert sum(map(len, buf.chunks.values())) == 64  # one chunk, not 65,536 slots
    dot = files["wide-inputs-waiting"].with_suffix(".dot")
    rc, out, _, _ = measure(commands(files["wide-inputs-waiting"])["export"])
    assert rc == 0, out
    text = dot.read_text()
    assert "… 65,520 more" in text and len(text) < 200_000  # was 131 MB for 20 nodes


def test_a_deep_stack_is_shared_between_states(files):
    h = trace.load(files["starts-never-ended"]).history
    a, b = h.state_at(100_000), h.state_at(100_001)
    sa, sb = a.threads["cpu (owner)"].nodes, b.threads["cpu (owner)"].nodes
    assert len(sa) == 100_000 - 2 and len(sb) == 100_001 - 2  # after two events of set-up
    assert sb[:-1] == sa and sb[-1] == (1, 1)
    snap = h.state_at(h.every * 50).threads["cpu (owner)"].nodes  # the cells below are shared
    cell = sa
    while len(cell) > len(snap):
        cell = cell.parent
    assert cell is snap or cell == snap


def test_a_load_past_the_budget_stops_with_one_message(files, monkeypatch):
    monkeypatch.setattr(lines, "memory_budget", lambda: 1)  # any growth is too much
    with pytest.raises(trace.TraceError) as err:
        trace.load(files["pushes-never-popped"])
    msg = str(err.value)
    assert "the budget for a recording" in msg and "AUTOGRAD_TUI_MAX_RECORDING_MB" in msg


def test_the_budget_is_a_figure(monkeypatch):
    monkeypatch.delenv("AUTOGRAD_TUI_MAX_RECORDING_MB", raising=False)
    assert lines.memory_budget() == 1344 * 2**20
    assert "1,344 MB" in lines.budget_words()


def test_memory_error_while_loading_is_the_budget_message(files, monkeypatch):
    def exhausted(*a, **k):
        raise MemoryError
    monkeypatch.setattr(trace, "stream", exhausted)  # it decodes and folds
    with pytest.raises(trace.TraceError, match="the budget for a recording"):
        trace.load(files["nested-graph-tasks"])


def test_memory_error_in_a_command_is_the_budget_message(files, monkeypatch, capsys):
    from autograd_tui.commands import parser
    from autograd_tui.export import chrome_trace

    def exhausted(*a, **k):
        raise MemoryError
    monkeypatch.setattr(chrome_trace, "to_chrome_trace", exhausted)
    p = files["nested-graph-tasks"]
    code = parser.main(["chrome-trace", str(p), "-o", str(p.with_suffix(".mem.json"))])
    err = capsys.readouterr().err
    assert code == 1 and "the budget for a recording" in err and "Traceback" not in err


SIGNALLED = """
import os, signal, sys
from autograd_tui.history import recordings
from autograd_tui.commands.parser import main
class Dying:  # the signal arrives while the events are being written
    def __init__(self, encoder):
        self.encoder = encoder
    def encode(self, e):
        if getattr(e, "seq", None) == 20:
            os.kill(os.getpid(), getattr(signal, sys.argv[2]))
        return self.encoder.encode(e)
    def encode_lines(self, evs):  # the writer encodes a block of events at a time
        if any(getattr(e, "seq", None) == 20 for e in evs):
            os.kill(os.getpid(), getattr(signal, sys.argv[2]))
        return self.encoder.encode_lines(evs)
recordings._ENCODER = Dying(recordings._ENCODER)
sys.exit(main(["run", "linear-relu", "--headless", "--record", sys.argv[1]]))
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_signal_during_run_record_leaves_no_temporary_file(tmp_path, sig):
    out = tmp_path / "run.jsonl.gz"
    rc, text, _, _ = measure([sys.executable, "-c", SIGNALLED, str(out), sig])
    assert rc == 130 and f"interrupted ({sig})" in text and "Traceback" not in text, text
    assert list(tmp_path.iterdir()) == []  # no recording, no hidden .tmp


def test_a_write_refused_by_the_os_says_what_the_os_said(tmp_path):
    rc, text, _, _ = measure([*CLI, "chrome-trace", "linear-relu", "-o", "/proc/version"])
    assert rc == 1 and "does not exist" not in text
    assert os.strerror(2) in text or os.strerror(13) in text or os.strerror(30) in text, text


def test_the_graph_pane_draws_deep_nesting_to_a_depth(files):
    """Frames nested deeper than MAX_NEST are drawn at the top level: each of the 600
    GraphTasks has its frame and its node's box (it was cubic in the depth, and
    recursive)."""
    from autograd_tui.app import graph_draw

    state = trace.load(files["nested-graph-tasks"]).history.head
    block = graph_draw.draw(state)
    assert len(block.tasks or {}) == 600 and len(block.where) == 600
    borders = [line.plain[:len(line.plain) - len(line.plain.lstrip("│ "))].count("│")
               for line in block.lines]
    assert max(borders) == graph_draw.MAX_NEST + 2  # 7 frames at most, and a box's border
