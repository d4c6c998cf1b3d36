"""Every pane agrees with the others at every step of every built-in scenario.

Walks each scenario's events one at a time, folding them into one state, and at
every step reads what the panes show (``render``'s functions: the boxes' and list
rows' states, the ready queues, not_ready, the GraphTasks and the threads) and
checks that they tell one story.  The Textual app is not started: the panes are
render's outputs, and starting it per step would take minutes.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest

from autograd_tui import scenarios
from autograd_tui.app import render
from autograd_tui.history.fold import apply
from autograd_tui.history.state import EngineState
from autograd_tui.session.run import Run

_OUTSTANDING = re.compile(r"^GT(\d+) .* outstanding (\d+) ", re.M)


def _events(name: str) -> list[Any]:
    run = Run(scenarios.load(name))
    try:
        run.run()
        return list(run.history.events)
    finally:
        run.close()


class _Held:
    """Tasks a thread has popped and not yet counted down, outside its node stack: from
    the pop to node_start, and from node_end (or the node's error) to
    outstanding_decrement.  The engine counts them in outstanding_tasks; no pane shows
    them, so the test follows them from the events."""

    def __init__(self) -> None:
        self.by_thread: dict[str, int | None] = {}

    def see(self, e: Any) -> None:
        kind, th = e.kind, e.thread
        if kind == "pop" and not e.shutdown:
            self.by_thread[th] = e.graph_task
        elif kind == "node_start" or kind == "outstanding_decrement":
            self.by_thread.pop(th, None)
        elif kind == "node_end" or (kind == "error" and e.node is not None):
            self.by_thread[th] = e.graph_task

    def count(self) -> Counter[int | None]:
        return Counter(self.by_thread.values())


def disagreements(state: EngineState, held: Counter[int | None]) -> list[str]:
    """What the panes of ``state`` say that the others contradict (empty: they agree)."""
    out: list[str] = []
    shown = {n: render.node_status(state, n)[:2] for n in state.nodes}
    rows = {int(r[0]): r for r in render.list_rows(state)}
    for n, (st, where) in shown.items():  # the box and the list row say the same
        if rows[n][3] != st.replace("_", " ") or rows[n][6] != where:
            out.append(f"#{n}: box says {st} @{where}, list row {rows[n][3]} @{rows[n][6]}")
    label = lambda n: render.label_of(state, n)  # noqa: E731

    # not_ready: a box that says so <-> an entry of the pane
    pane = render.not_ready_text(state).plain
    entries = {n for _, n in state.not_ready}
    for n, (st, _) in shown.items():
        if (st == "not_ready") != (n in entries):
            out.append(f"{label(n)}: box says {st}, not_ready pane "
                       f"{'lists' if n in entries else 'does not list'} it")
    if len(state.not_ready) <= render.PANE_ITEMS:
        for gt, n in state.not_ready:
            if not re.search(rf"(^|\n){re.escape(label(n))} GT{gt} ", pane):
                out.append(f"{label(n)} GT{gt} missing from the not_ready pane's text")

    # ready: a box that says ready @q <-> a task of queue q's pane
    queued: dict[str, list[Any]] = {q: list(state.queue_order(q)) for q in state.heaps}
    qtext = render.queues_text(state).plain
    for q, tasks in queued.items():
        line = next((x for x in qtext.split("\n") if x.startswith(q + " (")), "")
        if not line.startswith(f"{q} ({len(tasks)})"):
            out.append(f"queue {q}: pane line {line!r}, {len(tasks)} tasks")
        for t in tasks[:render.PANE_ITEMS]:
            if label(t.node) not in line:
                out.append(f"queue {q}: {label(t.node)} missing from its pane line")
            if t.node is None or t.graph_task is None:
                continue  # a dummy (wake-up) task, or one whose GraphTask is gone
            if shown[t.node] != ("ready", q):
                out.append(f"{label(t.node)} is in queue {q}, but its box says "
                           f"{shown[t.node][0]} @{shown[t.node][1]}")
    for n, (st, where) in shown.items():
        # ready at no queue: on its way from not_ready to a queue, or popped and not
        # yet started; ready @q: in queue q
        if st == "ready" and where and \
                n not in {t.node for t in queued.get(where, ())}:
            out.append(f"{label(n)}: box says ready @{where}, but queue {where} "
                       "does not hold it")

    # running: a box that says running @thread <-> on that thread's stack, and the
    # threads pane's node is the top of the stack
    rows_t = {r[0]: r for r in render.threads_rows(state, {})}
    stacks = {name: [n for _, n in th.nodes] for name, th in state.threads.items()}
    for n, (st, where) in shown.items():
        if st == "running" and n not in stacks.get(where or "", ()):
            out.append(f"{label(n)}: box says running @{where}, not on its stack")
    for name, stack in stacks.items():
        top = label(stack[-1]) if stack else ""
        if rows_t[name][2] != top:
            out.append(f"threads pane: {name} runs {rows_t[name][2]!r}, its stack's top "
                       f"is {top!r}")
        for n in stack:
            if shown[n] != ("running", name):
                out.append(f"{label(n)} is on {name}'s stack, but its box says "
                           f"{shown[n][0]} @{shown[n][1]}")
        # docs/tui.md: depth is how many nodes the thread is inside (its stack)
        if rows_t[name][3] != str(len(stack)):
            out.append(f"threads pane: {name} depth {rows_t[name][3]}, stack {len(stack)}")

    # GraphTasks: outstanding = its tasks in queues + on threads' stacks + held
    gts = dict((int(g), int(k)) for g, k in _OUTSTANDING.findall(
        render.graph_tasks_text(state).plain))
    in_queues = Counter(t.graph_task for ts in queued.values() for t in ts)
    on_stacks = Counter(g for th in state.threads.values() for g, _ in th.nodes)
    for gid, gt in state.graph_tasks.items():
        if gt.freed or gid not in gts:
            continue
        want = in_queues[gid] + on_stacks[gid] + held[gid]
        if gts[gid] != want:
            out.append(f"GT{gid}: pane says outstanding {gts[gid]}, but {in_queues[gid]} "
                       f"queued + {on_stacks[gid]} running + {held[gid]} popped")
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", scenarios.names())
def test_panes_agree_at_every_step(name: str) -> None:
    if name.startswith("torch-"):
        pytest.importorskip("torch")
    events = _events(name)
    state, held = EngineState(), _Held()
    found: list[str] = [f"0: {x}" for x in disagreements(state, held.count())]
    for k, e in enumerate(events, 1):
        apply(state, e)
        held.see(e)
        found += [f"{k}/{len(events)} {e.kind}: {x}" for x in disagreements(state, held.count())]
        if len(found) > 20:
            break
    assert not found, "\n".join(found)
