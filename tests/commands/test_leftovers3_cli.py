"""Leftovers of the commands, round 3 (each test a second or two):

1. ``replay --reexecute`` of a recording that diverges printed the two events' reprs,
   whose tensor summaries are ``msgspec.Raw`` objects (``<msgspec.Raw object at ...>``):
   nothing said what differed.  Now it says event k, each field that differs, and the
   recorded and the re-executed value as text (``session.run.Divergence.lines``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from user_scripts import WOBBLE, run_cli, write_script

torch = pytest.importorskip("torch", reason="the torch bridge needs PyTorch (pip install torch)")

pytestmark = pytest.mark.timeout(120)


def test_a_divergence_says_the_field_and_both_values_in_words(
        tmp_path: Path, capsys, monkeypatch) -> None:
    script, rec = write_script(tmp_path, WOBBLE), tmp_path / "wobble.jsonl.gz"
    monkeypatch.delenv("WOBBLE", raising=False)
    code, _ = run_cli(["torch", str(script), "--headless", "--quiet", "--record", str(rec)],
                      capsys)
    assert code == 0
    monkeypatch.setenv("WOBBLE", "1")
    code, out = run_cli(["replay", str(rec), "--reexecute", "--scenario", str(script)], capsys)
    assert code == 1, out
    assert "Raw" not in out and "object at" not in out, out
    # the Wobble node's end (event k, each run's as the trace words it), then the field
    # that differs with both values: the output differs in the last bits
    recorded = '[{"shape":[4],"dtype":"float32","values":[3.0,3.0,3.0,3.0],"norm":6.0}]'
    again = ('[{"shape":[4],"dtype":"float32","values":[3.0000009536743164,'
             '3.0000009536743164,3.0000009536743164,3.0000009536743164],'
             '"norm":6.000001907348633}]')
    k = out.split("diverged at event ")[1].split(":")[0]
    end = f"{k} cpu (owner) GT1 end WobbleBackward#2 -> ([3, 3, 3, 3])"
    assert (f"diverged at event {k}: recorded: {end} re-executed: {end} outputs differs: "
            f"recorded: {recorded} re-executed: {again}") in out, out


def test_a_divergence_where_one_run_ends_says_which_and_the_others_event() -> None:
    from autograd_tui.engine.events import make_event
    from autograd_tui.session.run import Divergence

    e = make_event(7, "completion", "cpu (owner)", 1, data={"error": None, "outstanding": 0})
    assert Divergence(7, None, e).lines()[:2] == [
        "diverged at event 7:", "  the recording ends at event 6; the re-execution goes on:"]
    assert Divergence(7, e, None).lines()[1] == \
        "  the re-execution ends at event 6; the recording goes on:"
    assert Divergence(7, e, None).lines()[2].split()[:3] == ["7", "cpu", "(owner)"]
