"""The Textual app, key by key, through Textual's Pilot (headless, 120x40).

Every binding is driven the way a person would: a key press (and, in dialogs,
clicks and typing), then a wait until the engine's worker is done and the app
has drawn the newest event (the title's ``event i/n``).  What the panes show is
compared with ``autograd_tui.app.render`` of ``Session.state_at(i)``: the panes are
pure functions of the state at the shown index.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pilot import busy, last_kind, press, run_app, settle, shown, until
from rich.text import Text
from textual import events
from textual.pilot import Pilot
from textual.widgets import Input, Label, Markdown, OptionList, Static

import autograd_tui.app
from autograd_tui import scenarios
from autograd_tui.app import AutogradApp, render
from autograd_tui.app.screens import HELP, BreakpointsScreen, GotoScreen, ScenarioScreen, TextScreen
from autograd_tui.app.widgets import LineTable, Row, TextLine, TextView, ThreadsTable, cells
from autograd_tui.app.widgets.graph_pane import LAZY_LIST_ABOVE, GraphPane, list_cells
from autograd_tui.history import recordings as trace
from autograd_tui.session.run import Run
from autograd_tui.words import KIND_STYLE

pytestmark = pytest.mark.timeout(120)


class App(AutogradApp):
    """The app, keeping every notification it shows (title, message, severity)."""

    CSS_PATH = str(Path(autograd_tui.app.__file__).with_name("app.tcss"))  # not tests/

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.notes: list[tuple[str, str, str]] = []

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        self.notes.append((title, str(message), str(severity)))
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def said(self, fragment: str) -> bool:
        return any(fragment in f"{title} {message}" for title, message, _ in self.notes)


# --- helpers ------------------------------------------------------------------------------------
async def run_to_end(app: AutogradApp, pilot: Pilot[Any]) -> tuple[Any, int]:
    """Run the opened scenario to its end (space); its session and event count."""
    s = app.debugger.session
    assert s is not None
    await press(pilot, "space")
    return s, s.count()


def text_of(app: AutogradApp, selector: str) -> str:
    content = app.debugger.query_one(selector, Static | TextView | TextLine).content
    return content.plain if isinstance(content, Text) else str(content)


def graph_matches(app: AutogradApp, i: int) -> None:
    """The graph and side panes at cursor ``i`` are the renders of state_at(i)."""
    assert app.debugger.session is not None
    state = app.debugger.session.state_at(i)
    last = state.last_event
    graph = app.debugger.query_one("#graph", TextView).content
    drawn = app.debugger.query_one(GraphPane).drawing(state,
                                                      last.node if last is not None else None)
    assert graph == Text("\n").join(drawn.lines)
    assert app.debugger.query_one("#queues", Static).content == render.queues_text(state)
    assert app.debugger.query_one("#not-ready", Static).content == render.not_ready_text(state)
    assert app.debugger.query_one("#graph-tasks", Static).content == render.graph_tasks_text(state)


def thread_rows(app: AutogradApp) -> list[Row]:
    """The threads pane's rows: ``(#, thread, node, depth, state)``, each ``(text, style)``."""
    table = app.debugger.query_one("#threads", ThreadsTable)
    return [table.row(i) for i in range(table.row_count)]


def screen_lines(table: LineTable) -> list[str]:
    """What a table shows, line by line (as the terminal would)."""
    return [table.render_line(y).text
            for y in range(table.scrollable_content_region.height)]


def engine_threads() -> list[str]:
    return [t.name for t in threading.enumerate()
            if t.name.startswith("autograd ") and t.is_alive()]


@pytest.fixture
def deadlock_scenario() -> str:
    """The built-in scenario that deadlocks (engine option reentrant="block")."""
    return "deadlock-reentrant-block"


# --- stepping -----------------------------------------------------------------------------------
def test_n_steps_one_event_at_a_time() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        assert app.debugger.session is not None and app.debugger.session.count() == 0
        assert shown(app) == (0, 0)
        assert "No graph yet" in text_of(app, "#graph")
        log = app.debugger.query_one("#events", LineTable)
        for k in range(1, 16):
            await press(pilot, "full_stop")
            assert app.debugger.session.count() == k
            assert shown(app) == (k, k)
            assert log.row_count == k
            assert log.cursor_row == k - 1  # the log follows the newest event
        graph_matches(app, 15)
        assert app.debugger.query_one("#graph-pane").border_title.startswith("graph: 11 nodes")
        assert app.debugger.sub_title.startswith("linear-relu | live | event 15/15")

    run_app(app, script)


