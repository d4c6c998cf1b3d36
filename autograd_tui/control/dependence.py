"""Which steps of a serialized run commute: the dependence relation of the explorer.

Not in PyTorch.  A *step* is what one thread does between two gates: the code it
runs after its turn is granted, up to the event it emits (or the wait it enters).
The explorer's partial-order reduction (``explore.py``, sleep sets) skips an
interleaving when it only swaps two adjacent steps of different threads that
*commute*: run in either order they leave the engine, the user's objects and the
outcome the same.  Steps commute when their *footprints* (the shared objects they
touch, read or written) are disjoint.  A footprint is worked out from the events
the step emits, and from what the thread waits on when the step ends in a wait:

============================  ===================================================
the step's event              what it touches
============================  ===================================================
``push`` / ``pop``            the ready queue (``q:NAME``); a push also the
                              task's GraphTask (its ``outstanding_tasks``)
``thread_wait``/``_wake``     the queue, the GraphTask (``on: future``), the
                              reentrant pool, or, for a lock or a signal, user state
dependency / buffer /         the GraphTask (``g:ID``): its ``dependencies``,
``not_ready`` / completion    ``not_ready`` input buffers, ``outstanding_tasks``,
/ ``graph_task_created`` ...  mutex and future
``node_start``                nothing shared (the task was popped by the step before)
``node_end``, ``hook``        user state (``user``): a node's function or hook is
                              code we cannot see into (user locks, a leaf's .grad)
``reentrant_handoff``         the GraphTasks and user state (a backward in a backward)
``thread_start``/``_exit``    nothing shared
anything else (``error``)     everything (``*``)
a step that starts a thread   ``spawn``: threads are numbered in the order they appear
a step that ends the program  everything
============================  ===================================================

This is conservative where it must be: every step that ran user code depends on
every other such step, because a user lock taken without contention emits no event.
It is finer than "everything touches everything" where it can be: pops and waits
on different queues, a node's start, and two threads' work on different GraphTasks
commute.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from autograd_tui.engine.events import Event

Footprint = frozenset[str]

EVERYTHING: Footprint = frozenset({"*"})
NOTHING: Footprint = frozenset()

# Event kinds that touch the state of their GraphTask (dependencies, not_ready, buffers,
# outstanding_tasks, mutex, future, exec_info).
_GRAPH_TASK = frozenset({
    "dependency_decrement", "buffer_accumulate", "not_ready_insert", "not_ready_remove",
    "node_skipped", "outstanding_decrement", "completion", "wakeup", "graph_task_created",
    "dependencies_computed", "exec_info", "node_meta",
})
_FREE = frozenset({"node_start", "thread_start", "thread_exit"})
_USER = frozenset({"node_end", "hook"})


def event_footprint(e: Event) -> set[str]:
    kind = e.kind
    if kind in _FREE:
        return set()
    gt = e.graph_task
    if kind == "push":
        return {f"q:{e.queue}"} if gt is None else {f"q:{e.queue}", f"g:{gt}"}
    if kind == "pop":
        return {f"q:{e.queue}"}
    if kind in _GRAPH_TASK:
        out = {f"g:{gt}"}
        if kind in ("completion", "graph_task_created"):
            out.add("user")  # final callbacks run; a backward() called from user code
        return out
    if kind in _USER:
        out = {"user"}
        if kind == "hook" and gt is not None:
            out.add(f"g:{gt}")  # capture and final_callback hooks write the GraphTask
        return out
    if kind in ("thread_wait", "thread_wake"):  # (fields read as such: ``data`` is a dict)
        on = getattr(e, "on", None)
        if on == "queue":
            return {f"q:{getattr(e, 'target', None)}"}
        if on == "future":
            return {f"g:{gt}"}
        if on == "pool":
            return {"pool"}
        return {"user", f"l:{getattr(e, 'target', None)}"}  # a lock (user or mutex), a signal
    if kind == "reentrant_handoff":
        return {f"g:{gt}", f"g:{getattr(e, 'parent_graph_task', None)}", "user", "pool"}
    return set(EVERYTHING)


def wait_footprint(kind: str | None, obj: Any) -> Footprint:
    """A step that emitted nothing and ended in a wait: it read what it waits on."""
    if kind == "queue":
        return frozenset({f"q:{getattr(obj, 'name', '?')}"})
    if kind == "future":
        return frozenset({f"g:{getattr(obj, 'graph_task_id', '?')}"})
    if kind == "pool":
        return frozenset({"pool"})
    if kind in ("lock", "signal"):
        return frozenset({"user", f"l:{getattr(obj, 'name', '?')}"})
    return EVERYTHING


def step_footprint(events: Iterable[Event], *, spawned: bool = False,
                   waits: tuple[str | None, Any] | None = None,
                   finished: bool = False) -> Footprint:
    """The footprint of one step: the union of its events' (``events`` may be empty
    when the step ended in a wait, ``waits`` = (kind, object), or ended its thread)."""
    if finished:
        return EVERYTHING
    out: set[str] = set()
    empty = True
    for e in events:  # event_footprint, its commonest kinds inlined (a gate each)
        empty = False
        kind = e.kind
        if kind in _FREE:
            continue
        if kind == "pop":
            out.add(f"q:{e.queue}")
        elif kind in _GRAPH_TASK and kind != "completion" and kind != "graph_task_created":
            out.add(f"g:{e.graph_task}")
        else:
            out |= event_footprint(e)
    if empty:
        if waits is None:
            return EVERYTHING
        out |= wait_footprint(*waits)
    if spawned:
        out.add("spawn")
    return frozenset(out)


def independent(a: Footprint, b: Footprint) -> bool:
    """Two steps of different threads commute: they touch nothing in common."""
    if "*" in a or "*" in b:
        return False
    return a.isdisjoint(b)
