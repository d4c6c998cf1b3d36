"""Recordings are untrusted data (DESIGN.md, "Conventions"): loading, showing,
exporting or re-executing one never runs code the file names, and every string from
it is shown as text (no Rich markup read, no control character reaching the terminal).

The hostile recordings here are written with ``recordings.save``, which computes a
fresh checksum: the checksum proves nothing about who wrote a file.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from autograd_tui.app import AutogradApp
from autograd_tui.commands import main
from autograd_tui.history import recordings as trace
from autograd_tui.scenarios import get
from autograd_tui.session import Session
from autograd_tui.session.run import Run
from autograd_tui.words import format_event, node_names, plain

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]

TITLE = "\x1b]0;owned\x07"  # sets the terminal window's title
RED = "\x1b[31m"
HOSTILE = [TITLE, RED, "[/nope]", "[bold]x[/bold]"]

# A scenario file that leaves a marker when it is imported: linear-relu's program, so
# that re-executing a linear-relu recording with it is identical.
MARKER_SCENARIO = """\
from pathlib import Path
Path({marker!r}).write_text("imported")
from autograd_tui.scenarios.linear_relu import *  # noqa: F403
from autograd_tui.scenarios.linear_relu import program  # noqa: F401
NAME = "marker"
"""


def _events(path: Path) -> tuple[dict, list, dict]:
    rec = trace.load(path)
    return rec.header, list(rec.events), rec.footer


def linear_relu(tmp_path: Path) -> Path:
    path = tmp_path / "linear-relu.jsonl"
    with Run(get("linear-relu")) as run:
        run.run()
        run.save(path)
    return path


@pytest.fixture
def marker_recording(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(recording, scenario file, marker): a linear-relu recording whose header names the
    scenario file that would create the marker if it were imported."""
    marker = tmp_path / "marker"
    script = tmp_path / "evil.py"
    script.write_text(MARKER_SCENARIO.format(marker=str(marker)))
    header, events, footer = _events(linear_relu(tmp_path))
    header["scenario"]["name"] = str(script)
    path = tmp_path / "evil.jsonl"
    trace.save(path, header, events, footer)
    return path, script, marker


@pytest.fixture
def hostile_recording(tmp_path: Path) -> Path:
    """linear-relu with node names, the owner thread's name and the scenario's name full
    of escape sequences and Rich markup."""
    src = linear_relu(tmp_path).read_text().splitlines()
    swaps = {"cpu (owner)": f"cpu {TITLE} [/nope]",
             "SumBackward0": f"Sum{TITLE}[/nope]",
             "ReluBackward0": f"Relu{RED}[bold]x[/bold]"}
    lines = []
    for line in src:
        for old, new in swaps.items():
            line = line.replace(json.dumps(old), json.dumps(new))
        lines.append(line)
    header = json.loads(lines[0])
    header["scenario"]["name"] = "".join(HOSTILE)
    header["schedule"]["policy"] = f"round-robin{TITLE}[/nope]"
    events = [trace._DECODER.decode(line) for line in lines[1:-1]]
    footer = json.loads(lines[-1])["footer"]
    path = tmp_path / "hostile.jsonl"
    trace.save(path, header, events, footer)
    return path


def _open_app_and(rec: trace.Recording, *keys: str) -> AutogradApp:
    app = AutogradApp(recording=rec)

    async def go() -> None:
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await pilot.pause()
            for key in keys:
                await pilot.press(key)
                await pilot.pause()
            await pilot.press("q")

    asyncio.run(go())
    return app


# --- no code runs because a recording names it -------------------------------------------------
def test_a_recording_naming_a_file_runs_nothing(marker_recording, tmp_path, capsys):
    path, script, marker = marker_recording
    assert main(["replay", str(path), "--reexecute"]) == 2
    err = capsys.readouterr().err
    assert "not a built-in one" in err and "--scenario PATH" in err and err.count("\n") == 1
    assert main(["replay", str(path), "--headless"]) == 0
    assert main(["export", str(path), "--at", "3", "-o", str(tmp_path / "x.dot")]) == 0
    assert main(["chrome-trace", str(path), "-o", str(tmp_path / "t.json")]) == 0
    rec = trace.load(path)
    assert "No teaching notes" in Session.from_recording(rec).notes
    _open_app_and(rec, "t", "escape", "right", "r")
    assert not marker.exists()


