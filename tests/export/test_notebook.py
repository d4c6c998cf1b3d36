"""A notebook's view of a run: a recording opened from Python, a ``Snapshot`` of it that
Jupyter displays through ``_repr_svg_`` / ``_repr_mimebundle_`` (docs/notebook.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import graphviz
import pytest

from autograd_tui import scenarios
from autograd_tui.export import Snapshot, snapshot, to_dot
from autograd_tui.history import recordings
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(120)

needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz's dot is not installed (CI installs it)")


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> recordings.Recording:
    path = tmp_path_factory.mktemp("nb") / "run.jsonl.gz"
    run = Run(scenarios.get("linear-relu"))
    try:
        assert run.run().status == "finished"
        run.save(path)
    finally:
        assert run.close()
    return recordings.load(path)


@needs_dot
def test_a_snapshot_displays_itself_as_svg(recording: recordings.Recording) -> None:
    snap = snapshot(recording, at=5)
    svg = snap._repr_svg_()
    assert svg is not None and "<svg" in svg and "</svg>" in svg
    assert "LinearBackward0" in svg  # the graph is drawn, not an empty picture
    bundle = snap._repr_mimebundle_()
    assert bundle["image/svg+xml"] == svg
    assert "5" in bundle["text/plain"] and "nodes" in bundle["text/plain"]


def test_the_snapshot_is_the_export_s_drawing_at_that_event(
        recording: recordings.Recording) -> None:
    snap = snapshot(recording, at=5)
    state = recording.state_at(5)
    assert snap.source == to_dot(state, rankdir="TB", values=True, collapse_leaves=False,
                                 title=None)
    assert isinstance(snap.graphviz(), graphviz.Source)
    assert snap.graphviz().source == snap.source
    last = snapshot(recording)  # no ``at``: after the last event
    assert last.state.last_event is not None
    assert last.state.last_event.seq == len(recording.events)
    assert snapshot(recording.history, at=5).source == snap.source  # a History works too
    assert isinstance(snapshot(state), Snapshot)


def test_bad_arguments_say_what_is_allowed(recording: recordings.Recording) -> None:
    n = len(recording.events)
    with pytest.raises(ValueError, match=f"between 0 and {n}"):
        snapshot(recording, at=n + 1)
    with pytest.raises(TypeError, match="History, a Recording or an EngineState"):
        snapshot("run.jsonl.gz")  # type: ignore[arg-type]


def test_without_dot_the_cell_says_why_in_one_line(recording: recordings.Recording,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    snap = snapshot(recording, at=5)
    assert snap._repr_svg_() is None
    bundle = snap._repr_mimebundle_()
    assert set(bundle) == {"text/plain"} and "dot" in bundle["text/plain"]


@needs_dot
def test_save_writes_the_file(recording: recordings.Recording, tmp_path: Path) -> None:
    out = tmp_path / "at5.svg"
    msg = snapshot(recording, at=5).save(out)
    assert out.read_text().lstrip().startswith(("<?xml", "<svg")) and str(out) in msg
