"""The app's side of ``autograd-tui serve``: ending with its server, and ``--follow``.

The server (``commands/serve_apps.py``) starts each browser's app with a few variables:

- ``AUTOGRAD_TUI_SERVE_PID``: the server's process id.  Under it the app honours SIGTERM
  (it quits as ``q`` does, and exits anyway 3 s later if quitting hangs), and quits when
  its parent is no longer the server (the server died; on Linux the kernel also sends
  SIGTERM then: ``PR_SET_PDEATHSIG``).
- ``AUTOGRAD_TUI_FOLLOW`` (a folder) and ``AUTOGRAD_TUI_CLIENT`` (this app's number), with
  ``serve --follow``: the folder's ``leader`` file names the app that leads (the oldest
  connection), which writes its shown event's index into ``position``; every other app
  polls it and shows that event, stepping its own run up to it.  A follower that moves on
  its own (any key that changes the shown event) steps away; ``L`` follows again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path
from typing import Any

SERVE_PID = "AUTOGRAD_TUI_SERVE_PID"
FOLLOW_DIR = "AUTOGRAD_TUI_FOLLOW"
CLIENT = "AUTOGRAD_TUI_CLIENT"
#: seconds between looks at the leader's position (and at the parent)
POLL = 0.1
#: seconds a SIGTERM waits for the app to quit before the process exits regardless
TERM_GRACE = 3.0


def read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def write_int(path: Path, value: int) -> None:
    """Atomically (a reader never sees half a number)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(f"{value}\n")
    os.replace(tmp, path)


class ServeLink:
    """A member of the debugger screen; does nothing outside ``serve``."""

    def __init__(self, shown: Any) -> None:
        self.shown = shown
        env = os.environ
        self.server = int(env[SERVE_PID]) if env.get(SERVE_PID, "").isdigit() else None
        folder = env.get(FOLLOW_DIR)
        self.folder = Path(folder) if folder else None
        self.me = int(env.get(CLIENT, "0") or 0)
        self.following = True
        self.placed: int | None = None  # the leader's event this app was last moved to
        self.published: int | None = None
        self.asked = -2  # the newest event when this app last stepped toward the leader

    @property
    def active(self) -> bool:
        return self.server is not None

    def start(self) -> None:
        if self.server is None:
            return
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self.terminate)
        except (RuntimeError, NotImplementedError, ValueError):
            pass
        self.shown.set_interval(POLL, self.tick)

    def terminate(self) -> None:
        """SIGTERM: quit as ``q`` does; exit regardless after a grace period."""
        timer = threading.Timer(TERM_GRACE, os._exit, (143,))
        timer.daemon = True
        timer.start()
        self.shown.app.call_later(self.shown.action_quit)

    @property
    def leads(self) -> bool:
        return self.folder is not None and read_int(self.folder / "leader") == self.me

    def tick(self) -> None:
        if self.server is not None and os.getppid() != self.server:
            self.terminate()  # the server is gone
            return
        if self.folder is None or self.shown.session is None:
            return
        v = self.shown
        if self.leads:
            if v.cursor != self.published:
                write_int(self.folder / "position", v.cursor)
                self.published = v.cursor
            return
        self.published = None
        k = read_int(self.folder / "position")
        if k is None or not self.following:
            return
        if self.placed == k and v.seen >= k and v.cursor != k:
            self.following = False  # the person moved: their own way now
            v.notify("stepped away from the leader: L follows again", timeout=4)
            return
        self.placed = k
        if v.seen < self.asked:  # a new run (r, s)
            self.asked = -2
        if k <= v.seen:
            if v.cursor != k:
                v.show_event(k)
        elif (v.session.live and not v.session.finished and not v.driver.running
              and v.seen > self.asked):
            self.asked = v.seen
            v.driver.step()  # one event nearer; the next tick takes the next

    def follow_again(self) -> None:
        """``L``: show the leader's event again, and follow it."""
        if self.folder is None:
            self.shown.notify("L follows the leader under `autograd-tui serve --follow`",
                              timeout=3)
            return
        if self.leads:
            self.shown.notify("this app leads: the others follow it", timeout=3)
            return
        self.following, self.placed = True, None
        self.tick()