def test_scenario_named_on_the_command_line_is_run(marker_recording, capsys):
    path, script, marker = marker_recording
    assert main(["replay", str(path), "--reexecute", "--scenario", str(script)]) == 0
    assert "identical to the recording" in capsys.readouterr().out
    assert marker.exists()  # the person asked for it


def test_scenario_may_be_a_built_in_name_and_needs_reexecute(marker_recording, capsys):
    path, _, marker = marker_recording
    assert main(["replay", str(path), "--reexecute", "--scenario", "linear-relu"]) == 0
    assert "identical to the recording" in capsys.readouterr().out
    assert main(["replay", str(path), "--headless", "--scenario", "linear-relu"]) == 2
    assert "--scenario goes with --reexecute" in capsys.readouterr().err
    assert not marker.exists()


def test_a_built_in_name_still_reexecutes_and_shows_its_notes(tmp_path, capsys):
    path = linear_relu(tmp_path)
    assert main(["replay", str(path), "--reexecute"]) == 0
    assert "re-executed linear-relu" in capsys.readouterr().out
    assert Session.from_recording(trace.load(path)).notes == get("linear-relu").notes


# --- every string from a file is text ----------------------------------------------------------
def test_plain_makes_control_characters_visible():
    assert plain(TITLE) == "\\x1b]0;owned\\x07"
    assert plain("a\tb\nc\rd\x7f\x9b\u202e") == "a\\x09b\\x0ac\\x0dd\\x7f\\x9b\\u202e"
    assert plain("[bold]x[/bold] é ✓") == "[bold]x[/bold] é ✓"
    assert plain(plain(RED)) == plain(RED)
    assert plain(7) == "7"


def test_hostile_names_replay_as_text(hostile_recording):
    p = subprocess.run([sys.executable, "-m", "autograd_tui", "replay", str(hostile_recording),
                        "--headless"], capture_output=True, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr
    assert b"\x1b" not in p.stdout and b"\x07" not in p.stdout
    out = p.stdout.decode()
    assert "[/nope]" in out and "[bold]x[/bold]" in out and "\\x1b]0;owned\\x07" in out
    rec = trace.load(hostile_recording)
    names = node_names(rec.events)
    for e in rec.events:
        line = format_event(e, names)
        assert line == plain(line)


def test_hostile_names_export_and_open_in_the_app(hostile_recording, tmp_path):
    out = tmp_path / "x.dot"
    assert main(["export", str(hostile_recording), "--at", "3", "-o", str(out)]) == 0
    dot = out.read_text()
    assert "\x1b" not in dot and "\x07" not in dot and "[/nope]" in dot
    rec = trace.load(hostile_recording)
    app = _open_app_and(rec, "right", "right", "right", "v", "d", "t", "escape", "end")
    assert app.return_code == 0
    assert "\x1b" not in str(app.debugger.sub_title) and "[/nope]" in str(app.debugger.sub_title)
    bad = trace.Recording({**rec.header, "schedule": "not an object"}, rec.events, rec.footer)
    assert Session.from_recording(bad).policy == "?"


@pytest.mark.parametrize("header,footer,code", [
    ({"scenario": "just-a-string"}, {}, 1),  # refused as it loads: the field's type
    ({"scenario": {"name": 5}}, {}, 1),
    ({"engine": {"reentrant": RED}}, {}, 2),  # loads; not an engine option
    ({}, {"schedule": 5}, 1),  # refused as it loads
    ({}, {"schedule": f"garbage{RED}"}, 1),
    ({}, {"schedule": "1:3,2:5"}, 1),  # a schedule that does not fit the run
])
def test_a_mistyped_header_or_footer_is_one_message(tmp_path, capsys, header, footer, code):
    h, events, f = _events(linear_relu(tmp_path))
    path = tmp_path / "bad.jsonl"
    trace.save(path, {**h, **header}, events, {**f, **footer})
    try:
        trace.load(path)
        loads = True
    except trace.TraceError as e:
        loads = False
        assert "header: " in str(e) or "footer: " in str(e)  # names the field
    assert main(["replay", str(path), "--headless"]) == (0 if loads else 1)
    capsys.readouterr()
    assert main(["replay", str(path), "--reexecute"]) == code
    err = capsys.readouterr().err
    assert err.startswith("autograd-tui: ") and err.count("\n") == 1 and "\x1b" not in err
