"""DDP's buckets per rank, folded from the ``ddp_*`` events (engine/torch_bridge/ddp.py).

Not in PyTorch's engine: the state of DDP's reducer as its observable points show it, at
an event k.  A view asks ``ddp_state(events)`` with the events 1..k (they are few: one
per bucket and step, so the fold is a scan of the DDP events only, made when the pane is
shown).  A recording is untrusted: a bucket index or a list of names is what the event's
type allows, and anything out of order (an end before its start) is shown as it came.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

#: a bucket's states, in the order DDP moves it through them
PENDING, READY, REDUCING, REDUCED, NEVER = ("pending", "ready", "all-reducing", "reduced",
                                           "never ready")
MAX_BUCKETS = 1 << 16  # per rank: more is a damaged file (DDP makes a few dozen)


@dataclass
class Bucket:
    index: int
    params: list[str] = field(default_factory=list)
    state: str = PENDING
    missing: list[str] = field(default_factory=list)  # never ready: the parameters why
    find_unused: bool = False
    static_graph: bool = False
    seq: int = 0  # the event that last changed it


@dataclass
class RankState:
    rank: int
    buckets: dict[int, Bucket] = field(default_factory=dict)
    finalized: bool = False
    hook: str | None = None  # the communication hook's name

    def bucket(self, k: int) -> Bucket | None:
        b = self.buckets.get(k)
        if b is None and len(self.buckets) < MAX_BUCKETS:
            b = self.buckets[k] = Bucket(k)
        return b


def ddp_state(events: Iterable[Any]) -> dict[int, RankState]:
    """Rank -> its buckets after ``events`` (any events: the others are skipped)."""
    ranks: dict[int, RankState] = {}
    for e in events:
        k = e.kind
        if not k.startswith("ddp_"):
            continue
        rs = ranks.get(e.rank)
        if rs is None:
            if len(ranks) >= MAX_BUCKETS:
                continue
            rs = ranks[e.rank] = RankState(e.rank)
        if k == "ddp_finalize":
            rs.finalized = True
            for b in rs.buckets.values():
                if b.state in (READY, REDUCING):
                    b.state = REDUCED  # finalize_backward waited for every all-reduce
            continue
        b = rs.bucket(e.bucket)
        if b is None:
            continue
        b.seq = e.seq
        if k == "ddp_bucket_assigned":
            b.params = list(e.params)
        elif k == "ddp_bucket_ready":
            b.params, b.state = list(e.params), READY
        elif k == "ddp_allreduce_start":
            b.state, rs.hook = REDUCING, e.hook
        elif k == "ddp_allreduce_end":
            b.state = REDUCED
        elif k == "ddp_bucket_never_ready":
            b.params, b.missing, b.state = list(e.params), list(e.missing), NEVER
            b.find_unused, b.static_graph = e.find_unused, e.static_graph
    return ranks


def never_ready_lines(events: Iterable[Any]) -> list[str]:
    """The explanation of each bucket that never became ready (the unused-parameter
    failure), for a headless summary: the parameter, the rank and the bucket."""
    from autograd_tui.words import never_ready_explanation  # words reads history's fields

    out = []
    for r in ddp_state(events).values():
        for b in r.buckets.values():
            if b.state == NEVER:
                out.append(never_ready_explanation(r.rank, b.index, b.missing, b.find_unused,
                                                   b.static_graph))
    return out
