"""``serve`` owns its apps (none outlives its page or the server), and ``serve --follow``.

Every server here carries a unique marker in its environment, which its apps inherit; a
process left behind is found by scanning ``/proc/*/environ`` for it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_serve import (
    CHROMIUM,
    CLI,
    KEEP_TERMINAL,
    Cdp,
    free_port,
    needs_chromium,
    process_group,
    shown,
    wait_http,
)

pytestmark = pytest.mark.timeout(180)


def marked(marker: str) -> list[int]:
    """The processes whose environment carries ``marker``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/environ").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


def wait_none(marker: str, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def browser(tmp_path: Path) -> tuple[list[str], Path]:
    profile = tmp_path / "chromium"
    return [CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
            "--no-first-run", f"--user-data-dir={profile}", "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1", "about:blank"], profile


def devtools_port(profile: Path) -> int:
    f = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 60
    while not (f.exists() and f.read_text().strip()):
        assert time.monotonic() < deadline, "Chromium did not start"
        time.sleep(0.2)
    return int(f.read_text().split()[0])


async def open_page(http: Any, port: int, url: str) -> tuple[Any, Cdp]:
    """A new tab on ``url``, once the app's screen is up."""
    async with http.put(f"http://127.0.0.1:{port}/json/new?about:blank") as r:
        target = await r.json()
    ws = await http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0)
    cdp = Cdp(ws)
    await cdp.call("Emulation.setDeviceMetricsOverride", width=1400, height=900,
                   deviceScaleFactor=1, mobile=False)
    await cdp.call("Page.enable")
    await cdp.call("Page.addScriptToEvaluateOnNewDocument", source=KEEP_TERMINAL)
    await cdp.call("Page.navigate", url=url)
    await cdp.wait_screen(lambda s: shown(s) is not None, "the app's screen")
    await cdp.evaluate("window.__xterm.focus()")
    cdp.target = target["id"]
    return ws, cdp


def serve(tmp_path: Path, *extra: str) -> tuple[list[str], str, str]:
    port = free_port()
    return ([CLI, "serve", "linear-relu", "--port", str(port), *extra],
            f"http://127.0.0.1:{port}/", f"autograd-tui-test-{uuid.uuid4().hex}")


@needs_chromium
@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "browser killed"])
def test_no_app_outlives_its_page_or_the_server(tmp_path: Path, how: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    argv, url, marker = serve(tmp_path)
    monkeypatch.setenv("AUTOGRAD_TUI_TEST_MARKER", marker)
    with process_group(argv, tmp_path / "server.log") as server:
        monkeypatch.delenv("AUTOGRAD_TUI_TEST_MARKER")
        wait_http(url, 60)
        argv_b, profile = browser(tmp_path)
        with process_group(argv_b, tmp_path / "chromium.log") as chromium:
            port = devtools_port(profile)

            async def go() -> None:
                import aiohttp
                async with aiohttp.ClientSession() as http:
                    ws, cdp = await open_page(http, port, url)
                    assert len(marked(marker)) == 2  # the server and the page's app
                    if how == "browser killed":
                        os.killpg(chromium.pid, signal.SIGKILL)
                    else:
                        await ws.close()  # the tab closes
                        async with http.get(f"http://127.0.0.1:{port}/json/close/"
                                            f"{cdp.target}") as r:
                            assert r.status == 200
                    await ws.close()

            asyncio.run(asyncio.wait_for(go(), 120))
            left = wait_none(marker, 5)
            assert left == [server.pid], f"the page's app stayed: {left}"
        os.kill(server.pid, signal.SIGINT if how == "SIGINT" else signal.SIGTERM)
        assert wait_none(marker, 5) == [], "the server (or an app) stayed"
        assert server.wait(5) == 0


@needs_chromium
def test_the_server_ends_the_open_apps_when_stopped(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    argv, url, marker = serve(tmp_path)
    monkeypatch.setenv("AUTOGRAD_TUI_TEST_MARKER", marker)
    with process_group(argv, tmp_path / "server.log") as server:
        monkeypatch.delenv("AUTOGRAD_TUI_TEST_MARKER")
        wait_http(url, 60)
        argv_b, profile = browser(tmp_path)
        with process_group(argv_b, tmp_path / "chromium.log"):
            port = devtools_port(profile)

            async def go() -> None:
                import aiohttp
                async with aiohttp.ClientSession() as http:
                    ws, _ = await open_page(http, port, url)
                    assert len(marked(marker)) == 2
                    os.kill(server.pid, signal.SIGKILL)  # the server dies, the page open
                    await ws.close()

            asyncio.run(asyncio.wait_for(go(), 120))
            assert wait_none(marker, 5) == [], "an app outlived its server"


async def at(cdp: Cdp, event: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = shown(await cdp.screen())
        if s is not None and s[0] == event:
            return True
        await asyncio.sleep(0.05)
    return False


@needs_chromium
def test_a_follower_shows_the_leaders_step_and_comes_back_with_L(tmp_path: Path) -> None:
    argv, url, _ = serve(tmp_path, "--follow")
    with process_group(argv, tmp_path / "server.log"):
        wait_http(url, 60)
        argv_b, profile = browser(tmp_path)
        with process_group(argv_b, tmp_path / "chromium.log"):
            port = devtools_port(profile)

            async def go() -> None:
                import aiohttp
                async with aiohttp.ClientSession() as http:
                    ws1, leader = await open_page(http, port, url)
                    ws2, follower = await open_page(http, port, url)
                    for _ in range(4):
                        now = shown(await leader.screen())
                        assert now is not None
                        await leader.press("full_stop")
                        assert await at(leader, now[1] + 1, 30)
                        assert await at(follower, now[1] + 1, 1.0), (
                            "the follower did not reach the leader's event within 1 s:\n"
                            + "\n".join(await follower.screen()))
                    mine = shown(await follower.screen())
                    assert mine is not None
                    await follower.press("full_stop")  # away, on its own
                    assert await at(follower, mine[0] + 1, 30)
                    await asyncio.sleep(0.5)  # its app sees it stepped away
                    await leader.press("full_stop")
                    want = mine[0] + 1
                    assert await at(leader, want, 30)
                    await leader.press("full_stop")
                    assert await at(leader, want + 1, 30)
                    assert not await at(follower, want + 1, 1.0)  # stayed away
                    await follower.press("L")
                    assert await at(follower, want + 1, 2.0), "L did not follow again"
                    await ws1.close()
                    await ws2.close()

            asyncio.run(asyncio.wait_for(go(), 150))
