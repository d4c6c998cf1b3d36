"""Graphviz export: DOT snapshots, rendering with real ``dot``, frames, bad input.

Snapshots live in ``tests/export/snapshots_dot/``; after a deliberate change to the
drawing, rewrite them with ``UPDATE_SNAPSHOTS=1 pytest tests/export/test_export.py``
and review the diff.  The reentrant, deadlock, pool and multi-device runs use
small scenario files written here (not built-ins), so their snapshots do not
move when the built-in scenarios change.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
import shutil
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from autograd_tui import export as gx
from autograd_tui import scenarios
from autograd_tui.commands import main
from autograd_tui.history import History
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(300)

BUILTINS_AT_IMPORT = [s.name for s in scenarios.builtins()]

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots_dot"
UPDATE = os.environ.get("UPDATE_SNAPSHOTS") == "1"
HAVE_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAVE_DOT, reason="Graphviz dot is not installed")
SVG = "{http://www.w3.org/2000/svg}"

# --- scenario files (deterministic under the default round-robin schedule) -------------------
_REENTRANT = '''\
from __future__ import annotations

from autograd_tui import engine
from autograd_tui.engine import Function

NAME = "{name}"
EXPECT = "{expect}"
ENGINE = {engine}


class Reentrant(Function):
    """Each backward runs a nested backward of a fresh Reentrant, until ctx.x < 0."""

    @staticmethod
    def forward(ctx, x):
        with engine.enable_grad():
            ctx.x = engine.tensor(float(x.detach()), requires_grad=True, device=x.device) - 1
        return ctx.x.detach()

    @staticmethod
    def backward(ctx, g):
        if ctx.x < 0:
            return g
        with engine.enable_grad():
            Reentrant.apply(ctx.x).sum().backward()
        return g


def program():
    v = engine.tensor({start}, requires_grad=True)
    Reentrant.apply(v).sum().backward()
    return {{"v": v.grad}}
'''

SCENARIO_FILES = {
    # a Function on the CPU whose backward calls backward, with reentrant="block": the owner
    # waits on the nested GraphTask's future while that GraphTask's first task sits in its
    # own queue.
    "reentrant-block": _REENTRANT.format(name="reentrant-block", expect="deadlock",
                                         engine='{"reentrant": "block"}', start="1.0"),
    # the same with PyTorch's behaviour: a nested thread_main on the owner
    "reentrant-nested": _REENTRANT.format(name="reentrant-nested", expect="complete",
                                          engine='{"reentrant": "nested"}', start="1.0"),
    # deeper than max_recursion_depth: the innermost backward is handed to a pool thread
    "reentrant-pool": _REENTRANT.format(name="reentrant-pool", expect="complete",
                                        engine='{"max_recursion_depth": 1}', start="2.0"),
    "multi-device": '''\
from __future__ import annotations

from autograd_tui import engine

NAME = "multi-device"


def program():
    """cpu -> cuda:0 -> cuda:1 and back to cpu, with a leaf on the CPU and one on cuda:1."""
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    w = engine.tensor([0.5, -0.25], requires_grad=True, device="cuda:1")
    y = (x * 2).to("cuda:0").exp().to("cuda:1")
    loss = (y * w).to("cpu").sum() + (x * x).sum()
    loss.backward()
    return {"x": x.grad, "w": w.grad}
''',
}


@pytest.fixture(scope="module")
def scenario_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("export_scenarios")
    for name, text in SCENARIO_FILES.items():
        (d / f"{name.replace('-', '_')}.py").write_text(text)
    return d


def _source(name: str, scenario_dir: Path) -> str:
    if name in SCENARIO_FILES:
        return str(scenario_dir / f"{name.replace('-', '_')}.py")
    return name


@functools.cache
def _run(source: str) -> tuple[str, History]:
    scenario = scenarios.load(source)
    run = Run(scenario)
    try:
        result = run.run()
        assert result.status in ("finished", "deadlock"), result
    finally:
        assert run.close()
    return scenario.name, run.history


def history_of(name: str, scenario_dir: Path) -> tuple[str, History]:
    return _run(_source(name, scenario_dir))


def state_at(history: History, at: int | str):
    """What ``export --at`` draws: ``History.state_at(k)``, the state after events 1..k."""
    return history.state_at(len(history) if at == "end" else int(at))


# --- snapshots --------------------------------------------------------------------------------
def check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / f"{name}.dot"
    data = text.encode()
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_bytes(data)
        return
    assert path.exists(), (f"no snapshot {path.name}: run UPDATE_SNAPSHOTS=1 pytest "
                           f"{Path(__file__).name} and review it")
    want = path.read_bytes()
    if data != want:
        diff = "".join(difflib.unified_diff(want.decode().splitlines(True), text.splitlines(True),
                                            f"{path.name} (snapshot)", "now", n=1))
        pytest.fail(f"DOT differs from {path.name} (UPDATE_SNAPSHOTS=1 rewrites it):\n"
                    + diff[:6000])


SNAPSHOT_CASES = [
    # name, scenario, at (event number or "end"), to_dot options
    ("linear-relu-at-2", "linear-relu", 2, {}),        # dependencies computed
    ("linear-relu-at-26", "linear-relu", 26, {}),      # two tasks in the ready queue
    ("linear-relu-at-33", "linear-relu", 33, {}),      # Linear1's buffer enters not_ready
    ("linear-relu-at-53", "linear-relu", 53, {}),      # ReLU's gradient added: bold edge
    ("linear-relu-end", "linear-relu", "end", {}),
    ("linear-relu-at-33-lr-novalues", "linear-relu", 33, {"rankdir": "LR", "values": False}),
    ("linear-relu-end-collapsed", "linear-relu", "end", {"collapse_leaves": True}),
    ("reentrant-block-deadlock", "reentrant-block", "end", {}),
    ("reentrant-nested-at-16", "reentrant-nested", 16, {}),  # the hand-off (nested)
    ("reentrant-nested-at-25", "reentrant-nested", 25, {}),  # inside the nested GraphTask
    ("reentrant-pool-at-40", "reentrant-pool", 40, {}),      # a pool thread runs GT3
    ("multi-device-at-61-lr-collapsed", "multi-device", 61,
     {"rankdir": "LR", "collapse_leaves": True}),
    ("multi-device-at-28", "multi-device", 28, {}),  # a not_ready leaf, added into
    # the built-in scenarios for the same lessons (rewrite these snapshots when the
    # scenarios change on purpose)
    ("builtin-deadlock-reentrant-block-end", "deadlock-reentrant-block", "end", {}),
    ("builtin-reentrant-at-33", "reentrant", 33, {}),  # the nested hand-off
    ("builtin-reentrant-at-42", "reentrant", 42, {}),  # inside the nested GraphTask
]


@pytest.mark.parametrize("snap,name,at,opts", SNAPSHOT_CASES, ids=[c[0] for c in SNAPSHOT_CASES])
def test_dot_snapshot(snap, name, at, opts, scenario_dir):
    title, history = history_of(name, scenario_dir)
    state = state_at(history, at)
    text = gx.to_dot(state, title=title, **opts)
    assert text == gx.to_dot(state_at(history, at), title=title, **opts)  # stable
    check_snapshot(snap, text)


def test_snapshots_show_what_they_are_for(scenario_dir):
    """A few facts the snapshots must show, checked on the text (not just equality)."""
    _, h = history_of("linear-relu", scenario_dir)
    at33 = gx.to_dot(state_at(h, 33))
    assert 'BGCOLOR="#ffd8a8"' in at33 and "in 0: [-0.3]" in at33  # not_ready, filled slot
    assert "seq max" in at33 and "18446744073709551615" not in at33
    assert "after 33 events" in at33 and "event 33 · cpu (owner) · GT1 · not_ready" in at33
    at53 = gx.to_dot(state_at(h, 53))
    assert 'n4 -> n6 [id="e4_0", label="in 0 (just flowed)", style="bold"' in at53
    assert at53.count('style="bold"') == 1
    assert "in 0: [0.7]" in at53  # the live buffer, not the snapshot taken at insertion
    novalues = gx.to_dot(state_at(h, 33), values=False)
    assert "in 0: filled 1×1" in novalues and "[-0.3]" not in novalues
    at26 = gx.to_dot(state_at(h, 26))
    assert at26.index("LinearBackward0 #5 · GT1") < at26.index("ReluBackward0 #4 · GT1")
    collapsed = gx.to_dot(state_at(h, "end"), collapse_leaves=True)
    assert 'leaves_cpu [id="leaves_cpu"' in collapsed and " n7 [" not in collapsed
    assert "-> n7" not in collapsed and "→ leaves #7, #8" in collapsed  # listed, not drawn
    assert "from #5" in collapsed and "from #6" in collapsed
    _, dl = history_of("reentrant-block", scenario_dir)
    text = gx.to_dot(dl.head)
    for i, entry in enumerate(["thread cpu (owner)", "future GraphTask 2", "queue cpu"]):
        assert f'dl{i} [id="dl{i}"' in text and f'label="{entry}"' in text
    assert 'dl0 -> dl1' in text and 'dl2 -> dl0' in text
    assert 'dl0 -> n2' in text and 'dl2 -> n4' in text  # inside / holds
    assert 'COLOR="#e03131" BORDER="3"' in text


@pytest.mark.parametrize("name", BUILTINS_AT_IMPORT)
def test_builtin_lessons_are_drawn(name):
    """Every built-in: each hand-off shows in the GraphTasks table, a deadlock in red."""
    _, h = _run(name)
    for i, e in enumerate(h.events):
        if e.kind == "reentrant_handoff":
            text = gx.to_dot(h.state_at(i + 1))
            parent = e.data["parent_graph_task"]
            if parent is not None:
                assert f"from GT{parent} ({e.data['mode']})" in text
    end = h.state_at(len(h))
    text = gx.to_dot(end)
    if end.deadlock:
        assert "cluster_deadlock" in text
        assert all(f'label="{c}"' in text for c in end.deadlock["cycle"])
    else:
        assert "cluster_deadlock" not in text
    assert all(f" n{i} [" in text for i in end.nodes)


def test_same_state_same_bytes_however_it_was_reached(scenario_dir):
    _, h = history_of("linear-relu", scenario_dir)
    # folding once (the frames' way) and seeking (History.state_at) agree at every event
    ks = []
    for k, state in gx.states_after(h.events, range(len(h) + 1)):
        assert gx.to_dot(state, title="t") == gx.to_dot(h.state_at(k), title="t"), k
        ks.append(k)
    assert ks == list(range(len(h) + 1))
    # a second run of the scenario gives the same bytes
    again = Run(scenarios.load("linear-relu"))
    try:
        again.run()
    finally:
        again.close()
    assert gx.to_dot(again.history.state_at(53)) == gx.to_dot(h.state_at(53))


def test_recording_gives_the_same_dot_as_the_run(tmp_path, scenario_dir):
    run = Run(scenarios.load("linear-relu"))
    try:
        run.run()
        run.save(tmp_path / "lr.jsonl.gz")
    finally:
        run.close()
    _, h = history_of("linear-relu", scenario_dir)
    out = tmp_path / "from-rec.dot"
    assert cli("lr.jsonl.gz", "--at", "53", "-o", out.name, cwd=tmp_path)[0] == 0
    assert out.read_text() == gx.to_dot(h.state_at(53), title="linear-relu")


@pytest.mark.parametrize("at", ["0", "1", "2", "33", "53", "n", "end"])
def test_at_k_draws_the_state_after_events_1_to_k(at, tmp_path, scenario_dir):
    """``export --at k`` is ``History.state_at(k)``: k in 0..n, 0 before any event."""
    _, h = history_of("linear-relu", scenario_dir)
    n = len(h)
    arg = str(n) if at == "n" else at
    k = n if at in ("n", "end") else int(at)
    out = tmp_path / "at.dot"
    code, stdout, err = cli("linear-relu", "--at", arg, "-o", str(out))
    assert code == 0, err
    assert out.read_text() == gx.to_dot(h.state_at(k), title="linear-relu")
    assert f"after {k} event" in out.read_text()
    if k == 0:
        assert "no events yet" in stdout
    else:
        assert f"event {k} · " in stdout


def test_empty_state_is_a_valid_graph():
    from autograd_tui.history.state import EngineState

    text = gx.to_dot(EngineState())
    assert text.startswith("digraph autograd {") and "no events yet" in text


def test_quoting_of_odd_names():
    from autograd_tui.engine.events import make_event
    from autograd_tui.history.state import EngineState, NodeInfo, NodeState, ThreadState

    s = EngineState()
    s.nodes[1] = NodeInfo(1, 'Weird<&>"\\Backward', 'dev "x"', 3, 1, 1, ((None, 0),), False)
    s.node_states[1] = NodeState("running", 'thread "a"\\b', None)
    s.threads["t"] = ThreadState("t", "running")
    s.last_event = make_event(0, "node_start", 'thread "a"', None, 1, None,
                              {"name": "x", "depth": 0, "inputs": []})
    text = gx.to_dot(s)
    assert "Weird&lt;&amp;&gt;&quot;\\Backward" in text
    assert 'tooltip="Weird<&>\\"\\\\Backward #1 (running)"' in text
    if HAVE_DOT:
        assert gx.render(text, "svg").startswith(b"<?xml")


# --- rendering with real dot --------------------------------------------------------------------
def svg_ids(data: bytes) -> tuple[set[str], set[str]]:
    root = ET.fromstring(data)
    nodes = {g.get("id") for g in root.iter(f"{SVG}g") if g.get("class") == "node"}
    edges = {g.get("id") for g in root.iter(f"{SVG}g") if g.get("class") == "edge"}
    return nodes, edges


def check_render(state, fmt: str, **opts) -> bytes:
    data = gx.render(gx.to_dot(state, title="t", **opts), fmt, timeout=120)
    if fmt == "svg":
        nodes, edges = svg_ids(data)
        want = {f"n{i}" for i in state.nodes} | {"side", "legend"}
        assert want <= nodes, sorted(want - nodes)
        want_edges = {f"e{n}_{k}" for n, info in state.nodes.items()
                      for k, (dst, _) in enumerate(info.next) if dst in state.nodes}
        assert want_edges <= edges, sorted(want_edges - edges)
        if state.deadlock:
            assert {f"dl{i}" for i in range(len(state.deadlock["cycle"]))} <= nodes
    elif fmt == "png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
    else:
        assert data.startswith(b"%PDF")
    return data


@needs_dot
@pytest.mark.parametrize("fmt", ["svg", "png", "pdf"])
@pytest.mark.parametrize("name", BUILTINS_AT_IMPORT)
def test_every_builtin_renders_at_the_end_and_midway(name, fmt):
    _, h = _run(name)
    assert len(h) > 0
    check_render(h.state_at(len(h)), fmt)
    check_render(h.state_at(len(h) // 2), fmt)


@needs_dot
@pytest.mark.parametrize("name", list(SCENARIO_FILES))
def test_scenario_files_render(name, scenario_dir):
    _, h = history_of(name, scenario_dir)
    for at in (len(h) // 2, len(h)):
        check_render(h.state_at(at), "svg")
        check_render(h.state_at(at), "svg", rankdir="LR", values=False)
    check_render(h.head, "png")
    check_render(h.head, "pdf")


@needs_dot
def test_collapsed_leaves_render_with_ports(scenario_dir):
    _, h = history_of("multi-device", scenario_dir)
    data = gx.render(gx.to_dot(h.head, collapse_leaves=True), "svg")
    nodes, _ = svg_ids(data)
    assert {"leaves_cpu", "leaves_cuda_1"} <= nodes
    assert not any(f"n{i}" in nodes for i, info in h.head.nodes.items() if info.leaf)


# --- the command ----------------------------------------------------------------------------
def cli(*argv: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """Run ``autograd-tui export ARGV`` in this process; returns (code, stdout, stderr)."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    old = Path.cwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(["export", *argv])
            except SystemExit as e:  # argparse's own usage errors
                code = e.code
    finally:
        os.chdir(old)
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), err.getvalue()


