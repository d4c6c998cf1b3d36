"""Who moves next: scheduling policies and schedule strings (breakpoints: ``query.py``).

Not in PyTorch.  In serialized mode the controller asks a policy to pick one of the
threads that may move.  The picks form a schedule, written as a run-length string
(``1:12,2:3,1:5``: thread 1 twelve steps, thread 2 three, thread 1 five) that
replays the same run exactly (``policy="schedule:STRING"``).  Threads are numbered
from 1 in the order they first appear, the same numbers as the app's keys 1-9
(docs/architecture.md, Conventions).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any, Protocol


class ScheduleDivergence(RuntimeError):
    """A replayed schedule names a thread that cannot move at that point."""


class Schedulable(Protocol):
    """What a policy sees of a thread (the controller's ``ThreadInfo``)."""

    name: str
    index: int  # the thread's number, from 1


class RoundRobin:
    name = "round-robin"

    def __init__(self) -> None:
        self._last = -1

    def choose(self, eligible: list[Schedulable]) -> Schedulable:
        later = [t for t in eligible if t.index > self._last]
        pick = later[0] if later else eligible[0]
        self._last = pick.index
        return pick


class SeededRandom:
    name = "random"

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._rng = random.Random(seed)

    def choose(self, eligible: list[Schedulable]) -> Schedulable:
        return self._rng.choice(eligible)


class ExplicitSchedule:
    name = "schedule"

    def __init__(self, choices: list[int]) -> None:
        self.choices = list(choices)
        self.pos = 0

    def choose(self, eligible: list[Schedulable]) -> Schedulable:
        if self.pos >= len(self.choices):
            return eligible[0]  # past the recorded schedule: the one thread left, usually
        want = self.choices[self.pos]
        self.pos += 1
        for t in eligible:
            if t.index == want:
                return t
        raise ScheduleDivergence(
            f"schedule step {self.pos}: thread {want} cannot move now "
            f"(movable: {', '.join(f'{t.index} ({t.name})' for t in eligible) or 'none'})"
        )


def encode_schedule(choices: Iterable[int]) -> str:
    """Run-length code: ``1:12,2:3,1:5`` = thread 1 twelve times, 2 three times, ..."""
    out: list[list[int]] = []
    for c in choices:
        if out and out[-1][0] == c:
            out[-1][1] += 1
        else:
            out.append([c, 1])
    return ",".join(f"{c}:{n}" for c, n in out)


def decode_schedule(text: str) -> list[int]:
    choices: list[int] = []
    text = text.strip()
    if not text:
        return choices
    for i, part in enumerate(text.split(",")):
        try:
            c, _, n = part.partition(":")
            idx, count = int(c), int(n) if n else 1
        except ValueError:
            raise ValueError(
                f"bad schedule at item {i + 1} ({part!r}): expected THREAD:COUNT, "
                "e.g. 1:12,2:3"
            ) from None
        if idx < 1 or count < 1:
            raise ValueError(f"bad schedule at item {i + 1} ({part!r}): threads are numbered "
                             "from 1 and counts are positive")
        choices.extend([idx] * count)
    return choices


def make_policy(policy: str = "round-robin", seed: int = 0) -> Any:
    if policy == "round-robin":
        return RoundRobin()
    if policy == "random":
        return SeededRandom(seed)
    if policy.startswith("schedule:"):
        return ExplicitSchedule(decode_schedule(policy[len("schedule:"):]))
    raise ValueError(
        f"unknown policy {policy!r}: use round-robin, random or schedule:STRING"
    )