def test_number_keys_step_only_the_chosen_thread() -> None:
    app = App("multi-device")

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        while len(thread_rows(app)) < 2:  # until cuda:1 starts
            await press(pilot, "full_stop")
            assert s.count() < 60
        names = [r[1][0] for r in thread_rows(app)]
        assert names[:2] == ["cpu (owner)", "cuda:1"]
        for key, name in (("2", "cuda:1"), ("2", "cuda:1"), ("2", "cuda:1"),
                          ("1", "cpu (owner)"), ("2", "cuda:1")):
            before = s.count()
            await press(pilot, key)
            new = s.events(before)
            assert new, f"{key} made no event"
            assert {e.thread for e in new} == {name}, [(e.kind, e.thread) for e in new]
        await press(pilot, "9")
        assert app.said("there is no thread 9")

    run_app(app, script)


def test_p_pauses_the_selected_thread_and_space_stops_at_it() -> None:
    app = App("multi-device")

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        while len(thread_rows(app)) < 2 or s.count() < 28:
            await press(pilot, "full_stop")
        table = app.debugger.query_one("#threads", ThreadsTable)
        y = next(y for y, line in enumerate(screen_lines(table)) if "cuda:1" in line)
        await pilot.click("#threads", offset=(4, y))  # cuda:1's row
        await settle(pilot)
        assert table.cursor_row == 1
        await press(pilot, "p")
        assert app.said("cuda:1 paused")
        assert s.thread_states()["cuda:1"].user_paused
        assert "paused" in thread_rows(app)[1][4][0]
        await press(pilot, "space")
        # cpu (owner) ran until it needed cuda:1: the run stops with the "paused" report
        assert not s.finished
        assert s.report is not None and s.report.kind == "paused"
        banner = text_of(app, "#banner")
        assert app.debugger.query_one("#banner").has_class("shown")
        assert "you paused cuda:1" in banner and banner == s.report.explanation
        assert app.said("paused Not a deadlock")
        await press(pilot, "p")  # resume
        assert app.said("cuda:1 resumed")
        assert not app.debugger.query_one("#banner").has_class("shown")
        await press(pilot, "space")
        assert s.status == "completed"

    run_app(app, script)


def test_the_threads_pane_shows_long_states_whole() -> None:
    # multi-device: a thread waits on "lock GraphTask 1 mutex (held by cuda:1)", longer
    # than the pane at 120 columns: it wraps under the thread's row, never cut off
    app = App("multi-device")

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        table = app.debugger.query_one("#threads", ThreadsTable)
        while not any(len(r[4][0]) > table.size.width - ThreadsTable.INDENT
                      for r in thread_rows(app)):
            await press(pilot, "full_stop")
            assert not s.finished, "no long state in the whole run"
        lines = screen_lines(table)
        shown_text = " ".join(line.strip() for line in lines)
        for row in thread_rows(app):
            assert row[4][0] in shown_text, (row, lines)
        assert any("waiting on lock" in line for line in lines)
        assert not table.show_horizontal_scrollbar

    run_app(app, script)


def test_space_runs_to_the_end() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        await press(pilot, "space")
        assert s.status == "completed"
        assert last_kind(app) == "completion"
        assert shown(app) == (s.count(), s.count())
        tasks = text_of(app, "#graph-tasks")
        assert "GT1" in tasks and "completed" in tasks
        # the leaf gradients, by AccumulateGrad node
        grads = s.state_at(s.count()).leaf_grads
        assert len(grads) == 5 and "leaf .grad" in tasks
        assert "#9=[0.35]" in tasks  # input.grad = w1 * (1 + w2) = 0.5 * 0.7
        badges = re.findall(r"╭ (\S) \w+", text_of(app, "#graph"))
        assert len(badges) == 11 and set(badges) == {"✓"}  # every node done
        await press(pilot, "space")  # after the end: a hint, nothing moves
        assert app.said("the run has ended (completed)")

    run_app(app, script)


