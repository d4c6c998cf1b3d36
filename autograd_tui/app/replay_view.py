"""``ReplayView``: the keys that walk a session's history without moving the engine, on
top of ``SessionView``: play / pause at a speed, jump to the next (or previous) event
of a kind or of a node, and copy the shown event's line or a node's details.

They work alike on a recording and on a live run's history (``AutogradApp`` plays
when the cursor is behind the newest event); they read the ``Session`` only.  The
bindings are in ``app.py``, with the others.
"""

from __future__ import annotations

import time

from textual.timer import Timer

from autograd_tui.app import render
from autograd_tui.app.replay import Player, find_event
from autograd_tui.app.screens import JumpScreen
from autograd_tui.app.session_view import REFRESH_HZ, SessionView
from autograd_tui.app.widgets import GraphPane
from autograd_tui.control.query import EventQuery, parse_query
from autograd_tui.words import format_event


class ReplayView(SessionView):
    """``SessionView`` with play, jumps and copy."""

    def __init__(self) -> None:
        super().__init__()
        self.player = Player()
        self._play_timer: Timer | None = None
        self.jump_query: EventQuery | None = None  # what ] and [ repeat

    def _reset(self) -> None:
        self._stop_play()
        self.jump_query = None  # it names nodes of the last graph
        super()._reset()

    def _play_label(self) -> str:
        return f" {self.player.label}" if self.player.playing else ""

    def _show_event(self, k: int) -> None:
        """Show the state at k; at the newest event the view follows the run again."""
        self._follow = k == self._seen
        self.cursor = k

    # --- play -----------------------------------------------------------------------------
    def action_play(self) -> None:
        """Play or pause the history from the shown event; at the end of a recording,
        from its start."""
        s = self.session
        if s is None:
            return
        if self.player.playing:
            self._stop_play()
            self.notify(f"paused at event {self.cursor}", timeout=2)
            return
        if self.cursor >= self._seen:
            if s.live:
                self.notify("at the newest event: n steps, space runs the engine", timeout=3)
                return
            self._show_event(0)
        self.player.start(time.monotonic())
        self._play_timer = self.set_interval(1 / min(self.player.speed, REFRESH_HZ),
                                             self._play_tick)
        self._update_title()

    def _stop_play(self) -> None:
        self.player.stop()
        if self._play_timer is not None:
            self._play_timer.stop()
            self._play_timer = None
        if self._mounted and self.session is not None:
            self._update_title()

    def _play_tick(self) -> None:
        if not self.player.playing:
            return
        n = self.player.due(time.monotonic())
        if n:
            self._show_event(min(self.cursor + n, self._seen))
        if self.cursor >= self._seen:  # the end (or n, space, end moved the view there)
            self._stop_play()
            s = self.session
            if s is not None and not s.live:
                self.notify(f"end of the recording (event {self._seen})", timeout=3)

    def action_faster(self) -> None:
        self._change_speed(1)

    def action_slower(self) -> None:
        self._change_speed(-1)

    def _change_speed(self, steps: int) -> None:
        speed = self.player.change_speed(steps, time.monotonic())
        if self._play_timer is not None:  # a faster timer for a speed under 30/s
            self._play_timer.stop()
            self._play_timer = self.set_interval(1 / min(speed, REFRESH_HZ), self._play_tick)
        self.notify(f"play speed: {speed} events per second", timeout=2)
        self._update_title()

    # --- jumps ----------------------------------------------------------------------------
    def action_jump(self, forward: bool = True) -> None:
        """A dialog for the kind or node to jump to, then the jump."""
        s = self.session
        if s is None:
            return
        names = self._names()

        def done(q: EventQuery | None) -> None:
            if q is not None:
                self.jump_query = q
                self._jump(forward)

        def parse(text: str) -> EventQuery:
            return parse_query(text, names)

        last = self.jump_query.text if self.jump_query is not None else ""
        self.push_screen(JumpScreen(parse, forward, last), done)

    def action_jump_next(self) -> None:
        if self.jump_query is None:
            self.action_jump(True)
        else:
            self._jump(True)

    def action_jump_prev(self) -> None:
        if self.jump_query is None:
            self.action_jump(False)
        else:
            self._jump(False)

    def _jump(self, forward: bool) -> None:
        s, q = self.session, self.jump_query
        if s is None or q is None:
            return
        self._stop_play()
        k = find_event(s, q, self.cursor, forward, end=self._seen, names=self._names())
        if k is None:
            where = "after" if forward else "before"
            self.notify(f"no {q.text} event {where} event {self.cursor}", timeout=3)
            return
        self._show_event(k)

    # --- copy -----------------------------------------------------------------------------
    def action_copy_event(self) -> None:
        """The shown event's line (as the log shows it, with its number), as text."""
        s, k = self.session, self.cursor
        if s is None or k == 0:
            self.notify("no event is shown (at 0, before the first): nothing copied",
                        timeout=3)
            return
        line = format_event(s.event(k - 1), self._names()).strip()
        self.copy_to_clipboard(line)
        self.notify(line, title=f"copied event {k}", timeout=4)

    def action_copy_node(self) -> None:
        """The details of the node ``d`` shows (chosen in the list, else the one the
        shown event touched), as text."""
        s = self.session
        if s is None:
            return
        state = s.state_at(self.cursor)
        pane = self.query_one(GraphPane)
        node = pane.details_node
        if node is None and state.last_event is not None:
            node = state.last_event.node
        if node is None or node not in state.nodes:
            self.notify("no node to copy: the shown event touches none (choose one in the "
                        "list view, v)", timeout=3)
            return
        text = render.node_details(state, node, forward=pane.forward).plain.rstrip()
        self.copy_to_clipboard(text)
        self.notify(text.splitlines()[0], title="copied node details", timeout=4)
