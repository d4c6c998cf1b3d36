"""The graph pane's boxes view: a framed group per GraphTask (creation order, nested inside
the parent, pool threads named), forward-op labels, ellipses, scrolling both ways, and
colours from the theme's ``graph-*`` variables (light and dark snapshots at 120x40)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from pilot import SIZE, finish, settle, step_until
from rich.text import Text
from textual.pilot import Pilot
from textual.theme import Theme

from autograd_tui import scenarios
from autograd_tui.app import AutogradApp, graph_draw, render
from autograd_tui.app.theme import VARIABLES, Palette, theme_defaults
from autograd_tui.app.widgets import TextView
from autograd_tui.app.widgets.graph_pane import GraphPane
from autograd_tui.history.state import EngineState
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(120)

_TITLE = re.compile(r"GraphTask (\d+)")


def final_state(name: str, params: dict[str, Any] | None = None,
                engine: dict[str, Any] | None = None) -> tuple[Run, EngineState]:
    with Run(scenarios.get(name), params, engine_overrides=engine) as run:
        run.start()
        run.run()
        return run, run.history.head.copy()


def created_order(run: Run) -> list[int]:
    return [e.graph_task for e in run.events if e.kind == "graph_task_created"]


def titles(lines: list[Text]) -> list[tuple[int, int]]:
    """(column of the frame's corner, GraphTask) per group title, top to bottom."""
    out = []
    for line in lines:
        m = _TITLE.search(line.plain)
        if m and "╭─ " in line.plain:
            out.append((line.plain.index("╭─ "), int(m.group(1))))
    return out


def flatten(groups: list[graph_draw.Group]) -> list[graph_draw.Group]:
    return [x for g in groups for x in (g, *flatten(g.children))]


# --- groups -------------------------------------------------------------------------------
@pytest.mark.parametrize("name, params, engine", [
    ("reentrant", None, None),
    ("reentrant-deep", {"depth": 5}, None),
    ("reentrant-deep", {"depth": 5}, {"max_recursion_depth": 2}),
    ("deadlock-pool-exhausted", None, None),
])
def test_each_graph_task_is_a_group_in_creation_order_nested_in_its_parent(
        name: str, params: dict[str, Any] | None, engine: dict[str, Any] | None) -> None:
    run, state = final_state(name, params, engine)
    order = created_order(run)
    assert len(order) >= 2
    forest = graph_draw.groups(state)
    assert [g.gid for g in flatten(forest)] == order  # depth first = creation order here
    for g in flatten(forest):  # every node in the group of the GraphTask that counted it
        assert {n for layer in g.layers for n in layer} == {
            n for n, ns in state.node_states.items() if ns.graph_task == g.gid}
        for c in g.children:
            assert state.graph_tasks[c.gid].parent == g.gid
    drawn = titles(graph_draw.draw(state).lines)
    assert [gid for _, gid in drawn] == order
    columns = dict((gid, col) for col, gid in drawn)
    for gid in order[1:]:  # a nested group's frame is inside its parent's
        assert columns[gid] > columns[state.graph_tasks[gid].parent]  # type: ignore[index]


def test_groups_follow_the_created_events_not_the_ids() -> None:
    """The order is graph_task_created's, even where ids would say otherwise."""
    _, state = final_state("retain-graph")
    first, second = state.graph_tasks[1], state.graph_tasks[2]
    state.graph_tasks[1] = first._replace(created=second.created + 1)
    assert [g.gid for g in graph_draw.groups(state)] == [2, 1]
    # GraphTask 2 counted the retained graph again: 1 has none of its own now, and says so
    state.graph_tasks[1] = first
    one = graph_draw.groups(state)[0]
    assert one.gid == 1 and not one.layers and "GraphTask 2" in one.note


def test_pool_threads_are_named_in_the_titles() -> None:
    run, state = final_state("deadlock-pool-exhausted")
    handed = {e.graph_task for e in run.events
              if e.kind == "reentrant_handoff" and e.data["mode"] == "pool"}
    pool_threads = {e.thread for e in run.events
                    if e.kind == "thread_start" and e.data["role"] == "pool"}
    assert handed and pool_threads
    by_gid = {g.gid: g.title for g in flatten(graph_draw.groups(state))}
    for gid in handed:
        ran = {e.thread for e in run.events if e.kind == "node_start" and e.graph_task == gid}
        title = by_gid[gid]
        if ran:  # it got a pool thread: the title names it
            (thread,) = ran
            assert thread in pool_threads and f"pool thread {thread}" in title
        else:
            assert "handed to the reentrant pool" in title
        assert f"nested in {state.graph_tasks[gid].parent}" in title
    # a GraphTask nested on the pool thread that runs its parent does not repeat it
    inner = [g for g in state.graph_tasks.values()
             if g.owner in pool_threads and g.handoff == "nested"]
    assert inner and all("pool thread" not in by_gid[g.id] for g in inner)


def test_the_pane_draws_the_groups_and_scrolls_to_the_touched_node() -> None:
    app = AutogradApp("deadlock-pool-exhausted")

    async def script(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await step_until(pilot, lambda a: last_graph_task(a) == 5 and last_node(a))
        await pilot.pause()
        view = app.debugger.query_one("#graph", TextView)
        assert view.virtual_size.height > view.scrollable_content_region.height
        assert view.scroll_offset.y > 0  # GraphTask 5's boxes are far down
        text = view.content.plain
        assert [int(x) for x in _TITLE.findall(text)] == [1, 2, 3, 4, 5]
        node = last_node(app)
        y, _, h = app.debugger.query_one(GraphPane).drawing(state_of(app), node).where[node]
        top = view.scroll_offset.y
        assert top <= y and y + h <= top + view.scrollable_content_region.height

    run(app, script)


def test_a_new_graph_task_scrolls_its_frame_into_view() -> None:
    app = AutogradApp("deadlock-pool-exhausted")

    async def script(pilot: Pilot[Any]) -> None:
        await step_until(pilot, lambda a: last_kind_is(a, "graph_task_created") and
                         last_graph_task(a) == 5)
        await pilot.pause()
        view = app.debugger.query_one("#graph", TextView)
        top = view.scroll_offset.y
        shown = [view._lines[y].plain
                 for y in range(top, top + view.scrollable_content_region.height)]
        assert top > 0 and any("╭─ GraphTask 5 " in line for line in shown)

    run(app, script)


def last_graph_task(app: AutogradApp) -> int | None:
    s = app.debugger.session
    assert s is not None
    return s.event(s.count() - 1).graph_task if s.count() else None


def last_node(app: AutogradApp) -> int | None:
    s = app.debugger.session
    assert s is not None
    e = s.event(s.count() - 1) if s.count() else None
    return e.node if e is not None and e.node in s.state_at(s.count()).nodes else None


def state_of(app: AutogradApp) -> EngineState:
    s = app.debugger.session
    assert s is not None
    return s.state_at(s.count())


def run(app: AutogradApp, script: Any, size: tuple[int, int] = SIZE) -> None:
    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            await script(pilot)

    asyncio.run(main())


# --- names ----------------------------------------------------------------------------------
def test_linear_relu_boxes_say_which_linear_is_which() -> None:
    sc = scenarios.get("linear-relu")
    run_, state = final_state("linear-relu")
    by_seq = {info.seq: n for n, info in state.nodes.items() if not info.leaf}
    linear1, linear2 = by_seq[0], by_seq[2]  # the seeds: Linear1 is made first
    assert state.nodes[linear1].name == state.nodes[linear2].name == "LinearBackward0"
    labels = graph_draw.forward_labels(state, sc.forward)
    assert labels[linear1] == "Linear1" and labels[linear2] == "Linear2"
    # the leaves of Linear1's inputs: input, weight, bias, by its edges
    leaves = [c for c, _ in state.nodes[linear1].next]
    assert [labels[c] for c in leaves] == ["input", "linear1.weight", "linear1.bias"]
    b = graph_draw.draw(state, forward=sc.forward)
    text = "\n".join(line.plain for line in b.lines)
    for n, label in ((linear1, "Linear1"), (linear2, "Linear2")):
        y, x, h = b.where[n]
        box = [line.plain[x:x + graph_draw.BOX_WIDTH] for line in b.lines[y:y + h]]
        assert "LinearBackward0" in box[0] and f"({label})" in box[1]
        assert f"#{n} " in box[2]
    assert "(linear2.weight)" in text
    details = render.node_details(state, linear1, forward=sc.forward).plain
    assert details.startswith(f"LinearBackward0 #{linear1}   from Linear1   GraphTask 1")
    # without FORWARD (another scenario, a recording of an unknown one): no labels
    assert graph_draw.forward_labels(state, {}) == {}


def test_a_pytorch_graphs_nodes_are_labelled_by_module_and_parameter() -> None:
    """node_meta (a recording's, so checked for its types) names a node's module, or an
    AccumulateGrad's parameter; the scenario's FORWARD, where it names one, comes first."""
    _, state = final_state("linear-relu")
    op, other = [n for n, i in state.nodes.items() if not i.leaf][:2]
    leaf = next(n for n, i in state.nodes.items() if i.leaf)
    state.node_meta[op] = {"module": "blocks.0.attn", "module_type": "Attention"}
    state.node_meta[leaf] = {"tensor": "fc.weight", "module": "fc", "module_type": "Linear"}
    state.node_meta[other] = {"module": ["not", "a", "string"], "tensor": 7}
    labels = graph_draw.forward_labels(state)
    assert labels == {op: "blocks.0.attn: Attention", leaf: "fc.weight"}
    seq = state.nodes[op].seq
    assert graph_draw.forward_labels(state, {seq: ("Mine",)})[op] == "Mine"


def test_a_cut_name_ends_with_an_ellipsis_and_details_have_it_whole() -> None:
    _, state = final_state("linear-relu")
    long = "ScaledDotProductEfficientAttentionBackward0"
    n = next(iter(state.nodes))
    state.nodes[n] = state.nodes[n]._replace(name=long)
    b = graph_draw.draw(state)
    y, x, _ = b.where[n]
    top = b.lines[y].plain[x:x + graph_draw.BOX_WIDTH]
    assert top.endswith("…╮") and long not in top
    assert long[:10] in top
    assert render.node_details(state, n).plain.startswith(f"{long} #{n}")
    # a name that fits is never cut; a title too long for its frame is
    short = graph_draw.draw(graph_state_with_name(state, n, "AddBackward0"))
    assert "…" not in short.lines[short.where[n][0]].plain
    gt = state.graph_tasks[1]
    state.graph_tasks[1] = gt._replace(owner="a thread with a name too long " * 3)
    cut = graph_draw.draw(state, fill=80).lines[0].plain
    assert len(cut) == 80 and cut.endswith("… ╮") and "GraphTask 1 · a thread" in cut
    assert ("a thread with a name too long " * 3).strip() not in cut
    assert graph_draw.ellipsize("abcdef", 4) == "abc…" and graph_draw.ellipsize("abc", 4) == "abc"


def test_boxes_show_whole_names_wider_where_the_pane_has_room_or_on_focus() -> None:
    _, state = final_state("reentrant-deep")
    node = next(n for n, i in state.nodes.items() if i.name == "ReentrantBackward")

    def top(b: graph_draw.Block, n: int) -> str:
        y, x, _ = b.where[n]
        return b.lines[y].plain[x:].split("╮")[0]

    assert "ReentrantBackw…" in top(graph_draw.draw(state), node)  # 20 wide: cut
    wide = graph_draw.draw(state, fill=120)  # room: every box as wide as the longest name
    assert "ReentrantBackward " in top(wide, node) and "…" not in top(wide, node)
    assert {len(top(wide, n)) for n in state.nodes} == {len("╭ · ReentrantBackward ")}
    focused = graph_draw.draw(state, node)  # no room: the focused box drops its badge
    assert top(focused, node) == "╭ ReentrantBackward"
    custom = graph_state_with_name(state, node, "MyVeryOwnCustomBackward")
    assert "MyVeryOwnCustomBackward " in top(graph_draw.draw(custom, fill=120), node)
    # a layer too wide for the pane at that width keeps BOX_WIDTH (and the pane scrolls)
    tight = graph_draw.draw(custom, fill=30)
    assert len(top(tight, node)) == graph_draw.BOX_WIDTH - 1


def graph_state_with_name(state: EngineState, n: int, name: str) -> EngineState:
    s = state.copy()
    s.nodes[n] = s.nodes[n]._replace(name=name)
    return s


# --- scrolling ------------------------------------------------------------------------------
def test_a_wide_graph_scrolls_sideways_and_a_tall_one_down() -> None:
    app = AutogradApp("mlp")  # five boxes in a layer, more layers than the pane has lines

    async def script(pilot: Pilot[Any]) -> None:
        await step_until(pilot, lambda a: bool(state_of(a).nodes))
        view = app.debugger.query_one("#graph", TextView)
        region = view.scrollable_content_region
        assert view.virtual_size.width > region.width  # wider than the pane ...
        assert view.virtual_size.height > region.height
        assert view.show_horizontal_scrollbar and view.show_vertical_scrollbar  # ... scrolls
        assert max(line.cell_len for line in view._lines) == view.virtual_size.width
        before = view.render_line(1).text
        view.scroll_to(x=10, y=4, animate=False)
        await pilot.pause()
        assert view.scroll_offset == (10, 4)
        assert view.render_line(0).text == view._lines[4].plain[10:10 + region.width]
        assert view.render_line(1).text != before
        await pilot.press("shift+left", "shift+up")
        await pilot.pause()
        assert view.scroll_offset.x < 10 and view.scroll_offset.y < 4

    run(app, script)


# --- colours ---------------------------------------------------------------------------------
@pytest.mark.parametrize("theme", ["textual-dark", "textual-light"])
def test_the_graph_colours_are_theme_variables(theme: str) -> None:
    app = AutogradApp("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        await step_until(pilot, lambda a: bool(state_of(a).nodes))
        app.theme = theme
        await pilot.pause()
        await pilot.pause()
        pane = app.debugger.query_one(GraphPane)
        variables = app.theme_variables
        assert set(VARIABLES) <= set(variables)  # the app defines its own
        assert pane.palette == Palette.of(variables, app.current_theme)
        done = pane.palette.style("done")
        assert variables["graph-done"].lower() in done.lower()
        # the boxes are drawn with them: the root's box is in the style of its state
        view = app.debugger.query_one("#graph", TextView)
        state = state_of(app)
        st = render.node_status(state, next(iter(state.nodes)))[0]
        spans = {str(s.style) for line in view._lines for s in line.spans}
        assert any(pane.palette.style(st) in s for s in spans)

    run(app, script)


def test_a_theme_that_sets_a_variable_recolours_the_graph() -> None:
    app = AutogradApp("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        await step_until(pilot, lambda a: bool(state_of(a).nodes))
        base = app.current_theme
        app.register_theme(Theme(name="class", primary=base.primary, dark=base.dark,
                                 variables={"graph-not-reached": "#ff00ff"}))
        app.theme = "class"
        await pilot.pause()
        await pilot.pause()
        view = app.debugger.query_one("#graph", TextView)
        assert any("#ff00ff" in str(s.style).lower() for line in view._lines
                   for s in line.spans)

    run(app, script)


def test_defaults_are_readable_on_the_themes_background() -> None:
    from textual.color import Color
    from textual.theme import BUILTIN_THEMES

    for name in ("textual-dark", "textual-light"):
        theme = BUILTIN_THEMES[name]
        bg = Color.parse(theme.to_color_system().generate()["background"])
        for var, value in theme_defaults(theme).items():
            # WCAG contrast of at least 3 against the background, for every state
            assert contrast(Color.parse(value), bg) >= 3.0, (name, var, value)


def contrast(a: Any, b: Any) -> float:
    def lum(c: Any) -> float:
        def ch(v: int) -> float:
            x = v / 255
            return x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4
        return 0.2126 * ch(c.r) + 0.7152 * ch(c.g) + 0.0722 * ch(c.b)
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


# --- light and dark at 120x40 -------------------------------------------------------------------
@pytest.mark.parametrize("theme", ["textual-dark", "textual-light"])
def test_snapshot_reentrant_groups_in_theme(snap_compare: Any, theme: str) -> None:
    app = AutogradApp("reentrant")

    async def run_before(pilot: Pilot[Any]) -> None:
        app.theme = theme
        await step_until(pilot, lambda a: last_graph_task(a) == 2 and
                         state_of(a).node_states.get(9) is not None and
                         state_of(a).node_states[9].state == "done")
        await finish(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


@pytest.mark.parametrize("theme", ["textual-dark", "textual-light"])
def test_snapshot_linear_relu_in_theme(snap_compare: Any, theme: str) -> None:
    app = AutogradApp("linear-relu")

    async def run_before(pilot: Pilot[Any]) -> None:
        app.theme = theme
        await step_until(pilot, lambda a: last_kind_is(a, "not_ready_insert"))
        await finish(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def last_kind_is(app: AutogradApp, kind: str) -> bool:
    s = app.debugger.session
    assert s is not None
    return s.count() > 0 and s.event(s.count() - 1).kind == kind
