"""history/ddp.py: DDP's buckets per rank folded from ddp_* events, and the DDP pane's text
(app/widgets/ddp_pane.py) of them; a recording is untrusted: names are shown as text."""

from __future__ import annotations

from autograd_tui.app.widgets.ddp_pane import NONE, ddp_text
from autograd_tui.engine.events import make_event
from autograd_tui.history.ddp import NEVER, PENDING, READY, REDUCED, REDUCING, ddp_state


def ev(seq: int, kind: str, **data):
    return make_event(seq, kind, "cpu (owner)", 1, None, None, data)


def run(rank: int) -> list:
    b0, b1 = ["2.weight", "2.bias"], ["[red]0.weight[/red]", "0.bias"]
    return [ev(1, "ddp_bucket_assigned", rank=rank, bucket=0, params=b0),
            ev(2, "ddp_bucket_assigned", rank=rank, bucket=1, params=b1),
            ev(3, "ddp_bucket_ready", rank=rank, bucket=0, params=b0),
            ev(4, "ddp_allreduce_start", rank=rank, bucket=0, hook="allreduce_hook"),
            ev(5, "ddp_allreduce_end", rank=rank, bucket=0),
            ev(6, "ddp_bucket_never_ready", rank=rank, bucket=1, params=b1,
               missing=["0.bias"], find_unused=False, static_graph=False)]


def test_each_bucket_moves_through_ddps_states() -> None:
    events = run(1)
    states = [ddp_state(events[:k])[1].buckets[0].state for k in range(1, 6)]
    assert states == [PENDING, PENDING, READY, REDUCING, REDUCED]
    last = ddp_state(events)[1]
    assert last.buckets[1].state == NEVER and last.buckets[1].missing == ["0.bias"]
    assert not last.finalized and last.hook == "allreduce_hook"
    fin = ddp_state([*events[:4], ev(7, "ddp_finalize", rank=1, buckets=1)])[1]
    assert fin.finalized and fin.buckets[0].state == REDUCED  # finalize waited for it


def test_ranks_are_kept_apart_and_the_pane_names_the_rank_bucket_and_parameter() -> None:
    s = ddp_state(run(0)[:3] + run(1))
    assert s[0].buckets[0].state == READY and s[1].buckets[0].state == REDUCED
    text = ddp_text(run(1)).plain
    assert "rank 1" in text and "bucket 1" in text and "never ready" in text
    assert "0.bias got no gradient on rank 1" in text
    assert "[red]0.weight[/red]" in text  # a name from a file: text, never markup
    assert ddp_text([]).plain == NONE


def test_an_end_before_its_start_or_unknown_bucket_is_shown_as_it_came() -> None:
    s = ddp_state([ev(1, "ddp_allreduce_end", rank=3, bucket=7),
                   ev(2, "ddp_finalize", rank=3, buckets=1)])
    assert s[3].buckets[7].state == REDUCED and s[3].finalized
