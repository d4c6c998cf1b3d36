"""The runs a search has taken, as a trie of choices: a run whose every step is known is
not run again.

Not in PyTorch.  The exhaustive search (``search.BoundedDFS``) is iterated over
preemption bounds, as CHESS does, and each bound's search starts again from the
non-preemptive run: it walks again every schedule of the smaller bounds, and some runs
within a bound follow an earlier run's steps to where the reduction cuts them.  A
program the explorer can search runs the same way under the same choices (else
``Nondeterministic``), so what each step offered (the threads that could move) and
touched (its footprint) is known once a run took it.  ``RunTrie.walk`` feeds ``decide``
from the trie while its picks stay on known steps: a run that ends there (cut, or run to
its end before) costs no engine run; one that leaves the trie is run, from scratch as
always (its replayed prefix answers ``decide`` with the same picks).  The report is the
same: every walk counts as a run, ``decide`` sees the same calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autograd_tui.control.dependence import Footprint
from autograd_tui.control.search import Cut

_OPEN = object()  # a step after which the run went on (or was cut): no result here

#: nodes kept at most (about 150 bytes each): past it, runs are recorded no more
MAX_NODES = 2_000_000


class _Node:
    __slots__ = ("children", "eligible", "fp", "result")

    def __init__(self, fp: Footprint | None = None) -> None:
        self.eligible: tuple[int, ...] | None = None  # who could move after this step
        self.fp = fp  # the footprint of the step that led here
        self.children: dict[int, _Node] = {}
        self.result: Any = _OPEN  # the run's ScheduleResult when it ended after this step


class RunTrie:
    def __init__(self) -> None:
        self.root = _Node()
        self.nodes = 1
        self.walked = 0  # runs answered from the trie
        # where the last walk left the trie (its node, that node's depth): the run that
        # follows replays the walk's picks to there, so ``record`` starts there
        self._left: tuple[_Node, int] | None = None

    def walk(self, decide: Callable[[int, tuple[int, ...], Footprint | None], int],
             footprints: bool, needs: Callable[[int], bool] | None,
             replay: tuple[Any, int] | None = None) -> tuple[Any] | None:
        """``(result,)`` (None: cut) of a run that stays on known steps, calling ``decide``
        as that run would; None when it leaves them (run it: ``record`` afterwards).
        ``replay``: (frames, n): at steps 0..n-1 decide answers frames[j].chosen, given the
        same eligible threads, reading no footprint (``explore_run._Policy``): taken as is."""
        node, j = self.root, 0
        self._left = None
        frames, n = replay if replay is not None else ((), 0)
        while j < n:
            if node.result is not _OPEN or node.eligible is None:
                break
            f = frames[j]
            if f.eligible != node.eligible:
                break  # decide raises Nondeterministic: below
            child = node.children.get(f.chosen)
            if child is None:
                self._left = (node, j)
                return None
            node, j = child, j + 1
        while True:
            if node.result is not _OPEN:
                self.walked += 1
                return (node.result,)
            if node.eligible is None:
                self._left = (node, j)
                return None
            fp = None
            if footprints and j and (needs is None or needs(j)):
                if node.fp is None:
                    self._left = (node, j)
                    return None
                fp = node.fp
            try:
                pick = decide(j, node.eligible, fp)
            except Cut:
                self.walked += 1
                return (None,)
            child = node.children.get(pick)
            if child is None:
                self._left = (node, j)
                return None
            node, j = child, j + 1

    def record(self, steps: list[tuple[Any, ...]], fps: dict[int, Footprint],
               cut_at: tuple[int, ...] | None, result: Any) -> None:
        """A run that was run: its steps ``(pick, eligible, ...)``, the footprints worked
        out (by step), what could move where it was cut, or its result.  After a ``walk``
        that left the trie, from where it left: the run's steps before are the walk's (it
        replays its picks), whose nodes have their eligible threads, and of their
        footprints the run worked out only the last one's (``_Policy``: none of a step it
        replays but the last)."""
        if self.nodes >= MAX_NODES:
            return
        node, start = self.root, 0
        left, self._left = self._left, None
        if left is not None and left[1] <= len(steps):
            node, start = left
            if start and node.fp is None:
                node.fp = fps.get(start - 1)
        for k in range(start, len(steps)):
            step = steps[k]
            pick, eligible = step[0], step[1]
            if node.eligible is None:
                node.eligible = eligible
            child = node.children.get(pick)
            if child is None:
                child = node.children[pick] = _Node(fps.get(k))
                self.nodes += 1
            elif child.fp is None:
                child.fp = fps.get(k)
            node = child
        if result is not None:
            node.result = result
        elif cut_at is not None and node.eligible is None:
            node.eligible = cut_at