def test_space_again_pauses_a_run() -> None:
    # 280,000 events: seconds of running, even with no hand-off per event (run_until)
    app = App("chain", params={"n": 20000})

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        # Keys posted as the terminal driver does (pilot.press would wait for the process
        # to look idle, which it does not while the engine runs).
        app.post_message(events.Key("space", " "))
        # The forward pass (20,000 ops) runs before the first event: wait for the run to
        # be under way, however slow the machine is today.
        for _ in range(200):
            await asyncio.sleep(0.05)
            if s.count() > 0:
                break
        assert busy(app) and s.count() > 0
        app.post_message(events.Key("space", " "))
        await settle(pilot)
        stopped = s.count()
        assert 0 < stopped and not s.finished and s.status == "ready"
        await pilot.pause(0.3)
        assert s.count() == stopped  # it stays paused
        assert shown(app) == (stopped, stopped)
        await press(pilot, "full_stop")
        assert s.count() == stopped + 1

    run_app(app, script)


def test_c_stops_at_a_breakpoint_set_in_the_dialog() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        await press(pilot, "b")
        assert isinstance(app.screen, BreakpointsScreen)
        await pilot.click("#bp-kind")
        await pilot.press(*"not_ready_insert")
        assert app.screen.query_one("#bp-kind", Input).value == "not_ready_insert"
        await pilot.click("#bp-add")
        await pilot.pause()
        listing = app.screen.query_one("#bp-list", Static).content
        assert "1. kind=not_ready_insert" in str(listing)
        await pilot.click("#bp-done")
        await settle(pilot)
        assert not isinstance(app.screen, BreakpointsScreen)
        assert [b.describe() for b in s.breakpoints] == ["kind=not_ready_insert"]
        await press(pilot, "c")
        assert last_kind(app) == "not_ready_insert"
        assert app.said("breakpoint: not_ready_insert")
        # Linear1 (LinearBackward0#6, the lower sequence number) waits in not_ready
        assert "LinearBackward0#6" in text_of(app, "#not-ready")
        await press(pilot, "c")  # the only one: c now runs to the end
        assert s.status == "completed"

    run_app(app, script)


def test_c_stops_at_the_first_non_finite_gradient() -> None:
    """The dialog's check box: c stops at the node that made the NaN and says where it goes."""
    app = App("anomaly-nan")

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        await press(pilot, "b")
        app.screen.query_one("#bp-nonfinite").value = True
        await pilot.click("#bp-add")
        await pilot.pause()
        assert "1. first non-finite gradient" in str(app.screen.query_one("#bp-list",
                                                                          Static).content)
        await pilot.click("#bp-done")
        await settle(pilot)
        await press(pilot, "c")
        assert last_kind(app) == "node_end"
        assert app.said("first non-finite gradient: PowBackward0#3 output 0 holds NaN")
        assert app.said("flows to input 0 of AccumulateGrad#4")
        assert app.said("its incoming gradients were finite, so this node made it")

    run_app(app, script)


def test_breakpoint_dialog_rejects_an_unknown_kind() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "b")
        app.screen.query_one("#bp-kind", Input).value = "no_such_kind"
        await pilot.click("#bp-add")
        await pilot.pause()
        assert app.said("unknown event kind 'no_such_kind'")
        await press(pilot, "escape")
        assert app.debugger.session is not None and app.debugger.session.breakpoints == []

    run_app(app, script)


# --- history ------------------------------------------------------------------------------------
def test_left_right_home_end_walk_the_history() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        s, n = await run_to_end(app, pilot)
        graph_matches(app, n)
        for i in range(n - 1, n - 8, -1):
            await press(pilot, "left")
            assert shown(app) == (i, n)
            graph_matches(app, i)
            assert app.debugger.query_one("#events", LineTable).cursor_row == i - 1
        await press(pilot, "right")
        assert shown(app) == (n - 6, n)
        graph_matches(app, n - 6)
        await press(pilot, "home")
        assert shown(app) == (0, n)
        assert "No graph yet" in text_of(app, "#graph")
        await press(pilot, "left")  # nothing before the first event
        assert shown(app) == (0, n)
        for i in range(1, 4):
            await press(pilot, "right")
            assert shown(app) == (i, n)
            graph_matches(app, i)
        await press(pilot, "end")
        assert shown(app) == (n, n)
        graph_matches(app, n)

    run_app(app, script)


def test_n_after_stepping_back_moves_the_engine_and_jumps_to_the_newest() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, *["full_stop"] * 10, "left", "left", "left")
        assert shown(app) == (7, 10)
        await press(pilot, "full_stop")
        assert shown(app) == (11, 11)

    run_app(app, script)