@needs_dot
@pytest.mark.parametrize("fmt", ["svg", "png", "pdf", "dot"])
def test_export_one_state(tmp_path, fmt):
    out = tmp_path / f"lr.{fmt}"
    code, stdout, err = cli("linear-relu", "--at", "52", "-o", str(out))
    assert code == 0, err
    assert "wrote" in stdout and "event 52" in stdout
    data = out.read_bytes()
    assert data[:4] in (b"<?xm", b"\x89PNG", b"%PDF", b"digr")
    assert not (tmp_path / "lr.dot").exists() or fmt == "dot"


def test_export_state_for_the_app(tmp_path, scenario_dir, monkeypatch):
    """``export_state(state, path)`` (the app's export dialog): one message or ExportError."""
    _, h = history_of("linear-relu", scenario_dir)
    state = h.state_at(33)
    msg = gx.export_state(state, tmp_path / "a.dot")
    assert msg.startswith(f"wrote {tmp_path / 'a.dot'}") and "event 33 · " in msg
    assert (tmp_path / "a.dot").read_text() == gx.to_dot(state)
    with pytest.raises(gx.ExportError, match="unknown format 'gif'"):
        gx.export_state(state, tmp_path / "a.gif")
    with pytest.raises(gx.ExportError, match="is a directory"):
        gx.export_state(state, tmp_path)
    with pytest.raises(gx.ExportError, match="does not exist"):
        gx.export_state(state, tmp_path / "nope" / "a.svg")
    if HAVE_DOT:
        gx.export_state(state, tmp_path / "a.svg")
        assert (tmp_path / "a.svg").read_bytes().startswith(b"<?xml")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(gx.DotNotFound, match="apt-get install graphviz"):
        gx.export_state(state, tmp_path / "b.png")
    assert (tmp_path / "b.dot").exists() and not (tmp_path / "b.png").exists()


