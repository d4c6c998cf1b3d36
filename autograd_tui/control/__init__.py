"""The controller and what it needs: gates, policies, schedule strings, deadlocks.

``controller.py`` holds the driving (step, run, pause), ``gates.py`` the engine threads'
side (a gate at each event, each wait reported), ``table.py`` the threads and their
snapshot; ``policies.py`` who moves next and the schedule strings; ``query.py`` the one
event query (breakpoints, jumps, ``run_until``, find, ``--stop-at``); ``deadlock.py`` the
wait-for graph and its explanation, read from a snapshot; ``explore.py`` (with
``search.py`` and ``dependence.py``) the schedule explorer, which runs a scenario under
many schedules (imported where used: it needs the runner).  ``TrackedLock`` and
``Signal``, the locks and signals user code can hold across a backward, live in the
engine (``engine/sync.py``) and are re-exported here.
"""

from autograd_tui.control.controller import STUCK_AFTER, Controller, StepResult
from autograd_tui.control.deadlock import DeadlockReport
from autograd_tui.control.policies import (
    ExplicitSchedule,
    RoundRobin,
    ScheduleDivergence,
    SeededRandom,
    decode_schedule,
    encode_schedule,
    make_policy,
)
from autograd_tui.control.query import EventQuery, QueryError, breakpoint_on, parse_query
from autograd_tui.control.table import ThreadSnapshot, ThreadsSnapshot
from autograd_tui.control.threads import ThreadInfo, ThreadStatus
from autograd_tui.engine.sync import Signal, TrackedLock

__all__ = [
    "STUCK_AFTER", "Controller", "DeadlockReport", "EventQuery", "ExplicitSchedule",
    "QueryError", "RoundRobin", "ScheduleDivergence", "SeededRandom", "Signal", "StepResult",
    "ThreadInfo", "ThreadSnapshot", "ThreadStatus", "ThreadsSnapshot", "TrackedLock",
    "breakpoint_on", "decode_schedule", "encode_schedule", "make_policy", "parse_query",
]