def test_g_goes_to_an_index() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        s, n = await run_to_end(app, pilot)
        await press(pilot, "g")
        assert isinstance(app.screen, GotoScreen)
        await pilot.press(*"999", "enter")
        await pilot.pause()
        assert app.said(f"999 is outside 0..{n}")
        assert isinstance(app.screen, GotoScreen)
        inp = app.screen.query_one("#goto", Input)
        inp.value = ""
        await pilot.press(*"25", "enter")
        await settle(pilot)
        assert not isinstance(app.screen, GotoScreen)
        assert shown(app) == (25, n)
        graph_matches(app, 25)
        await press(pilot, "g", "escape")  # cancel: stays
        assert shown(app) == (25, n)

    run_app(app, script)


def test_selecting_an_event_in_the_log_shows_that_moment() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        await press(pilot, *["full_stop"] * 20)
        log = app.debugger.query_one("#events", LineTable)
        lines = screen_lines(log)
        assert lines[0].split()[:2] == ["seq", "event"]
        assert lines[-1].split()[0] == "20"  # the newest event, at the bottom
        # click: the row of event 16 (the log is 10 lines with its header: events 11..20)
        y = next(y for y, line in enumerate(lines) if line.split()[:1] == ["16"])
        await pilot.click("#events", offset=(6, y + 1))  # + 1: the pane's border
        await settle(pilot)
        assert shown(app) == (16, 20)  # at event 16: the one number, in the log and title
        graph_matches(app, 16)
        assert log.cursor_row == 15
        # keyboard: with the focus on the log, up moves the cursor, enter shows that event
        log.focus()
        await press(pilot, "up", "up")
        assert shown(app) == (16, 20) and log.cursor_row == 13
        await press(pilot, "enter")
        assert shown(app) == (14, 20)
        graph_matches(app, 14)
        await press(pilot, "left")  # still the history's keys, not a sideways scroll
        assert shown(app) == (13, 20) and log.cursor_row == 12
        await press(pilot, "end")
        assert shown(app) == (20, 20) and log.cursor_row == 19

    run_app(app, script)


def test_the_event_log_keeps_every_event_and_scrolls_to_the_shown_one() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        s, n = await run_to_end(app, pilot)
        log = app.debugger.query_one("#events", LineTable)
        assert log.row_count == n
        names = {i: info.name for i, info in s.state_at(n).nodes.items()}
        from autograd_tui.words import format_event

        for i in (0, n // 2, n - 1):  # each row: seq, then the readable line
            seq, text = log.row(i)
            assert seq[0] == str(i + 1) and text[0] == format_event(s.event(i), names)[6:]
            assert text[1] == KIND_STYLE.get(s.event(i).kind, "")
        await press(pilot, "home", "right")
        assert screen_lines(log)[1].split()[0] == "1"  # scrolled back to the first event
        await press(pilot, "end")
        assert screen_lines(log)[-1].split()[0] == str(n)

    run_app(app, script)


# --- session ------------------------------------------------------------------------------------
def test_r_restarts() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, *["full_stop"] * 20)
        old = app.debugger.session
        assert old is not None and old.count() == 20
        await press(pilot, "r")
        s = app.debugger.session
        assert s is not None and s is not old
        assert s.count() < 3 and shown(app) == (s.count(), s.count())
        assert app.debugger.query_one("#events", LineTable).row_count == s.count()
        await press(pilot, "full_stop")
        assert s.count() == 1 and s.event(0).kind == "graph_task_created"

    run_app(app, script)


def test_s_picks_another_scenario() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "full_stop", "full_stop", "s")
        assert isinstance(app.screen, ScenarioScreen)
        options = app.screen.query_one(OptionList)
        ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
        assert ids[0] == "linear-relu" and "multi-device" in ids
        options.focus()
        options.highlighted = ids.index("multi-device")
        await pilot.press("enter")
        await settle(pilot)
        assert not isinstance(app.screen, ScenarioScreen)
        assert app.debugger.session is not None
        assert app.debugger.session.scenario_name == "multi-device"
        assert app.debugger.sub_title.startswith("multi-device | live | event 0/0")
        assert app.debugger.session.count() == 0
        log = app.debugger.query_one("#events", LineTable)
        assert log.row_count == 0  # linear-relu's events are gone
        await press(pilot, "full_stop")
        assert app.debugger.session.count() == 1
        assert log.row_count == 1 and log.row(0)[1][0].startswith("cpu (owner)")

    run_app(app, script)


