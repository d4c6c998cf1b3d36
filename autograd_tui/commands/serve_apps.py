"""``serve`` owns the apps it starts: one per connection, ended with it, and all of them
ended with the server.

textual-serve starts each app through the shell and, when its page closes, asks it to
quit and waits, unbounded.  Here an app is started directly (no shell between: the app's
parent is the server), with SIGINT ignored (a terminal's Ctrl-C goes to the server, which
ends the apps in order), with ``PR_SET_PDEATHSIG`` on Linux (the kernel sends it SIGTERM
when the server dies, even by SIGKILL; the app also polls its parent:
``app/serve_link.py``), and stopping it escalates: the quit message, then SIGTERM after
``QUIT_GRACE`` seconds, then SIGKILL after ``TERM_GRACE`` more.

Under ``--follow`` every app gets its number and the folder where the leader (the oldest
connection still open) publishes its shown event (``app/serve_link.py``).
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

from textual_serve.app_service import AppService

from autograd_tui.app.serve_link import CLIENT, FOLLOW_DIR, SERVE_PID, write_int

QUIT_GRACE = 2.0
TERM_GRACE = 1.5
PR_SET_PDEATHSIG = 1


def _child_setup(server: int) -> Any:
    libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None

    def setup() -> None:  # in the child, between fork and exec
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if libc is not None:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != server:  # the server died before the line above
            os._exit(1)

    return setup


class OwnedApp(AppService):
    """textual-serve's ``AppService``: no shell, our variables, a bounded stop."""

    extra_env: dict[str, str] = {}

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        env = super()._build_environment(width, height)
        env[SERVE_PID] = str(os.getpid())
        env.update(self.extra_env)
        return env

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Any:
        self._process = process = await asyncio.create_subprocess_exec(
            *shlex.split(self.command), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=self._build_environment(width, height),
            preexec_fn=_child_setup(os.getpid()))
        self._stdin = process.stdin
        return process

    async def stop(self) -> None:
        task, process = self._task, self._process
        if task is None:
            return
        await self._download_manager.cancel_app_downloads(app_service_id=self.app_service_id)
        await self.send_meta({"type": "quit"})
        for sig, wait in ((signal.SIGTERM, QUIT_GRACE), (signal.SIGKILL, TERM_GRACE)):
            if process is None or await _ended(process, wait):
                break
            try:
                process.send_signal(sig)
            except ProcessLookupError:
                break
        if process is not None and process.returncode is None:
            await _ended(process, 5.0)
        await task
        self._task = None


async def _ended(process: Any, timeout: float) -> bool:
    try:
        await asyncio.wait_for(asyncio.shield(process.wait()), timeout)
    except TimeoutError:
        return False
    return True


class Follow:
    """``--follow``: the folder, the apps' numbers, and who leads."""

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)
        self.next = 1
        self.open: list[int] = []

    def join(self) -> dict[str, str]:
        n, self.next = self.next, self.next + 1
        self.open.append(n)
        self._lead()
        return {FOLLOW_DIR: str(self.folder), CLIENT: str(n)}

    def leave(self, env: dict[str, str]) -> None:
        n = int(env[CLIENT])
        if n in self.open:
            self.open.remove(n)
        self._lead()

    def _lead(self) -> None:
        write_int(self.folder / "leader", self.open[0] if self.open else 0)


async def handle_websocket(server: Any, request: Any, follow: Follow | None,
                           apps: set[OwnedApp]) -> Any:
    """textual-serve's ``Server.handle_websocket`` with an ``OwnedApp`` (and, under
    ``--follow``, its number)."""
    from aiohttp import web
    from textual_serve.server import log, to_int

    websocket = web.WebSocketResponse(heartbeat=15)
    width = to_int(request.query.get("width", "80"), 80)
    height = to_int(request.query.get("height", "24"), 24)
    app: OwnedApp | None = None
    env = follow.join() if follow is not None else {}
    try:
        await websocket.prepare(request)
        app = OwnedApp(server.command, write_bytes=websocket.send_bytes,
                       write_str=websocket.send_str, close=websocket.close,
                       download_manager=server.download_manager, debug=server.debug)
        app.extra_env = env
        apps.add(app)
        await app.start(width, height)
        try:
            await server._process_messages(websocket, app)
        finally:
            await app.stop()
    except asyncio.CancelledError:
        await websocket.close()
    except Exception as error:
        log.exception(error)
    finally:
        if app is not None:
            await app.stop()
            apps.discard(app)
        if follow is not None:
            follow.leave(env)
    return websocket


def kill_left(apps: set[OwnedApp]) -> None:
    """After the server stopped: SIGKILL to any app still running (none should be)."""
    for app in list(apps):
        p = app._process
        if p is not None and p.returncode is None:
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