def test_format_from_option_and_suffix(tmp_path):
    code, _, err = cli("linear-relu", "-o", str(tmp_path / "x.gv"))
    assert code == 0, err
    assert (tmp_path / "x.gv").read_text().startswith("digraph")
    code, _, err = cli("linear-relu", "--format", "dot", "-o", str(tmp_path / "y.txt"),
                       "--rankdir", "lr", "--no-values", "--collapse-leaves")
    assert code == 0, err
    text = (tmp_path / "y.txt").read_text()
    assert 'rankdir="LR"' in text and "leaves_cpu" in text and ".grad = " not in text


@needs_dot
def test_frames_every_event(tmp_path, scenario_dir):
    _, h = history_of("linear-relu", scenario_dir)
    out = tmp_path / "frames"
    code, stdout, err = cli("linear-relu", "--every", "1", "-o", str(out))
    assert code == 0, err
    files = sorted(p.name for p in out.glob("frame-*.svg"))
    assert files == [f"frame-{i:04d}.svg" for i in range(len(h))]  # one frame per event
    html = (out / "index.html").read_text()
    for f in files:
        assert f'"file": "{f}"' in html and f'href="{f}"' in html
    frames = _frames_json(html)
    assert [f["event"] for f in frames] == list(range(1, len(h) + 1))  # after event k
    assert frames[32]["text"] == gx.event_text(h.state_at(33))
    assert "not_ready += LinearBackward0#6" in frames[32]["text"]
    for f in (files[0], files[32], files[-1]):
        nodes, _ = svg_ids((out / f).read_bytes())
        assert "side" in nodes
    # each frame is the snapshot of its state
    assert (out / files[52]).read_bytes() == gx.render(
        gx.to_dot(h.state_at(53), title="linear-relu"), "svg")