def test_t_shows_the_teaching_notes() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "t")
        assert isinstance(app.screen, TextScreen)
        assert str(app.screen.query_one(".dialog-title", Label).content) == \
            "teaching notes: linear-relu"
        notes = app.screen.query_one(Markdown).source
        assert notes == scenarios.load("linear-relu").notes
        assert "not_ready" in notes
        await press(pilot, "escape")
        assert not isinstance(app.screen, TextScreen)

    run_app(app, script)


def test_question_mark_shows_help_with_every_key() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "question_mark")
        assert isinstance(app.screen, TextScreen)
        assert str(app.screen.query_one(".dialog-title", Label).content) == "help"
        source = app.screen.query_one(Markdown).source
        assert source == HELP
        for key in ("`space`", "`n`", "`1`-`9`", "`p`", "`c`", "`b`", "`left`", "`right`",
                    "`home`", "`end`", "`g`", "`v`", "`d`", "`shift+arrows`", "`r`", "`s`",
                    "`e`", "`t`", "`?`", "`q`"):
            assert key in source, key
        await press(pilot, "question_mark")  # ? closes it again
        assert not isinstance(app.screen, TextScreen)

    run_app(app, script)


def test_e_exports_the_shown_state(tmp_path: Path) -> None:
    app = App("linear-relu")
    out = tmp_path / "state.dot"
    available = importlib.util.find_spec("autograd_tui.export") is not None

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, *["full_stop"] * 12, "e")
        inp = app.screen.query_one("#export-path", Input)
        assert inp.value == "autograd-linear-relu-0012.svg"
        inp.value = str(out)
        await pilot.press("enter")
        await settle(pilot)
        if available:
            assert out.exists(), app.notes
            text = out.read_text()
            assert text.startswith("digraph") or "digraph" in text[:200]
            assert "SumBackward0" in text
            assert app.said(f"wrote {out}")
        else:
            assert not out.exists()
            assert app.said("export is not available")

    run_app(app, script)


def test_v_and_d_switch_views() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        await press(pilot, *["full_stop"] * 12)
        pane = app.debugger.query_one("#graph-pane")
        assert not pane.has_class("list")
        await press(pilot, "v")
        assert pane.has_class("list")
        nodes = app.debugger.query_one("#node-list", LineTable)
        assert nodes.row_count == 11
        assert [c[0] for c in nodes.row(0)][:2] == ["1", "✓ SumBackward0"]
        await press(pilot, "full_stop")  # the list follows the engine
        rows = render.list_rows(s.state_at(s.count()))
        assert [tuple(c[0] for c in nodes.row(i)) for i in range(11)] == rows
        await press(pilot, "v")
        assert not pane.has_class("list")
        await press(pilot, "d")
        details = app.debugger.query_one("#details", TextView)
        assert details.has_class("shown")
        state = s.state_at(s.count())
        node = state.last_event.node
        assert details.content.plain == render.node_details(state, node,
                                                            forward=s.forward).plain
        await press(pilot, "d")
        assert not details.has_class("shown")

    run_app(app, script)


def test_shift_arrows_pan_a_graph_wider_than_its_pane() -> None:
    app = App("mlp")  # 5 boxes in a layer

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        graph = app.debugger.query_one("#graph", TextView)
        while graph.virtual_size.width <= graph.scrollable_content_region.width:
            await press(pilot, "full_stop")  # until a layer is wider than the pane
            assert not s.finished
        first = graph.render_line(0).text
        await press(pilot, "shift+right")
        assert graph.scroll_offset.x == 8
        assert graph.render_line(0).text.startswith(first[8:20])  # the lines move left
        await press(pilot, "shift+left")
        assert graph.scroll_offset.x == 0 and graph.render_line(0).text == first
        graph_matches(app, s.count())  # panning changes what is shown, not the graph

    run_app(app, script)


