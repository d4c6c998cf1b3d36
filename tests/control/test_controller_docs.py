"""docs/controller.md against engine.control: the API it documents exists, the
schedule encoding round-trips, and the worked examples still print what the page shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograd_tui import control, engine
from autograd_tui.control import Controller, decode_schedule, encode_schedule

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "controller.md"

CONTROLLER_METHODS = [
    "start", "step", "step_any", "run_until", "run", "wait", "pause", "resume", "pause_all",
    "resume_all", "thread_states", "schedule_string", "analyse", "wait_for_graph", "close",
]
MODULE_NAMES = ["TrackedLock", "Signal", "breakpoint_on", "encode_schedule", "decode_schedule"]


def api_section() -> str:
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"^## (?:\d+\. )?API\b.*?$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, "docs/controller.md has no '## N. API' section"
    return m.group(1)


def test_the_api_section_mentions_every_public_name():
    section = api_section()
    for name in CONTROLLER_METHODS + MODULE_NAMES:
        assert re.search(rf"`[^`]*\b{name}\b[^`]*`", section), f"{name} not in the API section"


@pytest.mark.parametrize("name", CONTROLLER_METHODS)
def test_controller_method_exists(name):
    assert callable(getattr(Controller, name, None)), f"Controller.{name} is missing"


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_module_name_exists(name):
    assert hasattr(control, name), f"autograd_tui.control.{name} is missing"


def test_every_ctl_attribute_in_the_api_section_exists():
    """``ctl.NAME`` anywhere in the section is a method or attribute of a Controller."""
    called = set(re.findall(r"\bctl\.([A-Za-z_]+)", api_section()))
    assert called >= {"step", "run", "start", "close"}
    ctl = Controller(engine.Engine())  # no program started: no thread to tear down
    try:
        missing = sorted(n for n in called if not hasattr(ctl, n))
    finally:
        assert ctl.close()
    assert not missing, f"the doc uses Controller attributes that do not exist: {missing}"


@pytest.mark.parametrize("choices", [
    [], [1], [1, 1, 1], [1, 1, 2, 2, 2, 1, 3, 3], [3, 1, 4, 1, 5, 9, 2, 6], [2] * 100 + [1],
])
def test_encode_decode_round_trip(choices):
    text = encode_schedule(choices)
    assert decode_schedule(text) == choices
    assert encode_schedule(decode_schedule(text)) == text


def test_the_documented_schedule_example():
    assert encode_schedule([1] * 12 + [2] * 3 + [1] * 5) == "1:12,2:3,1:5"
    assert decode_schedule("1:2,2") == [1, 1, 2]  # a missing count means 1
    with pytest.raises(ValueError, match="bad schedule"):
        decode_schedule("1:0")
    with pytest.raises(ValueError, match="numbered from 1"):
        decode_schedule("0:3")  # threads count from 1, as the app's keys


def worked_examples() -> list[tuple[str, str]]:
    """(code, output) for each ```python block followed by a plain ``` output block in
    the worked-example section."""
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"^## (?:\d+\. )?Worked example\b.*?$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, "docs/controller.md has no '## N. Worked example' section"
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", m.group(1), re.M | re.S)
    return [(code, out) for (lang, code), (lang2, out) in zip(blocks, blocks[1:])
            if lang == "python" and lang2 == ""]


def test_the_worked_example_section_has_examples():
    assert len(worked_examples()) >= 2


@pytest.mark.parametrize("index", range(3))
def test_worked_example_output_is_current(index):
    examples = worked_examples()
    if index >= len(examples):
        pytest.skip("fewer examples")
    code, expected = examples[index]
    got = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=25)
    assert got.returncode == 0, got.stderr
    assert got.stdout == expected, "the worked example's output in docs/controller.md is stale"