def _frames_json(html: str) -> list[dict]:
    start = html.index("const FRAMES = ") + len("const FRAMES = ")
    end = html.index(";\nlet cur", start)
    return json.loads(html[start:end].replace("<\\/", "</"))


def test_frames_every_k_and_breakpoints(tmp_path, scenario_dir):
    _, h = history_of("linear-relu", scenario_dir)
    out = tmp_path / "k"
    assert cli("linear-relu", "--every", "10", "--format", "dot", "-o", str(out))[0] == 0
    n = len(h)
    want = list(range(10, n + 1, 10)) + ([n] if n % 10 else [])  # every 10th, and the last
    assert [f["event"] for f in _frames_json((out / "index.html").read_text())] == want
    assert len(list(out.glob("frame-*.dot"))) == len(want)

    src = _source("reentrant-block", scenario_dir)
    _, dl = history_of("reentrant-block", scenario_dir)
    out = tmp_path / "bp"
    code, _, err = cli(src, "--breakpoints", "--format", "dot", "-o", str(out))
    assert code == 0, err
    frames = _frames_json((out / "index.html").read_text())
    kinds = [dl.events[f["event"] - 1].kind for f in frames]  # frame after event k
    assert kinds == [e.kind for e in dl.events if e.kind in gx.BREAKPOINT_KINDS]
    assert kinds[-1] == "deadlock" and "node_start" in kinds
    assert "dl0 -> dl1" in (out / frames[-1]["file"]).read_text()
    assert '<iframe id="frame"' in (out / "index.html").read_text()