def test_selecting_a_node_in_the_list_view_shows_its_details() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        await press(pilot, *["full_stop"] * 12, "v")
        nodes = app.debugger.query_one("#node-list", LineTable)
        lines = screen_lines(nodes)
        assert lines[0].split() == ["id", "node", "device", "state", "deps", "seq", "where"]
        y = next(y for y, line in enumerate(lines) if "ReluBackward0" in line)
        await pilot.click("#node-list", offset=(2, y))
        await settle(pilot)
        details = app.debugger.query_one("#details", TextView)
        assert details.has_class("shown")
        state = s.state_at(s.count())
        # ReluBackward0 is #4
        assert details.content.plain == render.node_details(state, 4, forward=s.forward).plain
        assert nodes.key(nodes.cursor_row) == "4"
        # keyboard: down then enter selects the next row's node
        nodes.focus()
        await press(pilot, "down", "enter")
        key = int(nodes.key(nodes.cursor_row))
        assert key != 4 and details.content.plain == render.node_details(
            state, key, forward=s.forward).plain

    run_app(app, script)


def test_keys_do_nothing_to_the_engine_while_a_dialog_is_open() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        await press(pilot, "full_stop", "full_stop", "full_stop")
        for opener, dialog in (("question_mark", TextScreen), ("t", TextScreen),
                               ("b", BreakpointsScreen), ("s", ScenarioScreen)):
            await press(pilot, opener)
            assert isinstance(app.screen, dialog)
            app.screen.set_focus(None)  # keys go to the dialog itself, not to an input in it
            for key in ("full_stop", "n", "m", "u", "space", "1", "c", "p", "left", "right",
                        "r", "v", "d", "g", "e"):
                await pilot.press(key)
                await settle(pilot)
                assert isinstance(app.screen, dialog), key
                assert s.count() == 3 and shown(app) == (3, 3), key
                assert app.debugger.session is s, key
            await press(pilot, "escape")
            assert not isinstance(app.screen, dialog)
        await press(pilot, "full_stop")  # and back on the main screen they work again
        assert s.count() == 4 and shown(app) == (4, 4)

    run_app(app, script)


def test_q_quits_and_tears_down_every_engine_thread() -> None:
    app = App("multi-device")

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        while s.count() < 30:  # cuda:1's thread is up and holds work
            await press(pilot, "full_stop")
        assert any(name.startswith("autograd cuda") for name in engine_threads())
        await pilot.press("q")
        await pilot.pause()

    run_app(app, script)
    assert app.return_code == 0
    deadline = time.monotonic() + 5
    while engine_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not engine_threads()


# --- deadlock, replay, small terminals -----------------------------------------------------------
def test_deadlock_is_shown_and_history_and_restart_still_work(deadlock_scenario: str) -> None:
    app = App(deadlock_scenario)

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        await press(pilot, "space")
        assert s.status == "deadlock" and last_kind(app) == "deadlock"
        banner = app.debugger.query_one("#banner", Static)
        assert banner.has_class("shown")
        text = text_of(app, "#banner")
        assert text.startswith("DEADLOCK  ")
        assert text == "DEADLOCK  " + s.report.explanation
        assert "No thread in this cycle can move" in text
        assert app.said("deadlock Deadlock detected")
        cycle = [c.split(" ", 1)[1] for c in s.report.cycle if c.startswith("thread ")]
        assert cycle == ["cpu (owner)"]
        for row in thread_rows(app):
            name, what = row[1], row[4]
            want = "bold red" if name[0] in cycle else ""
            assert name[1] == want and what[1] == want, row
        assert "deadlock" in text_of(app, "#timeline")
        log = app.debugger.query_one("#events", LineTable)
        line = log.row(log.row_count - 1)[1][0]  # the deadlock event: readable, no raw dict
        assert "deadlock: cpu (owner) (inside " in line and "{" not in line, line
        assert "No thread in this cycle" not in line  # the first sentence only
        n = s.count()
        await press(pilot, "left")
        assert shown(app) == (n - 1, n)
        graph_matches(app, n - 1)
        assert banner.has_class("shown")  # the deadlock stays announced
        await press(pilot, "full_stop")
        assert app.said("the run has ended (deadlock)")
        await press(pilot, "r")
        s2 = app.debugger.session
        assert s2 is not None and s2 is not s and s2.status == "ready" and s2.count() < 3
        assert not banner.has_class("shown")
        assert all(r[1][1] == "" for r in thread_rows(app))

    run_app(app, script)


