"""Moves by what a person knows, not by event: over a node, to the end of a module, out of
a GraphTask, and back the same ways.

Not in PyTorch (a debugger's ``next`` / ``finish`` / ``up`` over engine.cpp's
``evaluate_function`` calls, nn.Modules and GraphTasks).  Each move is computed from a
run's events and states through the public API a ``Session`` gives of its History
(``count``, ``events``, ``state_at``), never its storage, so a recording and a live run
are walked alike.  A forward move is a predicate fed the events after the shown one: in
the history it finds where the move ends; a live run whose history ends first hands the
same predicate, with what it has seen, to the controller, which runs the engine until it
holds (``Move.until``).  A backward move only looks back: the history has it all.

"At k" is the state after events 1..k (docs, "one numbering").  The node "at k" is the one
the shown event's thread is evaluating (innermost: inside a reentrant backward, the inner
node), else the node the shown event touched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from autograd_tui.engine.events import Event
from autograd_tui.history.state import EngineState
from autograd_tui.words import inside

CHUNK = 4096  # events read at a time: a move that ends near stops early
_OVER = frozenset({"done", "skipped", "errored"})  # node states that will not run again


class Events(Protocol):
    """What a move reads of a run (``Session`` is one)."""

    def count(self) -> int: ...

    def events(self, start: int = 0, stop: int | None = None) -> list[Event]: ...

    def state_at(self, k: int) -> EngineState: ...


@dataclass(frozen=True)
class Place:
    """Where the shown event stands: its thread, the GraphTask and the node at k, and
    whether that node is being evaluated (between its node_start and node_end)."""

    thread: str | None
    graph_task: int | None
    node: int | None
    running: bool


@dataclass
class Move:
    """A forward move: ``k``, the event where it ends in the history; else (None) the
    predicate ``until`` that a live run's engine runs to, and what the move is for
    (``what``, said when there is nothing to do: ``until`` is None too)."""

    k: int | None
    until: Callable[[Event], bool] | None
    what: str


def place(state: EngineState) -> Place:
    """The node and GraphTask the state's last event is at (``Place``)."""
    last = state.last_event
    if last is None:
        return Place(None, None, None, False)
    th = state.threads.get(last.thread)
    if th is not None and th.nodes:
        gt, node = th.nodes[-1]
        return Place(last.thread, gt, node, True)
    gt = last.graph_task
    if gt is None and last.node is not None and last.node in state.node_states:
        gt = state.node_states[last.node].graph_task
    return Place(last.thread, gt, last.node, False)


def module_of(state: EngineState, node: int | None) -> str | None:
    """The nn.Module path that made ``node`` (its ``node_meta``), if it says one."""
    meta = state.node_meta.get(node) if node is not None else None
    mod = meta.get("module") if isinstance(meta, dict) else None
    return mod if isinstance(mod, str) and mod else None


def no_module(state: EngineState) -> str:
    """Why the shown node has no module: in a graph whose nodes name theirs, it ran
    outside every nn.Module (the loss's ops); a built-in scenario's nodes name none."""
    if any(isinstance(m, dict) and m.get("module") for m in state.node_meta.values()):
        return "(it ran outside every nn.Module, as a loss's ops do)"
    return "(a PyTorch graph's nodes do)"


def _scan(src: Events, k: int, pred: Callable[[Event], bool]) -> int | None:
    """The first event after k for which ``pred`` holds (fed every event after k)."""
    n = src.count()
    at = k
    while at < n:
        chunk = src.events(at, min(n, at + CHUNK))
        for i, e in enumerate(chunk, start=at + 1):
            if pred(e):
                return i
        at += len(chunk)
    return None


def _back(src: Events, k: int) -> Iterator[tuple[int, Event]]:
    """(j, event j) for j = k-1 down to 1: the events before the shown one, newest first."""
    at = k - 1
    while at > 0:
        lo = max(0, at - CHUNK)
        chunk = src.events(lo, at)
        for j in range(len(chunk), 0, -1):
            yield lo + j, chunk[j - 1]
        at = lo


def _move(src: Events, k: int, pred: Callable[[Event], bool] | None, what: str) -> Move:
    if pred is None:
        return Move(None, None, what)
    return Move(_scan(src, k, pred), pred, what)


# --- over a node ------------------------------------------------------------------------------
def over_node(src: Events, k: int) -> Move:
    """To the end of the node being evaluated at k (its node_end), or, with none, to the
    end of the next node that starts after k."""
    p = place(src.state_at(k))
    if p.running:
        node, gt = p.node, p.graph_task

        def ends(e: Event) -> bool:
            return e.kind == "node_end" and e.node == node and e.graph_task == gt
        return _move(src, k, ends, f"the end of node #{node}")
    first: list[tuple[int | None, int | None]] = []  # the next node to start: over it all

    def next_ends(e: Event) -> bool:
        if e.kind == "node_start" and not first:
            first.append((e.node, e.graph_task))
        return e.kind == "node_end" and bool(first) and (e.node, e.graph_task) == first[0]
    return _move(src, k, next_ends, "the end of the next node")


