"""Several ranks' runs in one Chrome trace (``chrome-trace`` given a ``torch --ranks``
folder or several recordings): one process per rank, so Perfetto shows the ranks' backward
passes side by side.

Not in PyTorch (its profiler writes a trace per rank).  Each rank is drawn exactly as
``chrome_trace.to_chrome_trace`` draws one run, in process ``pid = rank`` (the header's
``distributed.rank``, else the run's place in the list), named ``rank K``; every event of
rank K is in process K, whatever its kind.  Flow ids are numbered across the ranks (they
are global to a file).  Each rank keeps its own logical clock (ts = its event's seq).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from autograd_tui.engine.events import Event
from autograd_tui.export.chrome_trace import (
    CLOCK_NOTE,
    PHASE_ORDER,
    body_of,
    build_run,
    process_meta,
    run_metadata,
)
from autograd_tui.history.fields import rank_of
from autograd_tui.history.recordings import TraceError

__all__ = ["merge_chrome_traces", "rank_of"]


def merge_chrome_traces(runs: Sequence[tuple[Iterable[Event], dict[str, Any] | None]]
                        ) -> dict[str, Any]:
    """Several ranks' runs (events, header) in one trace: one process per rank, pid = the
    rank (the header's ``distributed.rank``, else the run's place in ``runs``), named
    "rank K", each with its threads; every event of a rank is in its process.  Each rank
    keeps its own logical clock (ts = its event's seq), so the ranks line up at 0."""
    ranks = [rank_of(h, i) for i, (_, h) in enumerate(runs)]
    if len(set(ranks)) != len(ranks):
        raise TraceError(f"two recordings are the same rank (ranks {ranks}): give each "
                         "rank's recording once")
    meta: list[dict[str, Any]] = []
    body: list[dict[str, Any]] = []
    per_rank: list[dict[str, Any]] = []
    flows = 0
    for rank, (events, header) in sorted(zip(ranks, runs, strict=True), key=lambda r: r[0]):
        b, evs = build_run(events, rank, flows)
        flows = b.flow_ids
        meta += process_meta(b, rank, f"rank {rank}")
        meta.append({"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0,
                     "ts": 0, "args": {"sort_index": rank}})
        body += body_of(b)
        per_rank.append({"rank": rank, **run_metadata(b, evs, header)})
    body.sort(key=lambda ev: (ev["ts"], PHASE_ORDER[ev["ph"]], -ev.get("dur", 0)))
    metadata = {"source": "autograd-tui", "clock": CLOCK_NOTE + "; each rank counts its own",
                "ranks": per_rank}
    return {"traceEvents": meta + body, "displayTimeUnit": "ms", "metadata": metadata}
