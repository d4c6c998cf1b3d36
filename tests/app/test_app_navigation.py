"""Navigation by what a person knows (issue 29): search and breakpoints by module path and
parameter name (with completion), steps over a node (``n``), to the end of a module
(``m``), out of a GraphTask (``u``) and back (``N``, ``M``, ``U``); the details pane that
scrolls, and "created at" the program's own frame with the library frames on ``F``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pilot import press, run_app, settle, shown, until
from test_app import App
from textual.pilot import Pilot
from textual.widgets import Input

from autograd_tui import scenarios
from autograd_tui.app.screens import BreakpointsScreen
from autograd_tui.app.screens.jump import JumpScreen
from autograd_tui.app.widgets import TextView
from autograd_tui.engine.events import Event, make_event
from autograd_tui.history import recordings as trace
from autograd_tui.session import Breakpoint, Session
from autograd_tui.session.run import Run
from autograd_tui.words import inside

pytestmark = pytest.mark.timeout(180)


def session(app: App) -> Session:
    s = app.debugger.session
    assert s is not None
    return s


def shown_event(app: App) -> Event:
    k = shown(app)[0]
    assert k > 0
    return session(app).event(k - 1)


def module_at(app: App, node: int | None) -> str | None:
    s = session(app)
    meta = s.state_at(s.count()).node_meta.get(node) if node is not None else None
    return meta.get("module") if meta else None


async def jump(pilot: Pilot[Any], text: str) -> None:
    await press(pilot, "slash")
    assert isinstance(pilot.app.screen, JumpScreen)
    await pilot.press(*text)
    await press(pilot, "enter")


# --- search and breakpoints by module path and parameter name ---------------------------------
def test_search_by_module_path_and_by_parameter_name_with_completion() -> None:
    app = App("torch-attention")

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "space")  # the whole run, then walk its history
        s = session(app)
        assert s.finished
        await press(pilot, "home")
        # completion: the word typed so far, completed from the graph's module paths
        await press(pilot, "slash")
        box = app.screen.query_one("#jump", Input)
        await pilot.press(*"blocks.0.ml")
        await until(pilot, lambda: box._suggestion == "blocks.0.mlp")
        await press(pilot, "right")  # takes the suggestion
        assert box.value == "blocks.0.mlp"
        await press(pilot, "enter")
        e = shown_event(app)
        assert e.kind != "node_meta" and inside(module_at(app, e.node), "blocks.0.mlp")
        first = shown(app)[0]
        assert not any(inside(module_at(app, x.node), "blocks.0.mlp")
                       for x in s.events(0, first - 1) if x.kind != "node_meta")
        await press(pilot, "right_square_bracket")  # the next event of that module
        assert shown(app)[0] > first
        assert inside(module_at(app, shown_event(app).node), "blocks.0.mlp")
        # a path is matched by whole parts: blocks.0.ml is no module
        await press(pilot, "home")
        await jump(pilot, "blocks.0.ml")
        assert isinstance(app.screen, JumpScreen) and shown(app)[0] == 0
        assert any("neither an event kind" in m for _, m, _ in app.notes)
        await press(pilot, "escape")
        # a parameter's name: the AccumulateGrad that receives its gradient
        await jump(pilot, "node_end blocks.0.attn.qkv.weight")
        e = shown_event(app)
        meta = s.state_at(s.count()).node_meta[e.node]
        assert e.kind == "node_end" and e.name == "AccumulateGrad"
        assert meta["tensor"] == "blocks.0.attn.qkv.weight"

    run_app(app, script)


def test_a_breakpoint_on_a_module_stops_where_the_backward_reaches_it() -> None:
    app = App("torch-attention")

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "b")
        assert isinstance(app.screen, BreakpointsScreen)
        app.screen.query_one("#bp-kind", Input).value = "node_start"
        app.screen.query_one("#bp-node", Input).focus()
        await pilot.press(*"blocks.0.ln2")
        await press(pilot, "enter", "escape")
        assert session(app).breakpoints == [Breakpoint(kind="node_start", node="blocks.0.ln2")]
        await press(pilot, "c")
        s = session(app)
        e = s.event(s.count() - 1)  # the engine stopped at the first node of the module
        assert e.kind == "node_start" and module_at(app, e.node) == "blocks.0.ln2"
        assert not any(x.kind == "node_start" and module_at(app, x.node) == "blocks.0.ln2"
                       for x in s.events(0, s.count() - 1))
        assert not s.finished

    run_app(app, script)


# --- steps by node, module, GraphTask ---------------------------------------------------------
def test_n_steps_over_a_node_live_and_back() -> None:
    app = App("reentrant")

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "n")  # the engine runs to the end of the first node
        s = session(app)
        e = s.event(s.count() - 1)
        assert e.kind == "node_end" and shown(app) == (s.count(), s.count())
        starts = [x for x in s.events() if x.kind == "node_start"]
        assert len(starts) == 1 and starts[0].node == e.node
        # on to the node that runs a reentrant backward: n steps over all of it
        while (last := s.event(s.count() - 1)).name != "XExpBackward":
            await press(pilot, "n")
            last = s.event(s.count() - 1)
            assert last.kind == "node_end" and last.graph_task == 1  # never inside GT2
        assert any(x.graph_task == 2 for x in s.events())  # the inner backward ran
        end = s.count()
        await press(pilot, "N")  # back to the node's start, in the history
        k = shown(app)[0]
        assert k < end and s.event(k - 1).kind == "node_start"
        assert s.event(k - 1).node == last.node
        await press(pilot, "n")  # forward again over it: the history has its end
        assert shown(app) == (end, end) and s.count() == end
        # one event at a time is .
        await press(pilot, "full_stop")
        assert s.count() == end + 1

    run_app(app, script)


def test_u_steps_out_of_a_reentrant_graph_task_and_U_back() -> None:
    app = App("reentrant")

    async def script(pilot: Pilot[Any]) -> None:
        s = session(app)
        s.breakpoints = [Breakpoint(kind="node_start", graph_task=2)]
        await press(pilot, "c")
        assert s.event(s.count() - 1).graph_task == 2
        s.breakpoints = []
        await press(pilot, "u")  # to GraphTask 2's completion: back in the outer one
        e = s.event(s.count() - 1)
        assert (e.kind, e.graph_task) == ("completion", 2)
        assert not s.state_at(s.count()).graph_tasks[1].completed
        await press(pilot, "u")  # and out of the outer one: the end
        e = s.event(s.count() - 1)
        assert (e.kind, e.graph_task) == ("completion", 1)
        inner = next(i for i, x in enumerate(s.events(), 1) if x.kind == "node_start"
                     and x.graph_task == 2)
        await press(pilot, "g")  # into GraphTask 2 again, then U: to its creation
        await pilot.press(*str(inner))
        await press(pilot, "enter", "U")
        k = shown(app)[0]
        assert (s.event(k - 1).kind, s.event(k - 1).graph_task) == ("graph_task_created", 2)

    run_app(app, script)


def test_m_finishes_a_module_then_the_module_that_holds_it() -> None:
    app = App("torch-attention")

    async def script(pilot: Pilot[Any]) -> None:
        s = session(app)
        s.breakpoints = [Breakpoint(kind="node_start", node="blocks.0.mlp.fc2")]
        await press(pilot, "c")
        s.breakpoints = []
        await press(pilot, "m")  # live: the engine runs until fc2's last node has run
        state = s.state_at(s.count())
        e = s.event(s.count() - 1)
        assert e.kind == "node_end" and module_at(app, e.node) == "blocks.0.mlp.fc2"
        fc2 = [n for n, m in state.node_meta.items() if m.get("module") == "blocks.0.mlp.fc2"]
        assert fc2 and all(state.node_states[n].state == "done" for n in fc2)
        assert not s.finished
        await press(pilot, "m")  # nothing left of fc2: the end of blocks.0.mlp
        state = s.state_at(s.count())
        mlp = [n for n, m in state.node_meta.items() if inside(m.get("module"), "blocks.0.mlp")]
        assert all(state.node_states[n].state == "done" for n in mlp)
        assert inside(module_at(app, s.event(s.count() - 1).node), "blocks.0.mlp")
        last = module_at(app, s.event(s.count() - 1).node)  # fc1: inside blocks.0.mlp
        assert last is not None and last != "blocks.0.mlp"
        for mod in (last, "blocks.0.mlp"):  # M: back to the start of that module; again:
            await press(pilot, "M")  # of the module that holds it
            k = shown(app)[0]
            e = s.event(k - 1)
            assert e.kind == "node_start" and inside(module_at(app, e.node), mod)
            assert not any(x.kind == "node_start" and inside(module_at(app, x.node), mod)
                           for x in s.events(0, k - 1))

    run_app(app, script)


# --- the details pane ---------------------------------------------------------------------------
STACK = ["/home/me/train.py:40 in <module>", "/home/me/train.py:12 in main",
         "/usr/lib/python3/site-packages/torch/nn/modules/module.py:1775 in _call_impl",
         "/usr/lib/python3/site-packages/torch/nn/functional.py:1500 in relu"]


def forged(path: Path) -> Path:
    """linear-relu's recording with a PyTorch-like ``node_meta`` for ReluBackward0: made
    in the program's own frame (``created``) under two library frames, with 60 saved
    tensors (more than any pane shows at once)."""
    with Run(scenarios.load("linear-relu")) as run:
        assert run.run().status == "finished"
        header, events = run.header(), list(run.events)
    deps = next(i for i, e in enumerate(events) if e.kind == "dependencies_computed")
    relu = next(n["id"] for n in events[deps].data["nodes"] if n["name"] == "ReluBackward0")
    meta = make_event(0, "node_meta", events[deps].thread, events[deps].graph_task, relu,
                      data={"module": "act", "module_type": "ReLU", "tensor": None,
                            "created": STACK[1], "source": "    y = model(x)",
                            "saved": [f"t{i}: Tensor[4, 8] float32" for i in range(60)],
                            "stack": STACK})
    evs = events[:deps + 1] + [meta] + events[deps + 1:]
    evs = [make_event(i, e.kind, e.thread, e.graph_task, e.node, e.queue, e.data)
           for i, e in enumerate(evs, 1)]
    trace.save(path, header, evs)
    return path


def test_details_show_the_programs_frame_library_frames_on_F_and_scroll(tmp_path: Path
                                                                        ) -> None:
    app = App(recording=trace.load(forged(tmp_path / "forged.jsonl")))

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "home", "slash")
        await pilot.press(*"node_start act")  # the module's node, by its module path
        await press(pilot, "enter", "d")
        details = app.debugger.query_one("#details", TextView)
        text = details.content.plain
        assert "ReluBackward0" in text and "module: act (ReLU)" in text
        assert "created at /home/me/train.py:12 in main" in text
        assert "site-packages" not in text  # the library frames: one key away
        assert "F: every frame of the forward op (4, library ones too)" in text
        assert "saved tensors (60):" in text and "t59: Tensor[4, 8] float32, size 128 B" in text
        await press(pilot, "F")
        text = details.content.plain
        assert "forward stack (4 frames, outermost first; F hides):" in text
        assert all(f in text for f in STACK)
        assert "  > /home/me/train.py:12 in main" in text  # the program's frame, marked
        # more lines than the pane holds: it scrolls, by key and wheel alike
        assert details.max_scroll_y > 0 and details.scroll_y == 0
        await press(pilot, "J")
        await until(pilot, lambda: details.scroll_y == 4)
        await press(pilot, "J", "J", "K")
        await until(pilot, lambda: details.scroll_y == 8)
        await press(pilot, "F")  # the program's frame only again
        assert "site-packages" not in details.content.plain
        await settle(pilot)

    run_app(app, script, size=(120, 40))


def test_moves_walk_a_recording_and_say_where_they_cannot_go(tmp_path: Path) -> None:
    app = App(recording=trace.load(forged(tmp_path / "forged.jsonl")))

    async def script(pilot: Pilot[Any]) -> None:
        s = session(app)
        ends = [i for i, e in enumerate(s.events(), 1) if e.kind == "node_end"]
        starts = [i for i, e in enumerate(s.events(), 1) if e.kind == "node_start"]
        await press(pilot, "home", "n")  # no engine: the history has every node's end
        assert shown(app)[0] == ends[0]
        await press(pilot, "n")
        assert shown(app)[0] == ends[1]
        await press(pilot, "N")
        assert shown(app)[0] == starts[1]
        await press(pilot, "N")
        assert shown(app)[0] == starts[0]
        await press(pilot, "m")  # ReluBackward0 is in module act, the others in none
        assert shown(app)[0] == starts[0]
        assert any("a module: this node has none" in m for _, m, _ in app.notes)
        await jump(pilot, "node_start act")
        await press(pilot, "m")  # act has one node: the end of act is its end
        e = shown_event(app)
        assert e.kind == "node_end" and module_at(app, e.node) == "act"
        await press(pilot, "u")  # out of the one GraphTask: its completion
        assert shown_event(app).kind == "completion"
        await press(pilot, "end")
        app.notes.clear()
        await press(pilot, "n")
        assert shown(app)[0] == s.count()
        assert any("this recording never gets to the end of the next node" in m
                   for _, m, _ in app.notes), app.notes
        await press(pilot, "U")  # back to the creation of the GraphTask
        assert shown_event(app).kind == "graph_task_created"

    run_app(app, script)
