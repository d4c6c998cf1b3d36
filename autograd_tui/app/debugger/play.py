"""``Playback``: the keys that walk a session's history without moving the engine: play /
pause at a speed (space, ``+``, ``-``), and jump to the next (or previous) event of a kind
or of a node (``/``, ``]``, ``[``).

They work alike on a recording and on a live run's history (the screen plays when the
cursor is behind the newest event); they read the ``Session`` only.  ``Player`` (in
``app/playback.py``) times the play; the queries are there too.
"""

from __future__ import annotations

import time
from typing import Any

from textual.timer import Timer

from autograd_tui.app.debugger.shown import Shown
from autograd_tui.app.playback import Player, find_event
from autograd_tui.app.screens import JumpScreen
from autograd_tui.control.query import EventQuery, graph_words, parse_query

REFRESH_HZ = 30  # the screen's refresh rate: play never ticks faster


class Playback:
    """Play and jumps over what ``shown`` shows: a member of the debugger screen."""

    def __init__(self, shown: Shown) -> None:
        self.shown = shown
        self.player = Player()
        self.query: EventQuery | None = None  # the last jump: what ] and [ repeat
        self._timer: Timer | None = None

    @property
    def playing(self) -> bool:
        return self.player.playing

    @property
    def label(self) -> str:
        """Said after live or replay in the title: the play speed, while playing."""
        return f" {self.player.label}" if self.player.playing else ""

    def reset(self) -> None:
        """Another session: no play, no jump (it names nodes of the last graph)."""
        self.stop()
        self.query = None

    # --- play -----------------------------------------------------------------------------
    def toggle(self) -> None:
        """Play or pause the history from the shown event; at the end of a recording,
        from its start."""
        v = self.shown
        s = v.session
        if s is None:
            return
        if self.player.playing:
            self.stop()
            v.notify(f"paused at event {v.cursor}", timeout=2)
            return
        if v.cursor >= v.seen:
            if s.live:
                v.notify("at the newest event: n steps, space runs the engine", timeout=3)
                return
            v.show_event(0)
        self.player.start(time.monotonic())
        self._timer = v.set_interval(1 / min(self.player.speed, REFRESH_HZ), self._tick)
        v.update_title()

    def stop(self) -> None:
        self.player.stop()
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.shown.update_title()

    def _tick(self) -> None:
        if not self.player.playing:
            return
        v = self.shown
        n = self.player.due(time.monotonic())
        if n:
            v.show_event(min(v.cursor + n, v.seen))
        if v.cursor >= v.seen:  # the end (or n, space, end moved the view there)
            self.stop()
            s = v.session
            if s is not None and not s.live:
                v.notify(f"end of the recording (event {v.seen})", timeout=3)

    def change_speed(self, steps: int) -> None:
        speed = self.player.change_speed(steps, time.monotonic())
        if self._timer is not None:  # a faster timer for a speed under 30/s
            self._timer.stop()
            self._timer = self.shown.set_interval(1 / min(speed, REFRESH_HZ), self._tick)
        self.shown.notify(f"play speed: {speed} events per second", timeout=2)
        self.shown.update_title()

    # --- jumps ----------------------------------------------------------------------------
    def ask_jump(self, forward: bool = True) -> None:
        """A dialog for the kind or node to jump to, then the jump."""
        if self.shown.session is None:
            return
        names, meta = self.graph()

        def done(q: EventQuery | None) -> None:
            if q is not None:
                self.query = q
                self.jump(forward)

        def parse(text: str) -> EventQuery:
            word = text.strip().lstrip("#")
            if word.isdigit() and int(word) not in names:
                # nn.Sequential's modules are 0, 1, ...: a number no node has is its module
                if any(m.get("module") == word for m in meta.values()):
                    return parse_query(f"module={word}", names, meta)
                raise ValueError(f"no node #{word} in this graph yet"
                                 + (f" (#{min(names)} to #{max(names)})" if names else ""))
            return parse_query(text, names, meta)

        last = self.query.text if self.query is not None else ""
        self.shown.app.push_screen(JumpScreen(parse, forward, last,
                                              graph_words(names, meta)), done)

    def graph(self) -> tuple[dict[int, str], dict[int, dict[str, Any]]]:
        """Node id -> name, and -> ``node_meta`` (modules, parameters), of the graph so far."""
        s = self.shown.session
        if s is None:
            return {}, {}
        state = s.state_at(self.shown.seen)
        return {n: info.name for n, info in state.nodes.items()}, state.node_meta

    def repeat_jump(self, forward: bool) -> None:
        """``]`` / ``[``: the last jump again; before any, the dialog."""
        if self.query is None:
            self.ask_jump(forward)
        else:
            self.jump(forward)

    def jump(self, forward: bool) -> None:
        v, q = self.shown, self.query
        s = v.session
        if s is None or q is None:
            return
        self.stop()
        names, meta = self.graph()
        k = find_event(s, q, v.cursor, forward, end=v.seen, names=names, meta=meta)
        if k is None:
            where = "after" if forward else "before"
            other = find_event(s, q, v.cursor, not forward, end=v.seen, names=names,
                               meta=meta)
            hint = "" if other is None else (
                f" (one {'before' if forward else 'after'} it: event {other}, "
                f"{'[' if forward else ']'} goes there)")
            v.notify(f"no {q.text} event {where} event {v.cursor}{hint}", timeout=4)
            return
        v.show_event(k)
