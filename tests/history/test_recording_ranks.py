"""A recording's optional ``distributed`` header field (one rank of a data-parallel run):
checked like every header field, absent in older files, read back by ``rank_of``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from autograd_tui import scenarios
from autograd_tui.history import recordings as trace
from autograd_tui.history.fields import rank_of
from autograd_tui.history.recordings import TraceError
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def run_parts() -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
    run = Run(scenarios.get("linear-relu"))
    try:
        assert run.run().status == "finished"
        return run.header(), list(run.events), run.footer()
    finally:
        assert run.close()


def saved(tmp_path: Path, parts: Any, distributed: Any) -> Path:
    header, events, footer = parts
    h = dict(header)
    if distributed is not ...:
        h["distributed"] = distributed
    p = tmp_path / "r.jsonl"
    trace.save(p, h, events, footer)
    return p


def test_a_rank_reads_back_and_an_old_file_has_none(tmp_path: Path, run_parts: Any) -> None:
    rec = trace.load(saved(tmp_path, run_parts, {"rank": 1, "world_size": 2,
                                                 "backend": "gloo"}))
    assert rank_of(rec.header, 7) == 1
    rec = trace.load(saved(tmp_path, run_parts, ...))
    assert "distributed" not in rec.header and rank_of(rec.header, 7) == 7
    rec = trace.load(saved(tmp_path, run_parts, None))
    assert rank_of(rec.header, 7) == 7


@pytest.mark.parametrize(("bad", "words"), [
    ({"rank": -1, "world_size": 2}, "$.distributed.rank"),
    ({"rank": "0", "world_size": 2}, "$.distributed.rank"),
    ({"rank": 0, "world_size": 0}, "$.distributed.world_size"),
    ({"rank": 0}, "world_size"),
    ([0, 2], "$.distributed"),
])
def test_a_wrong_field_is_one_message(tmp_path: Path, run_parts: Any, bad: Any,
                                      words: str) -> None:
    with pytest.raises(TraceError) as e:
        trace.load(saved(tmp_path, run_parts, bad))
    assert words in str(e.value) and "\n" not in str(e.value)
