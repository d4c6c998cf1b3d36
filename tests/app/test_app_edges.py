"""The rough edges a first lesson hit (issue 30), each through Textual's Pilot: the scenario
picker opens the lesson named, one description of an event live or gone back to, a
replay shows no engine keys, notifications leave the timeline's status visible, the
details stay fresh at the end of play, keyboard ways to pause a thread and to add a
breakpoint, and a header cut with "…"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pilot import press, run_app, settle, shown, until
from rich.console import Console
from test_app import App, thread_rows
from textual.pilot import Pilot
from textual.widgets import Checkbox, Input, OptionList, Static
from textual.widgets._toast import Toast

from autograd_tui import scenarios
from autograd_tui.app import render
from autograd_tui.app.debugger.keys import BINDINGS, engine_only
from autograd_tui.app.graph_draw import NO_GRAPH
from autograd_tui.app.palette import commands
from autograd_tui.app.playback import SPEEDS
from autograd_tui.app.screens import HELP, BreakpointsScreen, ScenarioScreen
from autograd_tui.app.screens.scenario_picker import NAME_WIDTH, _row, matching
from autograd_tui.app.widgets import GraphPane, Header, KeyFooter, TextView, ThreadsPane, Timeline
from autograd_tui.app.widgets.threads_pane import ThreadsTable
from autograd_tui.history import recordings as trace
from autograd_tui.session.run import Run

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rec") / "run.jsonl"
    with Run(scenarios.load("linear-relu")) as run:
        assert run.run().status == "finished"
        run.save(path)
    return path


def _items() -> list[tuple[str, str]]:
    return [(sc.name, sc.summary) for sc in scenarios.builtins()]


# --- the scenario picker ------------------------------------------------------------------------
def test_a_name_match_ranks_before_a_summary_match() -> None:
    items = _items()
    for text in ("multi", "chain", "dead"):
        got = [name for name, _ in matching(items, text)]
        named = [n for n, _ in items if text in n]
        assert named and got[:len(named)] == sorted(
            named, key=lambda n: (n != text, not n.startswith(text))), (text, got)
    # a summary-only match still comes, after the names
    assert any(text not in n for n, _ in matching(items, "multi") for text in ["multi"])


def test_enter_opens_the_lesson_typed() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "s")
        assert isinstance(app.screen, ScenarioScreen)
        await pilot.press(*"multi")
        await settle(pilot)
        first = app.screen.query_one(OptionList).get_option_at_index(0).id
        assert first is not None and first.startswith("multi")
        await press(pilot, "enter")
        s = app.debugger.session
        assert s is not None and s.scenario_name == first

    run_app(app, script)


def test_a_wrapped_summary_stays_under_the_summary_column() -> None:
    name, summary = max(_items(), key=lambda it: len(it[1]))
    console = Console(width=NAME_WIDTH + 40, record=True)
    console.print(_row(name, summary))
    lines = console.export_text().rstrip("\n").split("\n")
    assert len(lines) > 1, lines  # the summary wraps at this width
    assert lines[0].startswith(name)
    for line in lines[1:]:
        # nothing under the name column
        assert line[:max(NAME_WIDTH, len(name)) + 1].strip() == "", line


# --- one description of an event ----------------------------------------------------------------
def _rows(app: App) -> list[tuple[str, ...]]:
    return [tuple(cell[0] for cell in row) for row in thread_rows(app)]


def test_the_threads_pane_says_the_same_live_and_after_a_seek() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        live: dict[int, list[tuple[str, ...]]] = {}
        s = app.debugger.session
        assert s is not None
        while not s.finished and shown(app)[1] < 40:
            await press(pilot, "full_stop")
            live[shown(app)[0]] = _rows(app)
        newest = shown(app)[1]
        for k in sorted(live, reverse=True)[1:]:  # walked back to, one at a time
            await press(pilot, "left")
            assert shown(app)[0] == k < newest
            assert _rows(app) == live[k], k
        await press(pilot, "end")
        await press(pilot, "g", *str(min(live)), "enter")  # g k: as live at k
        assert shown(app)[0] == min(live) and _rows(app) == live[min(live)]

    run_app(app, script)


# --- a replay: no engine keys -------------------------------------------------------------------
def test_a_replay_shows_no_engine_keys_and_says_so_when_one_is_pressed(recording: Path) -> None:
    app = App(recording=trace.load(recording))

    async def script(pilot: Pilot[Any]) -> None:
        footer = app.debugger.query_one(KeyFooter)
        await until(pilot, lambda: bool(footer.shown))
        assert not [a for a in footer.shown if engine_only(a)], footer.shown
        assert "jump" in footer.shown or "step" in footer.shown
        assert not [c for c in commands(app.debugger) if engine_only(c.action)]
        assert "A replay" in HELP
        await press(pilot, "home")
        graph = app.debugger.query_one("#graph")
        text = "\n".join(graph.render_line(y).text for y in range(graph.size.height))
        assert NO_GRAPH in text and "step the engine" not in text
        await press(pilot, "right", "right")
        before = shown(app)
        for key in ("r", "c", "p", "P", "1"):
            app.notes.clear()
            await press(pilot, key)
            assert shown(app) == before, key  # r no longer jumps to the end
            assert app.said("replay:"), (key, app.notes)

    run_app(app, script)


def test_a_live_run_has_the_engine_keys() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        footer = app.debugger.query_one(KeyFooter)
        await until(pilot, lambda: bool(footer.shown))
        assert "continue" in footer.shown and not app.debugger.hidden_actions
        want = {b.action for b in BINDINGS if engine_only(b.action) and b.description}
        assert want <= {c.action for c in commands(app.debugger)}

    run_app(app, script)


def test_notifications_leave_the_timelines_status_visible() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "space")  # to the end: "completed"
        app.notify("a long message " * 8, timeout=30)
        await until(pilot, lambda: bool(app.screen.query(Toast)))
        await pilot.pause(0.2)
        timeline = app.debugger.query_one(Timeline)
        status = app.debugger.session.status if app.debugger.session else ""
        assert status and status in timeline.render_line(0).text
        for toast in app.screen.query(Toast):
            assert toast.region.bottom <= timeline.region.y, (toast.region, timeline.region)

    run_app(app, script)


def test_the_details_are_fresh_at_the_end_of_play(recording: Path) -> None:
    app = App(recording=trace.load(recording))

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        # the last event that touched a node, then one that touches none after it
        last = max(k for k in range(1, s.count() + 1) if s.event(k - 1).node is not None)
        assert last < s.count()
        node = s.event(last - 1).node
        await press(pilot, "g", *str(last), "enter", "d")
        await press(pilot, "home")
        for _ in range(SPEEDS.index(SPEEDS[-1])):
            await pilot.press("plus")
        await press(pilot, "space")
        await until(pilot, lambda: shown(app)[0] == s.count() and not app.debugger
                    .playback.playing)
        await settle(pilot)
        details = app.debugger.query_one("#details", TextView)
        state = s.state_at(s.count())
        pane = app.debugger.query_one(GraphPane)
        want = render.node_details(state, node, forward=pane.forward).plain
        assert node is not None and want.splitlines()[0] in str(details.content)
        assert str(details.content).strip() == want.strip()

    run_app(app, script)


# --- the keyboard -------------------------------------------------------------------------------
def test_T_focuses_the_threads_and_P_then_k_pauses_thread_k() -> None:
    app = App("multi-device")

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        while len(_rows(app)) < 2 and not s.finished:
            await press(pilot, "full_stop")
        names = [r[1] for r in _rows(app)]
        assert len(names) >= 2, names
        await press(pilot, "T")
        assert isinstance(app.focused, ThreadsTable)
        assert app.focused is app.debugger.query_one(ThreadsPane).table
        await press(pilot, "escape")
        before = shown(app)
        await press(pilot, "P", "2")
        assert shown(app) == before  # paused, not stepped
        assert s.thread_states()[names[1]].user_paused
        assert "paused" in _rows(app)[1][4]
        await press(pilot, "P", "2")
        assert not s.thread_states()[names[1]].user_paused
        await press(pilot, "P", "9")
        assert app.said("there is no thread 9")
        assert "`P` then `1`-`9`" in HELP

    run_app(app, script)


def test_the_breakpoint_dialog_shows_its_label_whole_and_adds_from_the_keyboard() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "b")
        dialog = app.screen
        assert isinstance(dialog, BreakpointsScreen)
        box = dialog.query_one("#bp-nonfinite", Checkbox)
        label = str(box.label)
        assert "NaN or Inf" in label
        assert box.region.width >= len(label) + 4, (box.region, label)  # the box, a gap
        hint = str(dialog.query_one("#bp-hint", Static).content)
        assert "enter" in hint and "tab" in hint
        dialog.query_one("#bp-kind", Input).focus()
        await pilot.press(*"push", "enter")
        await settle(pilot)
        assert len(dialog.existing) == 1 and dialog.existing[0].kind == "push"
        assert "push" in str(dialog.query_one("#bp-list", Static).content)
        await press(pilot, "escape")
        s = app.debugger.session
        assert s is not None and [b.kind for b in s.breakpoints] == ["push"]

    run_app(app, script)


# --- the header ---------------------------------------------------------------------------------
@pytest.mark.parametrize("width", [80, 120])
def test_a_cut_header_ends_with_an_ellipsis(width: int) -> None:
    app = App("deadlock-wait-on-device")

    async def script(pilot: Pilot[Any]) -> None:
        header = app.debugger.query_one(Header)
        line = header.render_line(0).text.rstrip()
        whole = header.content.plain
        assert len(whole) > 80  # cut at 80 columns at least
        if len(whole) > width:
            assert line.endswith("…") and len(line) <= width, line
            assert whole.startswith(line[:-1].strip()), (line, whole)
        else:
            assert line.strip() == whole
        assert ("cuda:" in whole) == ("cuda" in str(app.debugger.session.devices or ""))

    run_app(app, script, size=(width, 30))