JS_HARNESS = r"""
const fs = require('fs');
const html = fs.readFileSync(process.argv[2], 'utf8');
const script = html.match(/<script>([\s\S]*)<\/script>/)[1];
const els = {};
function el(id) { return els[id] || (els[id] = {id, src: '', textContent: '', onclick: null}); }
let onKey = null;
var document = {getElementById: el, querySelectorAll: () => [],
                addEventListener: (t, f) => { if (t === 'keydown') onKey = f; }};
var history = {replaceState() {}};
var location = {hash: ''};
var window = {scrollTo() {}};
eval(script);
const out = [];
function snap(k) { out.push([k, el('frame').src, el('pos').textContent, el('text').textContent]); }
snap('init');
for (const k of ['ArrowRight', 'ArrowRight', 'ArrowLeft', 'End', 'ArrowRight', 'Home',
                 'ArrowLeft']) { onKey({key: k, preventDefault() {}}); snap(k); }
console.log(JSON.stringify(out));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_index_html_steps_with_the_arrow_keys(tmp_path):
    out = tmp_path / "f"
    assert cli("linear-relu", "--every", "1", "--format", "dot", "-o", str(out))[0] == 0
    harness = tmp_path / "harness.js"
    harness.write_text(JS_HARNESS)
    proc = subprocess.run(["node", str(harness), str(out / "index.html")], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    steps = json.loads(proc.stdout)
    srcs = [s[1] for s in steps]
    n = len(list(out.glob("frame-*.dot")))
    last = f"frame-{n - 1:04d}.dot"
    assert srcs == ["frame-0000.dot", "frame-0001.dot", "frame-0002.dot", "frame-0001.dot",
                    last, last, "frame-0000.dot", "frame-0000.dot"]
    assert steps[1][2] == f"frame 2 / {n} (event 2)"
    assert steps[1][3].startswith("event 2 · cpu (owner) · GT1 · dependencies")


# --- bad input ---------------------------------------------------------------------------------
def test_index_past_the_end(tmp_path, scenario_dir):
    _, h = history_of("linear-relu", scenario_dir)
    n = len(h)
    code, _, err = cli("linear-relu", "--at", str(n + 1), "-o", str(tmp_path / "x.svg"))
    assert code == 2
    assert f"--at {n + 1} is past the end: linear-relu has {n} events (1..{n})" in err
    assert not (tmp_path / "x.svg").exists()
    code, _, err = cli("linear-relu", "--at=-1", "-o", str(tmp_path / "x.svg"))
    assert code == 2
    assert "event numbers start at 1; --at 0 is the state before any event" in err
    code, _, err = cli("linear-relu", "--at=soon", "-o", str(tmp_path / "x.svg"))
    assert code == 2 and "--at must be an event number or 'end', not 'soon'" in err


def test_unwritable_paths(tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a folder")
    code, _, err = cli("linear-relu", "-o", str(blocker / "out.svg"))
    assert code == 1 and "cannot write" in err and "is a file, not a directory" in err
    code, _, err = cli("linear-relu", "-o", str(tmp_path / "missing" / "out.svg"))
    assert code == 1 and "does not exist" in err
    code, _, err = cli("linear-relu", "-o", str(tmp_path))
    assert code == 1 and "is a directory" in err
    code, _, err = cli("linear-relu", "--every", "5", "-o", str(blocker))
    assert code == 1 and "not a directory" in err
    if os.geteuid() != 0:  # root may write anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
        try:
            code, _, err = cli("linear-relu", "-o", str(ro / "x.svg"))
            assert code == 1 and "permission denied" in err
        finally:
            ro.chmod(stat.S_IRWXU)


def test_unknown_format(tmp_path):
    code, _, err = cli("linear-relu", "--format", "gif", "-o", str(tmp_path / "x.gif"))
    assert code == 2 and "unknown format 'gif'" in err and "svg" in err
    code, _, err = cli("linear-relu", "-o", str(tmp_path / "x.jpeg"))
    assert code == 2 and "unknown format 'jpeg'" in err
    code, _, err = cli("linear-relu", "--rankdir", "BT", "-o", str(tmp_path / "x.dot"))
    assert code == 2 and "--rankdir" in err


def test_other_bad_usage(tmp_path):
    code, _, err = cli("no-such-scenario", "-o", str(tmp_path / "x.svg"))
    assert code == 2 and "no scenario named" in err
    code, _, err = cli("linear-relu", "--every", "0", "-o", str(tmp_path / "f"))
    assert code == 2 and "--every" in err
    code, _, err = cli("linear-relu", "--policy", "bogus", "-o", str(tmp_path / "x.svg"))
    assert code == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text("this is not a recording\n")
    code, _, err = cli(str(bad), "-o", str(tmp_path / "x.svg"))
    assert code == 1 and "bad.jsonl" in err
    code, _, err = cli(str(tmp_path / "missing.jsonl.gz"), "-o", str(tmp_path / "x.svg"))
    assert code == 1 and "no such file" in err
    code, _, err = cli("linear-relu")
    assert code == 2 and "-o/--output" in err
    code, _, err = cli("linear-relu", "-o", "x.svg", "--at", "3", "--every", "2")
    assert code == 2 and "not allowed with argument" in err


def test_errors_are_one_line_in_the_one_dialect(tmp_path):
    """Every command's problems read ``autograd-tui: <message>``, classified by type."""
    code, _, err = cli("linear-relu", "--every", "0", "-o", str(tmp_path / "f"))
    assert (code, err) == (2, "autograd-tui: --every must be a positive number of events, "
                              "not 0\n")
    code, _, err = cli("linear-relu", "--param", "nope=1", "-o", str(tmp_path / "x.svg"))
    assert code == 2
    assert err == ("autograd-tui: linear-relu: unknown parameter 'nope' "
                   "(parameters: b1, b2, w1, w2, x)\n")
    code, _, err = cli("linear-relu", "--engine", "reentrant=sideways",
                       "-o", str(tmp_path / "x.svg"))
    assert code == 2
    assert err == ("autograd-tui: bad engine options for linear-relu: reentrant must be "
                   "'nested' or 'block', not 'sideways'\n")
    code, _, err = cli("linear-relu", "-o", str(tmp_path / "no" / "x.svg"))
    assert code == 1 and err.startswith("autograd-tui: ") and err.count("\n") == 1


