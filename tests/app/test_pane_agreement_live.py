"""The pane-agreement test through the widgets a student sees: the app under Textual's
Pilot, stepped with ``n``, and at each step checked the threads, ready-queue, not_ready
and GraphTasks panes' text (what the widgets hold, not ``render``'s functions) against
the fold's state at the shown event (``Session.state_at``), and ``test_pane_agreement``'s
checks of that state.

Every step of the shortest scenario; some steps of a few others (starting the app per
step of every scenario would take minutes)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pilot import press, run_app, shown
from test_app import App, thread_rows
from test_pane_agreement import _Held, disagreements
from textual.pilot import Pilot

from autograd_tui import scenarios
from autograd_tui.app import render
from autograd_tui.app.widgets import SidePane
from autograd_tui.history.state import EngineState
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(180)


def _length(name: str) -> int:
    with Run(scenarios.load(name)) as run:
        run.run()
        return len(run.events)


def _text(app: App, pane: str) -> str:
    content = app.debugger.query_one(f"#{pane}", SidePane).content
    return getattr(content, "plain", str(content))


def widget_disagreements(app: App, state: EngineState) -> list[str]:
    """What the live widgets show that the fold's ``state`` contradicts."""
    out: list[str] = []
    label = lambda n: render.label_of(state, n)  # noqa: E731

    # threads: a row per thread of the fold, its node the top of its stack, its depth
    rows = {r[1][0]: tuple(c[0] for c in r) for r in thread_rows(app)}
    for name, th in state.threads.items():
        row = rows.get(name)
        if row is None:
            out.append(f"threads pane: no row for {name}")
            continue
        top = label(th.nodes[-1][1]) if th.nodes else ""
        if row[3] != top or row[2] != str(len(th.nodes)):
            out.append(f"threads pane: {name} runs {row[3]!r} depth {row[2]}, the fold "
                       f"{top!r} depth {len(th.nodes)}")
        words = th.state + (f" on {render.wait_words(*th.waiting_on)}" if th.waiting_on
                            else "")
        if not row[4].startswith(words):
            out.append(f"threads pane: {name} says {row[4]!r}, the fold {words!r}")

    # ready queues: a line per queue, its count, its first tasks
    qtext = _text(app, "queues")
    for q in state.heaps:
        tasks = list(state.queue_order(q))
        line = next((x for x in qtext.split("\n") if x.startswith(q + " (")), "")
        if not line.startswith(f"{q} ({len(tasks)})"):
            out.append(f"queues pane: {line!r}, the fold {len(tasks)} tasks in {q}")
        for t in tasks[:render.PANE_ITEMS]:
            if label(t.node) not in line:
                out.append(f"queues pane: {label(t.node)} missing from {q}'s line")

    # not_ready: each entry of the fold, and no other
    ntext = _text(app, "not-ready")
    if len(state.not_ready) <= render.PANE_ITEMS:
        for gt, n in state.not_ready:
            if not re.search(rf"(^|\n){re.escape(label(n))} GT{gt} ", ntext):
                out.append(f"not_ready pane: {label(n)} GT{gt} missing")
    for n in state.nodes:
        listed = re.search(rf"(^|\n){re.escape(label(n))} GT", ntext) is not None
        if listed and n not in {m for _, m in state.not_ready}:
            out.append(f"not_ready pane lists {label(n)}, not in the fold's not_ready")

    # GraphTasks: a line per live GraphTask of the fold
    gtext = _text(app, "graph-tasks")
    for gid, gt in state.graph_tasks.items():
        if not gt.freed and not re.search(rf"(^|\n)GT{gid} ", gtext):
            out.append(f"GraphTasks pane: GT{gid} missing")
    return out


def _walk(name: str, every: int) -> None:
    app = App(name)

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        held, folded = _Held(), 0
        found: list[str] = []
        checked = stuck = 0
        while not s.finished and len(found) < 20 and stuck < 5:
            await press(pilot, "full_stop")
            k = shown(app)[0]
            stuck = stuck + 1 if k == folded else 0
            for e in s.events(folded, k):
                held.see(e)
            folded = k
            if k % every and not s.finished:
                continue
            state = s.state_at(k)
            checked += 1
            found += [f"{name} {k}: {x}" for x in widget_disagreements(app, state)]
            found += [f"{name} {k}: {x}" for x in disagreements(state, held.count())]
        assert checked > 1
        assert not found, "\n".join(found)

    run_app(app, script)


def test_the_live_widgets_agree_at_every_step_of_the_shortest_scenario() -> None:
    shortest = min(["chain", "diamond", "linear-relu", "fan-in"], key=_length)
    _walk(shortest, every=1)


@pytest.mark.parametrize("name", ["multi-device", "reentrant", "deadlock-lock-steal"])
def test_the_live_widgets_agree_along_a_run(name: str) -> None:
    _walk(name, every=5)
