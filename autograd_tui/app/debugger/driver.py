"""``Driver``: the keys that drive a live run (step, step one thread, run / pause, continue,
pause a thread), its requests to the controller, and what the screen says of each result.

The controller's calls block until the engine is still again, so they are never made on
the UI thread: the screen's worker (group ``driver``) calls ``Driver.request``, one at a
time, and hands the result back to ``Driver.done``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from autograd_tui.app import render
from autograd_tui.app.debugger.play import Playback
from autograd_tui.app.debugger.shown import Shown
from autograd_tui.control import StepResult
from autograd_tui.control.nonfinite import explain, first_nonfinite
from autograd_tui.engine.events import Event
from autograd_tui.session import Session


def missed(s: Session) -> str:
    """Why a run with breakpoints ended without stopping: none matched.  A number is a
    node's id (``5`` is ``#5``): a module path that is one (``nn.Sequential``'s ``0``)
    is asked for as ``module=0``."""
    said = "; ".join(b.describe() for b in s.breakpoints)
    text = f"the run ended: no event matched a breakpoint ({said})"
    paths = {m.get("module") for m in s.state_at(s.count()).node_meta.values()}
    nums = [str(b.node) for b in s.breakpoints
            if isinstance(b.node, str) and b.node.strip().isdigit() and b.node.strip() in paths]
    if nums:
        text += f"; {nums[0]} is node #{nums[0]}: the module {nums[0]} is module={nums[0]}"
    return text


def matched(s: Session, e: Event) -> str:
    """The breakpoints that ``e`` matches, as the dialog lists them."""
    state = s.state_at(s.count())
    names = {n: info.name for n, info in state.nodes.items()}
    hit = [b.describe() for b in s.breakpoints if b.matcher(names, state.node_meta)(e)]
    return "; ".join(hit) or "a breakpoint"


class Driver:
    """The engine keys over what ``shown`` shows: a member of the debugger screen."""

    def __init__(self, shown: Shown, playback: Playback) -> None:
        self.shown = shown
        self.playback = playback
        # Not an exclusive worker: cancelling one that has not started yet dropped key
        # presses (n pressed quickly stepped fewer times).  This lock makes the requests
        # run one at a time.
        self._lock = threading.Lock()
        self.running = False  # space's run is under way (set on the UI thread)
        self._stepped_thread = False  # the last request stepped one thread (1-9)
        self._moving = False  # the last request was a move's (run_to)
        self._running = False  # the last request was space's or c's run
        self.pausing = False  # P was pressed: the next 1-9 pauses (or resumes) that thread
        self.until: Callable[[Event], bool] | None = None  # run_to's predicate, and its words
        self.until_what = ""

    # --- the keys (on the UI thread) ------------------------------------------------------
    def live(self, *, forward_in_replay: bool = False) -> Session | None:
        """The live session, or None: in a replay there is no engine to drive, so ``n``
        walks the recording and the other engine keys say which keys do."""
        v = self.shown
        s = v.session
        if s is None:
            return None
        if not s.live:
            if forward_in_replay:
                if v.cursor < v.seen:  # as right does
                    v.show_event(v.cursor + 1)
            else:
                v.notify("replay: space plays; left/right/home/end/g and / walk it",
                         timeout=3)
            return None
        return s

    def step(self) -> None:
        s = self.live(forward_in_replay=True)
        if s is None:
            return
        if s.finished:
            self.say_finished(s)
            return
        self._follow_engine()
        self.shown.drive("step")

    def step_thread(self, k: int) -> None:
        """1-9: step thread k; after P, pause or resume it."""
        pausing, self.pausing = self.pausing, False
        s = self.live()
        if s is None:
            return
        names = [r[0] for r in render.threads_rows(s.state_at(self.shown.seen),
                                                   s.thread_states())]
        if not 1 <= k <= len(names):
            self.shown.notify(f"there is no thread {k} (threads 1..{len(names)})",
                              severity="warning")
            return
        if pausing:
            self.toggle_pause(names[k - 1])
            return
        self._follow_engine()
        self.shown.drive("thread", names[k - 1])

    def pause_prefix(self) -> None:
        """P: the next 1-9 pauses or resumes that thread (instead of stepping it)."""
        if self.live() is not None:
            self.pausing = True
            self.shown.notify("P: press a thread's number (1-9) to pause or resume it",
                              timeout=3)

    def toggle_run(self) -> None:
        """Run or pause the engine; play or pause the history in a replay, or when the
        cursor is behind the newest event (and the engine is not running)."""
        v = self.shown
        s = v.session
        if s is None:
            return
        if not self.running and (self.playback.playing or not s.live or v.cursor < v.seen):
            self.playback.toggle()
            return
        if self.running:
            s.stop()
            return
        if s.finished:
            self.say_finished(s)
            return
        self._start_run(s)

    def continue_(self) -> None:
        s = self.live()
        if s is None:
            return
        if s.finished:
            self.say_finished(s)
            return
        if not s.breakpoints:
            self.shown.notify("no breakpoints set (b): running to the end", timeout=3)
        self._start_run(s)

    def toggle_pause(self, name: str | None) -> None:
        """Pause or resume thread ``name`` (the one selected in the threads pane)."""
        s = self.live()
        if s is None or name is None:
            return
        paused = s.toggle_pause(name)
        self.shown.notify(f"{name} {'paused' if paused else 'resumed'}", timeout=2)
        self.shown.redraw()

    def run_to(self, until: Callable[[Event], bool], what: str) -> None:
        """Run the engine until ``until`` holds (a move: ``moves.py``), a breakpoint or
        the end; space stops it."""
        s = self.live()
        if s is None:
            return
        self.until, self.until_what = until, what
        self._start_run(s, "until")

    def _start_run(self, s: Session, what: str = "run") -> None:
        # Set on the UI thread, so that space pressed again before the worker starts stops it.
        s.arm()
        self.running = True
        self._follow_engine()
        self.shown.drive(what)

    def _follow_engine(self) -> None:
        self.playback.stop()  # the view follows the engine again, from the newest event
        self.shown.show_event(self.shown.seen)  # now: a run that adds no event moved it too

    def say_finished(self, s: Session) -> None:
        self.shown.notify(f"the run has ended ({s.status}); r restarts, s picks another "
                          "scenario", timeout=4)

    # --- the requests (on the worker thread) ----------------------------------------------
    def request(self, s: Session, what: str, thread: str | None = None) -> StepResult | None:
        """Blocking: ``step``, ``thread`` (step ``thread``), ``schedule`` (the policy's
        steps), ``run`` (to a breakpoint or the end) or ``until`` (``run_to``).  None if
        ``s`` is no longer the shown session (restarted, switched or quit while the request
        waited) or finished."""
        with self._lock:
            if self.shown.session is not s or s.finished:
                if what in ("run", "until") and self.shown.session is s:
                    self.running = False
                return None
            self._stepped_thread = what == "thread"
            self._moving = what == "until"
            self._running = what == "run"
            try:
                if what == "step":
                    return s.step_any()
                if what == "thread":
                    assert thread is not None
                    return s.step_thread(thread)
                if what == "schedule":
                    return s.run_schedule()
                return s.run_until_breakpoint(
                    arm=False, until=self.until if what == "until" else None)
            finally:
                if what in ("run", "until"):
                    self.running = False

    def done(self, r: StepResult) -> None:
        """Back on the UI thread: say what the request ended in."""
        v = self.shown
        s = v.session
        if r.status == "breakpoint":
            found = [f for e in r.events if (f := first_nonfinite(e)) is not None]
            if found and s is not None and any(b.nonfinite for b in s.breakpoints):
                v.notify(explain(found[0], s.history), title="breakpoint", timeout=15)
            elif self._moving and s is not None and r.events:
                # a breakpoint on a module or a node matches each of its events: the move
                # stops at each, so say which breakpoint, and how to get past it
                which = matched(s, r.events[-1])
                v.notify(f"breakpoint ({which}) at {r.events[-1].kind}, before "
                         f"{self.until_what}; b clears it", timeout=5)
            elif r.events and s is not None:  # which one, unless it is the event's kind
                e = r.events[-1]
                which = matched(s, e)
                said = "" if which in ("a breakpoint", f"kind={e.kind}") else f" ({which})"
                v.notify(f"breakpoint: {e.kind}{said}", timeout=3)
            else:
                v.notify("breakpoint", timeout=3)
        elif r.status == "reached":  # a move (n, m, u) got where it went
            v.notify(f"at {self.until_what}", timeout=2)
        elif self._moving and s is not None and s.status == "completed":
            # n on the last node (or m, u past the end): the run ended, the key did not
            # find what it went to; an error or a deadlock says so itself
            v.notify(f"the run ended before {self.until_what}; r restarts", timeout=4)
        elif self._running and s is not None and s.status == "completed" and s.breakpoints:
            v.notify(missed(s), timeout=8)
        elif r.status == "paused" and r.report is not None:
            v.notify(r.report.explanation, title="paused", timeout=6)
        elif r.status == "stuck" and r.report is not None:
            v.notify(r.report.explanation, title="stuck", severity="error", timeout=10)
        elif r.status == "blocked" and r.thread and self._stepped_thread:
            v.notify(f"{r.thread} is blocked: it cannot move until another thread does",
                     timeout=3)