def back_node(src: Events, k: int) -> int | None:
    """Back over a node, as ``n`` goes forward over one: from inside a node, to its start;
    from its end (or after it), to the start of the node that ended last, whatever ran
    inside it (a reentrant backward)."""
    over: tuple[int | None, int | None] | None = None  # a node that ended: find its start
    at_end = k > 0 and src.events(k - 1, k)[0].kind == "node_end"
    for j, e in _back(src, k + 1 if at_end else k):
        if over is None:
            if e.kind == "node_start":
                return j
            if e.kind == "node_end":
                over = (e.node, e.graph_task)
        elif e.kind == "node_start" and (e.node, e.graph_task) == over:
            return j
    return None


# --- to the end of a module -------------------------------------------------------------------
def _members(state: EngineState, gt: int | None, module: str) -> set[int]:
    """The nodes of GraphTask ``gt`` made inside ``module`` that have still to run."""
    low = module.lower()
    return {n for n, st in state.node_states.items()
            if st.graph_task == gt and st.state not in _OVER
            and inside(module_of(state, n), low)}


def _parents(module: str) -> Iterator[str]:
    """``module`` and the modules that hold it, innermost first."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        yield ".".join(parts[:i])


def finish_module(src: Events, k: int) -> Move:
    """To the end of the last node, in this GraphTask, of the module of the node at k
    (with nothing left to run there, of the module that holds it): where the backward
    leaves the module.  A live run that has not got there runs until every node of the
    module has ended (or was skipped), or its GraphTask completes."""
    state = src.state_at(k)
    p = place(state)
    mod = module_of(state, p.node)
    if mod is None:
        return Move(None, None, f"a module: this node has none {no_module(state)}")
    for m in _parents(mod):
        left = _members(state, p.graph_task, m)
        if left:
            break
    else:
        return Move(None, None, f"the end of {mod}: every node of it has run")
    gt = p.graph_task

    def leaves(e: Event) -> bool:
        if e.graph_task != gt:
            return False
        if e.kind in ("node_end", "node_skipped", "error") and e.node in left:
            left.discard(e.node)
            return not left
        return e.kind == "completion"
    return _move(src, k, leaves, f"the end of {m}")


def back_module(src: Events, k: int) -> int | None:
    """To the start of the module of the node at k in its GraphTask (the first node_start
    of one of its nodes); already there, the start of the module that holds it.  None where
    the module has not started (no node of it has, up to k): the outer module's start is not
    this one's, and a move there unsaid looked like it was."""
    state = src.state_at(k)
    p = place(state)
    mod = module_of(state, p.node)
    if mod is None:
        return None
    firsts: dict[str, int] = {}
    mods = list(_parents(mod))
    lows = [m.lower() for m in mods]
    for j, e in _back(src, k + 1):  # the shown event too: the start of its module
        if e.kind == "node_start" and e.graph_task == p.graph_task:
            got = module_of(state, e.node)
            for m, low in zip(mods, lows):
                if inside(got, low):
                    firsts[m] = j
        elif e.kind == "graph_task_created" and e.graph_task == p.graph_task:
            break
    if mod not in firsts:
        return None
    return next((firsts[m] for m in mods if m in firsts and firsts[m] < k), None)


# --- out of a GraphTask -----------------------------------------------------------------------
def _current_task(state: EngineState, p: Place, running: bool = True) -> int | None:
    """The GraphTask at k: the shown event's own where it is a reentrant one made inside
    the node being evaluated (created, its dependencies computed, handed off: none of its
    nodes runs yet, so the thread's node is still the outer one's; with ``running``
    False, its completion too), else ``p``'s."""
    last = state.last_event
    inner = last.graph_task if last is not None else None
    if inner is None or inner == p.graph_task or p.graph_task is None:
        return p.graph_task
    new, outer = state.graph_tasks.get(inner), state.graph_tasks.get(p.graph_task)
    if new is not None and outer is not None and not (running and new.completed) \
            and new.created > outer.created:
        return inner
    return p.graph_task


def _task_at(state: EngineState, p: Place) -> int | None:
    """The GraphTask at k, or, if it has completed, the innermost of its parents still
    running."""
    gid = _current_task(state, p)
    while gid is not None:
        gt = state.graph_tasks.get(gid)
        if gt is None or not gt.completed:
            return gid
        gid = gt.parent
    return None


def out_of_task(src: Events, k: int) -> Move:
    """To the completion of the GraphTask at k (inside a reentrant backward: back into the
    outer one, at the node that called it)."""
    state = src.state_at(k)
    gid = _task_at(state, place(state))
    if gid is None:
        return Move(None, None, "out of a GraphTask: none is running here")

    def completes(e: Event) -> bool:
        return e.kind == "completion" and e.graph_task == gid
    return _move(src, k, completes, f"the completion of GraphTask {gid}")


def back_task(src: Events, k: int) -> int | None:
    """To the creation of the GraphTask at k (graph_task_created); already there, of the
    GraphTask that made it."""
    state = src.state_at(k)
    gid: Any = _current_task(state, place(state), running=False)
    while gid is not None:
        gt = state.graph_tasks.get(gid)
        if gt is None:
            return None
        if gt.created < k:
            return gt.created
        gid = gt.parent
    return None