def test_dot_missing(tmp_path, monkeypatch):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, _, err = cli("linear-relu", "--at", "32", "-o", str(tmp_path / "x.svg"))
    assert code == 1
    assert "not found on PATH" in err
    assert "apt-get install graphviz" in err and "brew install graphviz" in err
    assert (tmp_path / "x.dot").read_text().startswith("digraph")
    assert not (tmp_path / "x.svg").exists()
    out = tmp_path / "frames"
    code, _, err = cli("linear-relu", "--every", "20", "--format", "png", "-o", str(out))
    assert code == 1 and "apt-get install graphviz" in err
    assert sorted(p.name for p in out.iterdir())[:2] == ["frame-0000.dot", "frame-0001.dot"]
    assert "frame-0000.dot" in (out / "index.html").read_text()


def test_dot_missing_in_a_fresh_process(tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    code = ("import sys; from autograd_tui.commands import main; "
            f"sys.exit(main(['export', 'linear-relu', '-o', {str(tmp_path / 'out.pdf')!r}]))")
    env = dict(os.environ, PATH=str(empty))
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "apt-get install graphviz" in proc.stderr and "brew install graphviz" in proc.stderr
    assert (tmp_path / "out.dot").exists()


def _fake_dot(tmp_path: Path, body: str) -> Path:
    d = tmp_path / "fake-bin"
    d.mkdir()
    exe = d / "dot"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(0o755)
    return d


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for dot")
def test_dot_fails_or_hangs(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(_fake_dot(tmp_path, "echo 'Error: syntax error' >&2; exit 1")))
    code, _, err = cli("linear-relu", "-o", str(tmp_path / "a.svg"))
    assert code == 1 and "failed" in err and "syntax error" in err
    assert (tmp_path / "a.dot").exists()
    code, _, err = cli("linear-relu", "--every", "40", "-o", str(tmp_path / "fr"))
    assert code == 1 and "frame-0000: `dot -Tsvg` failed" in err
    assert (tmp_path / "fr" / "frame-0000.dot").exists()
    hang = tmp_path / "hang"
    hang.mkdir()
    monkeypatch.setenv("PATH", str(_fake_dot(hang, "exec sleep 30")) + os.pathsep + "/bin")
    code, _, err = cli("linear-relu", "--timeout", "0.5", "-o", str(tmp_path / "b.png"))
    assert code == 1 and "longer than 0.5 s" in err
