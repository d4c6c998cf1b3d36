"""The controller and what it needs: gates, policies, schedule strings, deadlocks."""

from autograd_tui.control.controller import (
    STUCK_AFTER,
    Controller,
    DeadlockReport,
    ExplicitSchedule,
    RoundRobin,
    ScheduleDivergence,
    SeededRandom,
    Signal,
    StepResult,
    ThreadInfo,
    ThreadStatus,
    TrackedLock,
    breakpoint_on,
    decode_schedule,
    encode_schedule,
    make_policy,
)

__all__ = [
    "STUCK_AFTER", "Controller", "DeadlockReport", "ExplicitSchedule", "RoundRobin",
    "ScheduleDivergence", "SeededRandom", "Signal", "StepResult", "ThreadInfo", "ThreadStatus",
    "TrackedLock", "breakpoint_on", "decode_schedule", "encode_schedule", "make_policy",
]
