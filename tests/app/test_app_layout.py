"""The layout adapts to the terminal: every pane shown or one key away, and the footer
shows the keys that matter most at its width (``FOOTER_KEYS``).

At 80x24 the not_ready and GraphTasks panes used to be pushed off the screen, and at
120x40 the footer cut off ``s``, ``e``, ``t``, ``?`` and ``q``.  Snapshots of one moment
(linear-relu with Linear1 in not_ready) at 80x24, 120x40 and 200x60, and at 80x24 of
each side pane shown by its key.  Update after a deliberate change:
``.venv/bin/python -m pytest tests/app/test_app_layout.py --snapshot-update``, then look at
the SVGs in ``tests/app/__snapshots__/test_app_layout/``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pilot import finish, last_kind, step_until
from textual.binding import Binding
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets._footer import FooterKey

from autograd_tui.app import AutogradApp
from autograd_tui.app.debugger import DebuggerScreen
from autograd_tui.app.screens.help import HELP
from autograd_tui.app.widgets import KeyFooter, PaneTabs
from autograd_tui.app.widgets.key_footer import FOOTER_KEYS, footer_actions
from autograd_tui.app.widgets.pane_tabs import PANES, TALL_HEIGHT

pytestmark = pytest.mark.timeout(180)

SIZES = [(80, 24), (120, 40), (200, 60)]
# what the footer must show: at 80 columns the keys a class needs most (w only while the
# side panes are tabs); at 120 also the ones the footer used to cut off
MUST_SHOW = {
    (80, 24): ["n", "space", "left", "right", "w", "question_mark", "q"],
    (120, 40): ["n", "space", "left", "right", "s", "e", "t", "question_mark", "q"],
}
ALWAYS_SHOWN = ("graph-pane", "events", "timeline")  # never tabs


async def at_not_ready(pilot: Pilot[Any]) -> None:
    """linear-relu at its first not_ready_insert (Linear1 waits for its second gradient)."""
    await step_until(pilot, lambda a: last_kind(a) == "not_ready_insert")
    await finish(pilot)


def screen_text(app: AutogradApp) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def fully_shown(app: AutogradApp, widget: Widget) -> bool:
    """On screen, whole (not cut off by its container), a line at least inside its border."""
    region = widget.region
    if not widget.display or widget not in app.screen._compositor.visible_widgets:
        return False
    parent = widget.parent
    assert isinstance(parent, Widget)
    return region.height > widget.styles.gutter.height and \
        parent.region.contains_region(region) and \
        app.screen.region.contains_region(region)


def footer_keys(app: AutogradApp) -> list[FooterKey]:
    return [k for k in app.debugger.query_one(KeyFooter).query(FooterKey)
            if "-command-palette" not in k.classes]


# --- the importance table -------------------------------------------------------------------
def test_footer_actions_keep_the_most_important_and_the_table_order() -> None:
    widths = {action: 10 for action, _ in FOOTER_KEYS}
    widths["not_in_the_table"] = 1
    everything = footer_actions(widths, 10_000)
    assert everything == [a for a, _ in FOOTER_KEYS]  # all, left to right as listed
    importance = dict(FOOTER_KEYS)
    for width in range(0, 10 * len(FOOTER_KEYS) + 1, 7):
        shown = footer_actions(widths, width)
        assert sum(widths[a] for a in shown) <= width
        assert shown == [a for a in everything if a in shown]  # the table's order
        hidden = [a for a in everything if a not in shown]
        if shown and hidden:  # a key shows only if every more important one does
            assert max(importance[a] for a in shown) <= min(importance[a] for a in hidden)


def test_every_key_is_in_the_help_screen() -> None:
    """Every key of the app (the footer shows a few) is in the help screen."""
    for binding in DebuggerScreen.BINDINGS:
        assert isinstance(binding, Binding)
        key = binding.key_display or binding.key  # "+" for "plus,equals_sign"
        if key.isdigit():
            key = "1`-`9"
        elif key.startswith("shift+") and key != "shift+tab":
            key = "shift+arrows"
        elif key == "question_mark":
            key = "?"
        assert f"`{key}`" in HELP, binding
    for pane in PANES:
        assert f"`{pane.key}`" in HELP


# --- the app at each size --------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_every_pane_is_shown_or_one_key_away(size: tuple[int, int]) -> None:
    async def main() -> None:
        app = AutogradApp("linear-relu")
        async with app.run_test(size=size) as pilot:
            await at_not_ready(pilot)
            for wid in ALWAYS_SHOWN:
                assert fully_shown(app, app.debugger.query_one(f"#{wid}")), wid
            tabbed = size[1] < TALL_HEIGHT
            assert app.screen.has_class("-short") == tabbed
            panes = [app.debugger.query_one(f"#{p.id}") for p in PANES]
            if not tabbed:
                assert all(fully_shown(app, w) for w in panes), [w.id for w in panes]
                assert "LinearBackward0#6" in screen_text(app)  # not_ready's entry
                return
            assert [fully_shown(app, w) for w in panes] == [True, False, False, False]
            for pane, widget in zip(PANES, panes):  # each by its own key
                await pilot.press(pane.key)
                await finish(pilot)
                assert [w for w in panes if fully_shown(app, w)] == [widget], pane.key
                assert str(widget.border_title) in screen_text(app)
                if pane.name == "not_ready":
                    assert "LinearBackward0#6 GT1 deps 1" in screen_text(app)
            await pilot.press(PANES[0].key)
            for widget in (*panes[1:], panes[0]):  # w: the next one, round
                await pilot.press("w")
                await finish(pilot)
                assert [w for w in panes if fully_shown(app, w)] == [widget]

    asyncio.run(main())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_footer_shows_the_keys_that_fit(size: tuple[int, int]) -> None:
    async def main() -> None:
        app = AutogradApp("linear-relu")
        async with app.run_test(size=size) as pilot:
            await finish(pilot)
            keys = footer_keys(app)
            shown = [k.key for k in keys]
            for key in MUST_SHOW.get(size, []):
                assert key in shown, (key, shown)
            if size == (200, 60):  # room for every key in the table (w: the panes are stacked)
                assert [k.action for k in keys] == [a for a, _ in FOOTER_KEYS if a != "next_pane"]
            assert ("w" in shown) == (size[1] < TALL_HEIGHT)
            palette = [k for k in app.debugger.query(FooterKey) if "-command-palette" in k.classes]
            right = palette[0].region.x if palette else size[0]
            assert all(k.region.right <= right for k in keys)  # whole, none under the palette
            for k in keys:
                assert f"{k.key_display} {k.description}" in screen_text(app).splitlines()[-1]
            assert "1" not in shown and "home" not in shown  # not in FOOTER_KEYS: hidden

    asyncio.run(main())


def test_a_resize_switches_the_layout_and_the_footer() -> None:
    async def main() -> None:
        app = AutogradApp("linear-relu")
        async with app.run_test(size=(120, 40)) as pilot:
            await at_not_ready(pilot)
            wide = [k.key for k in footer_keys(app)]
            await pilot.resize_terminal(80, 24)
            await finish(pilot)
            assert app.screen.has_class("-short")
            assert [k.key for k in footer_keys(app)] == MUST_SHOW[(80, 24)]
            await pilot.press("R")
            await finish(pilot)
            assert fully_shown(app, app.debugger.query_one("#not-ready"))
            await pilot.resize_terminal(120, 40)
            await finish(pilot)
            assert [k.key for k in footer_keys(app)] == wide
            assert all(fully_shown(app, app.debugger.query_one(f"#{p.id}")) for p in PANES)

    asyncio.run(main())


def test_a_click_on_a_tab_shows_its_pane() -> None:
    async def main() -> None:
        app = AutogradApp("linear-relu")
        async with app.run_test(size=(80, 24)) as pilot:
            await at_not_ready(pilot)
            tabs = app.debugger.query_one(PaneTabs)
            for pane in reversed(PANES):
                x = screen_text(app).splitlines()[tabs.region.y].index(
                    f" {pane.short} ", tabs.region.x)
                await pilot.click(PaneTabs, offset=(x - tabs.region.x + 2, 0))
                await finish(pilot)
                assert fully_shown(app, app.debugger.query_one(f"#{pane.id}")), pane.name
                assert tabs.current == pane.name

    asyncio.run(main())


def test_stepping_with_tabs_does_not_re_lay_out_the_screen_each_step() -> None:
    """Hidden panes and the shown one (a fixed height) take their new text without a
    layout of the screen (one costs more than all the rest of a step)."""
    async def main() -> None:
        app = AutogradApp("linear-relu")
        async with app.run_test(size=(80, 24)) as pilot:
            await at_not_ready(pilot)
            await pilot.press("Q")
            await finish(pilot)
            layouts = 0
            refresh_layout = app.screen._refresh_layout

            def counting(*args: Any, **kwargs: Any) -> None:
                nonlocal layouts
                if app.screen._layout_required:
                    layouts += 1
                refresh_layout(*args, **kwargs)

            app.screen._refresh_layout = counting  # type: ignore[method-assign]
            steps = 12
            for _ in range(steps):  # the queues, not_ready and GraphTasks all change
                await pilot.press("full_stop")
                await finish(pilot)
            assert layouts <= 1, layouts  # without the fixed heights: 5 in these 12 steps

    asyncio.run(main())


# --- snapshots ---------------------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_linear_relu_with_linear1_in_not_ready(snap_compare: Any,
                                                         size: tuple[int, int]) -> None:
    assert snap_compare(AutogradApp("linear-relu"), terminal_size=size, run_before=at_not_ready)


@pytest.mark.parametrize("pane", PANES, ids=lambda p: p.name)
def test_snapshot_80x24_pane_by_its_key(snap_compare: Any, pane: Any) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await at_not_ready(pilot)
        await pilot.press(pane.key)
        await finish(pilot)

    assert snap_compare(AutogradApp("linear-relu"), terminal_size=(80, 24),
                        run_before=run_before)
