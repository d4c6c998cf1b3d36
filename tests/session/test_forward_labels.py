"""What lesson authors need: a scenario file's recording keeps its ``FORWARD`` labels (a
built-in lesson's are looked up by name), read back as text and checked as untrusted data;
and the numbering docs/tui.md's walkthrough states (after k presses, the newest event is k)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autograd_tui.commands import main
from autograd_tui.history import recordings
from autograd_tui.history.recordings import TraceError
from autograd_tui.session.session import Session, recorded_forward

pytestmark = pytest.mark.timeout(120)

LESSON = """\
from autograd_tui import engine as torch

NAME = "shared-weight"
FORWARD = {0: ("first use", "x"), 2: ("second use",)}

def program():
    x = torch.tensor([1.0, 2.0])
    weight = torch.tensor(0.5, requires_grad=True)
    y = (x * weight).tanh() + (x * weight).sum()
    y.sum().backward()
    return {"weight": weight.grad}
"""


def _record(tmp_path: Path) -> Path:
    lesson = tmp_path / "shared.py"
    lesson.write_text(LESSON)
    rec = tmp_path / "shared.jsonl"
    assert main(["run", str(lesson), "--headless", "--quiet", "--record", str(rec)]) == 0
    return rec


def test_a_scenario_files_recording_keeps_its_forward_labels(tmp_path: Path) -> None:
    rec = recordings.load(_record(tmp_path))
    assert rec.header["scenario"]["forward"] == {"0": ["first use", "x"], "2": ["second use"]}
    session = Session.from_recording(rec)
    assert session.forward == {0: ("first use", "x"), 2: ("second use",)}


def test_a_builtin_lessons_recording_names_it_and_finds_its_labels(tmp_path: Path) -> None:
    rec = tmp_path / "lr.jsonl"
    assert main(["run", "linear-relu", "--headless", "--quiet", "--record", str(rec)]) == 0
    loaded = recordings.load(rec)
    assert "forward" not in loaded.header["scenario"]
    assert Session.from_recording(loaded).forward[1] == ("ReLU",)


def test_recorded_labels_are_text_and_checked(tmp_path: Path) -> None:
    assert recorded_forward({"scenario": {"forward": {"3": ["a\x1b[31mb"]}}}) == \
        {3: ("a\\x1b[31mb",)}
    assert recorded_forward({"scenario": {"forward": {"x": ["a"], "4": []}}}) == {}
    assert recorded_forward({"scenario": "nope"}) == {}
    rec = _record(tmp_path)
    lines = rec.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    header["scenario"]["forward"] = {"0": [1]}
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\n".join([json.dumps(header).encode(), *lines[1:]]))
    with pytest.raises(TraceError, match="header"):
        recordings.load(bad)


def test_after_k_steps_the_newest_event_is_seq_k_as_the_walkthrough_says() -> None:
    tui = (Path(__file__).parents[2] / "docs" / "tui.md").read_text()
    assert "the newest row of the log is `seq k`" in tui and "`seq k-1`" not in tui
    session = Session.open("linear-relu")
    try:
        for k in range(1, 8):
            session.step_any()
            assert session.count() == k and session.event(k - 1).seq == k
    finally:
        session.close()
