"""The app's classroom keys, through Textual's Pilot: play / pause and its speed, jumps to
the next event of a kind or a node, the scenario picker's filter, the command palette
(the app's own bindings as commands) and copying to the clipboard.

Where a key lands is compared with the History (``Session.events``), never with a
hard-coded index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pilot import press, run_app, settle, shown, until
from test_app import App, graph_matches
from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot
from textual.widgets import Input, OptionList, Static

from autograd_tui import scenarios
from autograd_tui.app import render
from autograd_tui.app.debugger import DebuggerScreen
from autograd_tui.app.palette import commands
from autograd_tui.app.playback import DEFAULT_SPEED, SPEEDS, Player
from autograd_tui.app.screens import HELP, JumpScreen, ScenarioScreen
from autograd_tui.app.screens.scenario_picker import matching
from autograd_tui.app.widgets import LineTable
from autograd_tui.history import recordings as trace
from autograd_tui.session.run import Run
from autograd_tui.words import format_event

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rec") / "run.jsonl"
    with Run(scenarios.load("linear-relu")) as run:
        assert run.run().status == "finished"
        run.save(path)
    return path


def kth(app: App, pred: Any, after: int = 0, before: int | None = None) -> list[int]:
    """The k of every event (1-based) in after < k < before that ``pred`` accepts."""
    assert app.debugger.session is not None
    evs = app.debugger.session.events()
    stop = len(evs) + 1 if before is None else before
    return [i + 1 for i, e in enumerate(evs) if after < i + 1 < stop and pred(e)]


# --- play ---------------------------------------------------------------------------------------
def test_the_player_counts_events_by_time_at_its_speed() -> None:
    p = Player()
    assert not p.playing and p.due(10.0) == 0 and p.speed == DEFAULT_SPEED
    p.start(0.0)
    assert p.due(1.0) == DEFAULT_SPEED
    assert p.due(1.5) == int(1.5 * DEFAULT_SPEED) - DEFAULT_SPEED
    faster = p.change_speed(1, 2.0)
    assert faster == SPEEDS[SPEEDS.index(DEFAULT_SPEED) + 1]
    assert p.due(3.0) == faster  # counted from the change
    assert p.change_speed(-100, 3.0) == SPEEDS[0] and p.change_speed(100, 3.0) == SPEEDS[-1]
    p.stop()
    assert p.due(100.0) == 0 and p.label == ""


def test_space_plays_a_recording_pauses_and_stops_at_the_end(recording: Path) -> None:
    app = App(recording=trace.load(recording))

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None and not s.live
        total = s.count()
        assert shown(app) == (total, total)
        await press(pilot, "space")  # at the end of a recording: from its start
        assert app.debugger.playback.player.playing
        assert f"replay ▶ {DEFAULT_SPEED}/s |" in app.debugger.sub_title
        await until(pilot, lambda: shown(app)[0] >= 2)
        await press(pilot, "space")  # pause
        assert not app.debugger.playback.player.playing and "▶" not in app.debugger.sub_title
        paused = shown(app)[0]
        assert 0 < paused < total and app.said(f"paused at event {paused}")
        await pilot.pause(0.4)
        assert shown(app)[0] == paused  # it stays paused
        graph_matches(app, paused)
        # faster: the speed goes up the list, the title says it while playing
        for _ in range(len(SPEEDS)):
            await press(pilot, "plus")
        assert app.debugger.playback.player.speed == SPEEDS[-1]
        assert app.said(f"play speed: {SPEEDS[-1]}")
        await press(pilot, "space")
        await until(pilot, lambda: not app.debugger.playback.player.playing)
        assert shown(app) == (total, total) and s.count() == total
        assert app.said(f"end of the recording (event {total})")
        assert "▶" not in app.debugger.sub_title
        graph_matches(app, total)

    run_app(app, script)


def test_plus_and_minus_change_the_speed_shown_in_the_header(recording: Path) -> None:
    app = App(recording=trace.load(recording))

    async def script(pilot: Pilot[Any]) -> None:
        i = SPEEDS.index(DEFAULT_SPEED)
        await press(pilot, "home", "minus")
        assert app.debugger.playback.player.speed == SPEEDS[i - 1]
        await press(pilot, "equals_sign", "equals_sign")  # = is + without shift
        assert app.debugger.playback.player.speed == SPEEDS[i + 1]
        await press(pilot, "space")
        assert f"▶ {SPEEDS[i + 1]}/s" in app.debugger.sub_title
        await press(pilot, "minus")
        assert f"▶ {SPEEDS[i]}/s" in app.debugger.sub_title and app.debugger.playback.player.playing
        for _ in range(len(SPEEDS)):
            await press(pilot, "minus")
        assert app.debugger.playback.player.speed == SPEEDS[0]  # it stops at the slowest
        await press(pilot, "space")
        assert not app.debugger.playback.player.playing

    run_app(app, script)


def test_space_behind_the_newest_event_plays_the_history_not_the_engine() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        await press(pilot, *["full_stop"] * 12, *["left"] * 6)
        assert shown(app) == (6, 12)
        for _ in range(4):
            await press(pilot, "plus")
        await press(pilot, "space")
        await until(pilot, lambda: not app.debugger.playback.player.playing)
        assert s.count() == 12 and shown(app) == (12, 12)  # the engine did not move
        await press(pilot, "space")  # at the newest event: space runs the engine again
        assert s.status == "completed" and shown(app) == (s.count(), s.count())

    run_app(app, script)


# --- jumps (the query itself: tests/control/test_query.py) -------------------------------------
def test_slash_jumps_to_the_next_event_of_a_kind_and_brackets_repeat(recording: Path) -> None:
    app = App(recording=trace.load(recording))

    async def script(pilot: Pilot[Any]) -> None:
        pushes = kth(app, lambda e: e.kind == "push")
        assert len(pushes) >= 3
        await press(pilot, "home", "slash")
        assert isinstance(app.screen, JumpScreen)
        await pilot.press(*"push", "enter")
        await settle(pilot)
        assert not isinstance(app.screen, JumpScreen)
        assert shown(app)[0] == pushes[0]
        graph_matches(app, pushes[0])
        await press(pilot, "right_square_bracket")
        assert shown(app)[0] == pushes[1]
        await press(pilot, "right_square_bracket")
        assert shown(app)[0] == pushes[2]
        await press(pilot, "left_square_bracket")
        assert shown(app)[0] == pushes[1]
        await press(pilot, "end", "right_square_bracket")  # nothing after the last
        assert shown(app)[0] == app.debugger.session.count() and app.said("no push event after")
        await press(pilot, "left_square_bracket")
        assert shown(app)[0] == pushes[-1]

    run_app(app, script)


def test_jumps_to_a_node_by_id_and_by_name(recording: Path) -> None:
    app = App(recording=trace.load(recording))

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        relu = {n for n, info in s.state_at(s.count()).nodes.items()
                if info.name == "ReluBackward0"}
        assert len(relu) == 1
        (r,) = relu
        at_node = kth(app, lambda e: e.node == r)
        await press(pilot, "home", "slash")
        await pilot.press(*f"#{r}", "enter")
        await settle(pilot)
        assert shown(app)[0] == at_node[0]
        await press(pilot, "right_square_bracket")
        assert shown(app)[0] == at_node[1]
        # a name and a kind together: both must match
        starts = kth(app, lambda e: e.kind == "node_start" and e.node == r)
        await press(pilot, "home", "slash")
        await pilot.press(*"node_start ReluBackward0", "enter")
        await settle(pilot)
        assert shown(app)[0] == starts[0]
        assert s.state_at(shown(app)[0]).last_event.kind == "node_start"
        # an unknown word: the dialog stays open and says why
        await press(pilot, "slash")
        app.screen.query_one(Input).value = ""
        await pilot.press(*"frobnicate", "enter")
        await settle(pilot)
        assert isinstance(app.screen, JumpScreen) and app.said("'frobnicate' is neither")
        await press(pilot, "escape")
        assert shown(app)[0] == starts[0]

    run_app(app, script)


def test_a_bracket_before_any_jump_opens_the_dialog_and_a_live_jump_stays_in_the_run() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        await press(pilot, *["full_stop"] * 30, "home", "right_square_bracket")
        assert isinstance(app.screen, JumpScreen)
        await pilot.press(*"pop", "enter")
        await settle(pilot)
        pops = kth(app, lambda e: e.kind == "pop")
        assert shown(app) == (pops[0], 30)
        for want in pops[1:]:
            await press(pilot, "right_square_bracket")
            assert shown(app) == (want, 30)
        await press(pilot, "right_square_bracket")  # no later pop in the run so far
        assert shown(app) == (pops[-1], 30) and s.count() == 30

    run_app(app, script)


# --- the scenario picker ------------------------------------------------------------------------
def test_the_picker_filters_as_you_type_and_enter_opens_the_highlighted_one() -> None:
    app = App("linear-relu")
    items = [(sc.name, sc.summary) for sc in scenarios.builtins()]

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "s")
        assert isinstance(app.screen, ScenarioScreen)
        options = app.screen.query_one(OptionList)
        assert options.option_count == len(items)
        await pilot.press(*"deadlock")
        await settle(pilot)
        want = [name for name, _ in matching(items, "deadlock")]
        got = [options.get_option_at_index(i).id for i in range(options.option_count)]
        assert got == want and 0 < len(got) < len(items)
        assert all("deadlock" in f"{n} {sm}".lower() for n, sm in items if n in got)
        count = str(app.screen.query_one("#scenario-count", Static).content)
        assert count == f"{len(want)} of {len(items)} scenarios match"
        await press(pilot, "down")  # the second match
        assert options.highlighted == 1
        await press(pilot, "enter")
        assert not isinstance(app.screen, ScenarioScreen)
        assert app.debugger.session is not None and app.debugger.session.scenario_name == want[1]
        # a filter that matches nothing: enter picks nothing
        await press(pilot, "s")
        await pilot.press(*"zzzqqq", "enter")
        await settle(pilot)
        assert isinstance(app.screen, ScenarioScreen)
        assert app.screen.query_one(OptionList).option_count == 0
        assert app.said("no scenario matches")
        await press(pilot, "escape")
        assert app.debugger.session.scenario_name == want[1]

    run_app(app, script)


# --- the command palette ------------------------------------------------------------------------
def test_the_palette_lists_every_described_binding_with_its_key() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        cmds = {c.action: c for c in commands(app.debugger)}
        for b in DebuggerScreen.BINDINGS:
            if b.description:  # type: ignore[union-attr]
                assert b.action in cmds, b  # type: ignore[union-attr]
        assert {"step", "step_thread(3)", "continue", "breakpoints", "export", "scenarios",
                "toggle_run", "jump", "jump_next", "copy_event", "copy_node",
                "faster", "find_node"} <= set(cmds)
        assert cmds["jump_next"].key == "]" and cmds["step"].key == "."
        assert all(not a.startswith("pan") for a in cmds)  # no description: no command
        await press(pilot, "ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        listed = app.screen.query_one(CommandList)
        await until(pilot, lambda: listed.option_count >= len(cmds))
        prompts = [str(listed.get_option_at_index(i).prompt)
                   for i in range(listed.option_count)]
        for c in cmds.values():
            assert any(p.startswith(f"{c.name}  {c.key}") for p in prompts), c
        await press(pilot, "escape")
        # over a dialog the app's keys do nothing, and the palette offers none of them
        await press(pilot, "question_mark", "ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"quit")
        listed = app.screen.query_one(CommandList)
        await until(pilot, lambda: listed.option_count > 0)  # Textual's own Quit
        await pilot.pause(0.2)
        prompts = [str(listed.get_option_at_index(i).prompt)
                   for i in range(listed.option_count)]
        assert prompts and not any(p.startswith(f"{cmds['quit'].name}  q") for p in prompts)

    run_app(app, script)


async def palette_run(pilot: Pilot[Any], query: str, name: str) -> None:
    """Open the palette, type ``query`` and run the command called ``name``."""
    await pilot.press("ctrl+p")
    await settle(pilot)
    palette = pilot.app.screen
    assert isinstance(palette, CommandPalette)
    await pilot.press(*query)
    listed = palette.query_one(CommandList)

    def index() -> int | None:
        prompts = [str(listed.get_option_at_index(i).prompt).split("\n")[0]
                   for i in range(listed.option_count)]
        return next((i for i, p in enumerate(prompts) if p.startswith(f"{name}  ")), None)

    await until(pilot, lambda: index() is not None)
    listed.highlighted = index()
    await pilot.press("enter")
    await until(pilot, lambda: not isinstance(pilot.app.screen, CommandPalette))
    await settle(pilot)


def test_running_a_palette_command_performs_its_action() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        await palette_run(pilot, "step", "Step")
        assert s.count() == 1 and shown(app) == (1, 1)
        await palette_run(pilot, "step thread 1", "Step 1")
        assert s.count() == 2
        await palette_run(pilot, "breakpoint", "Breakpts")  # found by its help line
        assert type(app.screen).__name__ == "BreakpointsScreen"
        await press(pilot, "escape")
        await palette_run(pilot, "copy ev", "Copy event")
        assert app.clipboard == format_event(s.event(1), app.debugger.names()).strip()

    run_app(app, script)


# --- copy ---------------------------------------------------------------------------------------
def test_y_copies_the_shown_event_line_and_shift_y_the_node_details() -> None:
    app = App("linear-relu")

    async def script(pilot: Pilot[Any]) -> None:
        s = app.debugger.session
        assert s is not None
        await press(pilot, "y")  # at 0 there is no event
        assert app.clipboard == "" and app.said("nothing copied")
        while s.count() < 8 or s.events()[-1].kind != "node_start":
            await press(pilot, "full_stop")
        k = s.count()
        await press(pilot, "y")
        log = app.debugger.query_one("#events", LineTable)
        seq, line = log.row(k - 1)[0][0], log.row(k - 1)[1][0]
        assert app.clipboard == f"{seq} {line}".rstrip()  # what the log shows
        assert app.said(f"copied event {k}")
        node = s.event(k - 1).node
        assert node is not None
        await press(pilot, "Y")
        details = render.node_details(s.state_at(k), node,
                                      forward=s.forward).plain.rstrip()
        assert app.clipboard == details
        name = s.state_at(k).nodes[node].name
        assert details.startswith(f"{name} #{node}") and "[" not in details.split("\n")[0]
        assert app.said("copied node details")
        await press(pilot, "left", "y")  # the shown event, not the newest
        assert app.clipboard == format_event(s.event(k - 2), app.debugger.names()).strip()

    run_app(app, script)


def test_help_lists_the_new_keys() -> None:
    for key in ("`space`", "`+`", "`-`", "`/`", "`]`", "`[`", "`y`", "`Y`", "`ctrl+p`",
                "`left`"):
        assert key in HELP, key
