"""The strategies of the schedule explorer: who moves next, step by step.

Not in PyTorch.  Each strategy is a ``decide(step, movable, footprint)`` function that
``explore.run_schedule`` calls at every step of a run (``footprint``: what the step just
taken touched, ``dependence.py``): ``BoundedDFS`` (exhaustive, a preemption bound, sleep
sets), ``RandomWalk`` and ``PCT``.  Raising ``Cut`` ends the run early.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from itertools import chain

from autograd_tui.control.dependence import EVERYTHING, Footprint, independent


class Cut(Exception):
    """Raised from a policy to end a run early: every way on is redundant or over budget."""


class Nondeterministic(RuntimeError):
    """A replayed prefix of choices met other movable threads than the first time: the
    scenario does not run the same way twice under the same schedule (it reads a clock,
    a random number without a seed, the set of running threads...)."""


# --- exhaustive search with a preemption bound and sleep sets --------------------------------
@dataclass(slots=True)
class _Frame:
    eligible: tuple[int, ...]
    prev: int | None  # the thread that took the step before
    preempt: int  # preemptions before this choice
    sleep: dict[int, Footprint]
    chosen: int
    done: dict[int, Footprint] = field(default_factory=dict)  # explored picks, in order

    def cost(self, t: int) -> int:
        return int(self.prev is not None and t != self.prev and self.prev in self.eligible)


class BoundedDFS:
    """Every schedule with at most ``bound`` preemptions, up to commuting steps.

    Stateless (VeriSoft-style): each schedule is a fresh run that replays a prefix of
    choices, then goes on without preempting.  ``frames`` is the current path.

    For ``--jobs`` (``explore_jobs.py``): given ``prefix`` (frames as the serial search
    had them), it never goes back above frame ``floor``; ``split_off`` hands the end of
    the search (the choices left at a frame and above it) to another one."""

    def __init__(self, bound: int, reduce: bool = True, prefix: list[_Frame] | None = None,
                 floor: int | None = None) -> None:
        self.bound, self.reduce = bound, reduce
        self.frames: list[_Frame] = list(prefix or ())
        self.floor = len(self.frames) if floor is None else floor  # never backtrack above
        self.known = 0  # frames[:known] have their chosen step's footprint (see needs_footprint)
        self.pruned = 0
        self.capped = False  # a choice was left out for the bound: a larger one adds some

    def needs_footprint(self, j: int) -> bool:
        """Whether ``decide(j, ...)`` reads the footprint of step j - 1: not while it
        replays a prefix whose steps an earlier run took (the same steps, the same
        footprints: ``done`` has them), so a run need not work them out again."""
        return j - 1 >= self.known

    def decide(self, j: int, eligible: tuple[int, ...], prev_fp: Footprint | None) -> int:
        frames = self.frames
        if j > 0 and prev_fp is not None:
            frames[j - 1].done[frames[j - 1].chosen] = prev_fp
        if j < len(frames):  # replaying the prefix
            f = frames[j]
            if f.eligible != eligible:
                raise Nondeterministic(
                    f"the scenario does not run the same way twice: at step {j + 1} of the "
                    f"same schedule, threads {list(eligible)} could move, the first time "
                    f"{list(f.eligible)}; the explorer needs a deterministic program")
            return f.chosen
        sleep: dict[int, Footprint] = {}
        prev, preempt = None, 0
        if j > 0:
            parent = frames[j - 1]
            c = parent.chosen
            p = parent.prev  # parent.cost(c), inlined (a call a new step)
            prev = c
            preempt = parent.preempt + (p is not None and c != p and p in parent.eligible)
            if self.reduce and (parent.sleep or len(parent.done) > (c in parent.done)):
                fc = parent.done.get(c, EVERYTHING)
                for u, fu in chain(parent.sleep.items(), parent.done.items()):
                    if u != c and independent(fu, fc):
                        sleep[u] = fu
        if not sleep and prev in eligible:  # the commonest step: the same thread goes on
            pick = prev
        else:
            awake = [t for t in eligible if t not in sleep]
            if prev in awake:
                pick = prev
            elif awake:
                pick = awake[0]
            else:
                self.pruned += 1
                raise Cut()  # every thread's next step was explored from an equivalent state
        frame = _Frame(eligible, prev, preempt, sleep, pick)
        if pick != prev and preempt + frame.cost(pick) > self.bound:
            self.capped = True
            raise Cut()  # going on needs a preemption (the thread that could is asleep)
        frames.append(frame)
        return pick

    def backtrack(self) -> bool:
        """Move to the next unexplored choice; False when none is left."""
        frames = self.frames
        for i in range(len(frames) - 1, self.floor - 1, -1):
            f = frames[i]
            f.done.setdefault(f.chosen, EVERYTHING)
            for t in f.eligible:
                if t in f.done or t in f.sleep:
                    continue
                if f.preempt + f.cost(t) > self.bound:
                    self.capped = True
                    continue
                f.chosen = t
                del frames[i + 1:]
                self.known = i  # frames before i keep their chosen step
                return True
            self.pruned += sum(1 for t in f.eligible if t in f.sleep and t not in f.done)
        del frames[self.floor:]
        self.known = 0
        return False

    def split_off(self) -> tuple[list[_Frame], int] | None:
        """Between a run and ``backtrack``: give away the end of this search, in its order:
        every choice left at frame ``j`` and above it (for a search that starts with
        ``backtrack``, given the frames to ``j`` and this one's floor), keeping the
        subtree below frame ``j``'s choice.  ``j`` is the middle one of the frames that
        have choices left, so that each keeps some.  The frames carry what the serial
        search knows there (the siblings explored, with their footprints): the two
        searches together explore what this one would have."""
        frames = self.frames
        left = [i for i in range(self.floor, len(frames))
                if any(t != frames[i].chosen and t not in frames[i].done
                       and t not in frames[i].sleep
                       and frames[i].preempt + frames[i].cost(t) <= self.bound
                       for t in frames[i].eligible)]
        if not left:
            return None
        j = left[(len(left) - 1) // 2]
        prefix = copy.deepcopy(frames[:j + 1])
        prefix[j].done.setdefault(prefix[j].chosen, EVERYTHING)  # as backtrack would
        floor, self.floor = self.floor, j + 1
        return prefix, floor


# --- random walks and PCT ------------------------------------------------------------------
class RandomWalk:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def decide(self, j: int, eligible: tuple[int, ...], prev_fp: Footprint | None) -> int:
        return self.rng.choice(eligible)


class PCT:
    """Depth ``d``: priorities at random; at ``d - 1`` random steps out of about ``k``,
    the thread that runs drops below every other."""

    def __init__(self, seed: int, depth: int, k: int) -> None:
        self.rng = random.Random(seed)
        self.prio: dict[int, float] = {}
        self.changes = {self.rng.randrange(1, max(2, k)): -i for i in range(1, depth)}
        self.prev: int | None = None

    def decide(self, j: int, eligible: tuple[int, ...], prev_fp: Footprint | None) -> int:
        for t in eligible:
            if t not in self.prio:
                self.prio[t] = self.rng.random() + 1.0  # above every lowered priority
        if j in self.changes and self.prev is not None:
            self.prio[self.prev] = self.changes[j]
        pick = max(eligible, key=lambda t: self.prio[t])
        self.prev = pick
        return pick