def test_replay_of_a_recording(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with Run(scenarios.load("linear-relu")) as run:
        assert run.run().status == "finished"
        run.save(path)
        total = len(run.events)
    app = App(recording=trace.load(path))

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None and not s.live and s.count() == total
        title = app.debugger.sub_title or ""
        assert "| replay |" in title and title.startswith("linear-relu")
        assert shown(app) == (total, total)
        await press(pilot, "home")
        assert shown(app) == (0, total)
        await press(pilot, "full_stop")
        assert shown(app) == (1, total)
        await press(pilot, "right", "right", "full_stop")
        assert shown(app) == (4, total)
        graph_matches(app, 4)
        await press(pilot, "left")
        assert shown(app) == (3, total)
        graph_matches(app, 3)
        await press(pilot, "g")
        await pilot.press(*"33", "enter")
        await settle(pilot)
        assert shown(app) == (33, total)
        assert s.state_at(33).last_event.kind == "not_ready_insert"
        graph_matches(app, 33)
        await press(pilot, "end", "full_stop")  # at the end, n stays there
        assert shown(app) == (total, total)
        assert s.count() == total  # nothing runs in a replay
        # keys that only make sense live say which keys walk a recording, and do nothing
        await press(pilot, "home")
        for key in ("c", "p", "1", "9"):  # (space plays it: test_app_keys.py)
            app.notes.clear()
            await press(pilot, key)
            assert shown(app) == (0, total), key
            assert app.said("replay: space plays; left/right/home/end/g and / walk it"), \
                (key, app.notes)

    run_app(app, script)


def _plain(strip: Any) -> str:
    return "".join(seg.text for seg in strip).rstrip()


def test_a_lazy_table_makes_only_the_rows_on_screen() -> None:
    """A million rows: only those drawn are made, wherever the cursor goes."""
    from textual.app import App as TextualApp

    made: list[int] = []

    def fetch(i: int) -> Row:
        made.append(i)
        return cells(str(i), f"row {i}")

    class One(TextualApp[None]):
        def compose(self) -> Any:
            yield LineTable(("n", "text"), id="t")

    app = One()

    async def main() -> None:
        async with app.run_test(size=(60, 20)) as pilot:
            table = app.query_one("#t", LineTable)
            table.set_lazy_rows(1_000_000, fetch, [7, 10], key=lambda i: f"k{i}")
            await pilot.pause()
            assert table.row_count == 1_000_000
            assert _plain(table.render_line(1)).split() == ["0", "row", "0"]
            assert 0 < len(set(made)) <= 20  # the rows on a 20-line screen
            table.move_cursor(999_999)
            await pilot.pause()
            lines = [_plain(table.render_line(y)).split() for y in range(1, 20)]
            assert ["999999", "row", "999999"] in lines and ["0", "row", "0"] not in lines
            assert len(set(made)) <= 40 and table.key(999_999) == "k999999"
            before = len(made)
            table.append_rows([cells("x", "one more")])  # no row of the million is made
            assert table.row_count == 1_000_001 and table.row(1_000_000)[1][0] == "one more"
            assert len(made) == before and table.row(5) == cells("5", "row 5")

    asyncio.run(main())


def test_a_recording_with_a_big_graph_makes_only_the_rows_on_screen(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph above LAZY_LIST_ABOVE nodes: the list view and the event log make the rows
    they show (a recording may hold a million events), and show the same rows as the
    full lists would."""
    n_links = LAZY_LIST_ABOVE // 2 + 50  # 2n + 1 nodes
    path = tmp_path / "chain.jsonl"
    with Run(scenarios.load("chain"), {"n": n_links}) as run:
        assert run.run().status == "finished"
        run.save(path)
        total = len(run.events)
    made: list[int] = []
    list_row = render.list_row

    def counting(state: Any, n: int) -> tuple[str, ...]:
        made.append(n)
        return list_row(state, n)

    monkeypatch.setattr(render, "list_row", counting)
    app = App(recording=trace.load(path))

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None and shown(app) == (total, total)
        state = s.state_at(total)
        assert len(state.nodes) == 2 * n_links + 1 > LAZY_LIST_ABOVE
        nodes = app.debugger.query_one("#node-list", LineTable)
        log = app.debugger.query_one("#events", LineTable)
        assert nodes.row_count == len(state.nodes) and log.row_count == total
        assert len(made) <= 60  # the rows on screen, not 2,201
        # the log opens on the shown (last) event, scrolled to it once laid out
        visible = log.scrollable_content_region.height - 1
        assert log.cursor_row == total - 1
        assert log.scroll_offset.y <= total - 1 < log.scroll_offset.y + visible
        order = state.topological_order()
        palette = app.debugger.query_one(GraphPane).palette  # the theme's colours
        first = list_cells(list_row(state, order[0]), palette)
        assert nodes.row(0) == first and nodes.key(0) == str(order[0])
        e = s.event(total - 1)
        assert log.row(total - 1)[1][0] == engine_format(e, state)
        await press(pilot, "home", "right", "right")
        assert shown(app) == (2, total)
        state2 = s.state_at(2)
        assert nodes.row(0) == list_cells(
            list_row(state2, state2.topological_order()[0]), palette)
        assert len(made) <= 240

    run_app(app, script)


def engine_format(e: Any, state: Any) -> str:
    from autograd_tui.words import format_event

    return format_event(e, {n: info.name for n, info in state.nodes.items()})[6:]


def test_side_panes_list_at_most_pane_items_entries() -> None:
    """Thousands of leaves, GraphTasks, not_ready entries or queued tasks: each pane lists
    PANE_ITEMS of them and says how many more there are."""
    from autograd_tui.engine.events import NodeInfo, raw
    from autograd_tui.history.state import (
        EngineState,
        GraphTaskRef,
        GraphTaskState,
        QueuedTask,
        TaskFn,
    )

    k = render.PANE_ITEMS
    s = EngineState()
    for n in range(k + 70):
        s.nodes[n] = NodeInfo(n, f"N{n}", "cpu", n, n, 1, (), True)
        s.leaf_grads[n] = raw({"shape": [], "dtype": "float64", "values": [1.0], "norm": 1.0})
    for g in range(1, k + 21):
        s.graph_tasks[g] = GraphTaskState(g, "cpu", 0, False, False, True, (0,), 0)
    for n in range(k + 30):
        s.not_ready[(1, n)] = (None,)
    ref = GraphTaskRef(1, 0)  # a heap whose pop order is by falling sequence number
    s.heaps["cpu"] = [QueuedTask(ref, TaskFn(n, 10_000 - n)) for n in range(k + 10)]
    gts = render.graph_tasks_text(s).plain
    assert gts.startswith("… 20 earlier GraphTasks\nGT21 ") and f"GT{k + 20} " in gts
    assert "#49=" in gts and f"#{k}=" not in gts and gts.endswith("… and 70 more")
    nr = render.not_ready_text(s).plain
    assert nr.count("\n") == k and nr.endswith("… and 30 more in not_ready")
    q = render.queues_text(s).plain
    assert q.count("←") == k and q.endswith("← … 10 more")
    assert f"N{k - 1}#{k - 1} " in q and f"N{k}#" not in q
    small = EngineState(nodes=dict(list(s.nodes.items())[:3]),
                        leaf_grads=dict(list(s.leaf_grads.items())[:3]))
    assert "more" not in render.graph_tasks_text(small).plain


def test_a_small_terminal_asks_for_80x24() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        assert app.screen.has_class("too-small")
        msg = text_of(app, "#too-small")
        assert "The terminal is 60x20" in msg and "needs at least 80x24" in msg
        assert app.debugger.query_one("#too-small").display
        assert not app.debugger.query_one("#main").display
        before = shown(app)
        await press(pilot, ".", "n", "c")  # keys do not move the run out of sight
        assert shown(app) == before and app.screen.has_class("too-small")
        await pilot.resize_terminal(120, 40)
        await settle(pilot)
        assert not app.screen.has_class("too-small")
        assert app.debugger.query_one("#main").display
        assert not app.debugger.query_one("#too-small").display
        await press(pilot, ".")  # and act again once it fits
        assert shown(app) != before

    run_app(app, script, size=(60, 20))


def test_the_training_loop_lesson_runs_to_the_end_in_the_app() -> None:
    """Issue 27's lesson in the app: each step's backward is a GraphTask of its own, ``c``
    runs them all, and the run completes with a loss that went down."""
    app = App("training-loop")

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        await press(pilot, "c")
        await until(pilot, lambda: s.status == "completed")
        kinds = [e.kind for e in s.events()]
        assert kinds.count("graph_task_created") == 3  # one backward per SGD step
        assert kinds.count("completion") == 3

    run_app(app, script)
