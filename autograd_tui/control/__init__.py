"""The controller and what it needs: gates, policies, schedule strings, deadlocks.

``controller.py`` holds the gates and the driving (step, run, pause); ``policies.py``
who moves next and the schedule strings; ``query.py`` the one event query (breakpoints,
jumps, ``--stop-at``); ``deadlock.py`` the wait-for graph and its
explanation; ``primitives.py`` the locks and signals user code can hold across a
backward; ``explore.py`` (with ``search.py`` and ``dependence.py``) the schedule
explorer, which runs a scenario under many schedules (imported where used: it needs
the runner).
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
from autograd_tui.control.primitives import Signal, TrackedLock
from autograd_tui.control.query import EventQuery, QueryError, breakpoint_on, parse_query
from autograd_tui.control.threads import ThreadInfo, ThreadStatus

__all__ = [
    "STUCK_AFTER", "Controller", "DeadlockReport", "EventQuery", "ExplicitSchedule", "RoundRobin",
    "ScheduleDivergence", "SeededRandom", "Signal", "StepResult", "ThreadInfo", "ThreadStatus",
    "QueryError", "TrackedLock", "breakpoint_on", "decode_schedule", "encode_schedule",
    "make_policy", "parse_query",
]
