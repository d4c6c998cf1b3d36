"""``serve`` accepts only its own page, and a viewer cannot write the teacher's files
(issue 31; docs/security.md, "What serve refuses").

Each server runs in a process group of its own on 127.0.0.1 and a free port, is bounded
in time, and is stopped (the group, SIGTERM then SIGKILL) whatever the test does.  The
websocket is textual-serve's own protocol (``["stdin", keys]`` in, the app's output and
``["deliver_file_start", key]`` out), spoken with aiohttp's client as a page would; the
browser test drives Debian's Chromium headless as tests/app/test_serve.py does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pilot import press, run_app, settle
from test_app import App
from test_serve import (
    CHROMIUM,
    CLI,
    KEEP_TERMINAL,
    Cdp,
    free_port,
    needs_chromium,
    process_group,
    shown,
    wait_group_gone,
)
from textual.pilot import Pilot
from textual.widgets import Input

from autograd_tui.app.screens import ConfirmScreen
from autograd_tui.app.web_export import safe_name, target_in
from autograd_tui.commands.serve_guard import Guard, choose_token, host_names

pytestmark = pytest.mark.timeout(180)
PDF = b"%PDF-1.4 the teacher's own file\n"


@contextmanager
def server(tmp_path: Path, *args: str) -> Iterator[tuple[int, Any]]:
    """``serve`` on 127.0.0.1 and a free port, up and answering; stopped at the end."""
    port = free_port()
    log = tmp_path / f"server-{port}.log"
    with process_group([CLI, "serve", "linear-relu", "--port", str(port), *args], log) as p:
        deadline = time.monotonic() + 60
        while "serving the app" not in log.read_text():
            assert p.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield port, p
    assert wait_group_gone(p.pid, 10)


def run(coro: Any, timeout: float = 90) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def get(port: int, path: str = "/", host: str | None = None,
              cookies: dict[str, str] | None = None) -> tuple[int, str, Any]:
    headers = {"Host": host} if host else {}
    async with aiohttp.ClientSession(cookies=cookies) as http:
        async with http.get(f"http://127.0.0.1:{port}{path}", headers=headers) as r:
            return r.status, await r.text(), r.cookies


async def ws_status(port: int, origin: str | None, cookies: dict[str, str] | None = None
                    ) -> int:
    """101 when the websocket opens (closed again at once), else the refusal's status."""
    headers = {"Origin": origin} if origin else {}
    async with aiohttp.ClientSession(cookies=cookies) as http:
        try:
            async with http.ws_connect(f"http://127.0.0.1:{port}/ws?width=100&height=30",
                                       headers=headers):
                return 101
        except aiohttp.WSServerHandshakeError as e:
            return e.status


# --- the checks, without a server ------------------------------------------------------------
def test_a_token_is_made_for_an_address_off_this_machine() -> None:
    assert choose_token("127.0.0.1", None, False) is None
    assert choose_token("localhost", None, False) is None
    made = choose_token("0.0.0.0", None, False)
    assert made is not None and len(made) >= 20 and made != choose_token("::", None, False)
    assert choose_token("0.0.0.0", None, True) is None
    assert choose_token("127.0.0.1", "my-class-token", False) == "my-class-token"


def test_hosts_a_wildcard_server_answers_to() -> None:
    g = Guard("0.0.0.0", 8000, host_names("0.0.0.0", ["class-pc.lan"]))
    for ok in ("127.0.0.1:8000", "192.168.1.20:8000", "[fe80::1]:8000", "class-pc.lan:8000"):
        assert g.host_refusal(ok) is None, ok
    for bad in ("evil.example:8000", "192.168.1.20:8001", "192.168.1.20", "[::1]"):
        assert g.host_refusal(bad) is not None, bad


def test_an_exported_name_stays_a_plain_name_in_the_folder(tmp_path: Path) -> None:
    assert safe_name("../../victim.pdf") == "victim.pdf"
    assert safe_name("/etc/passwd") == "passwd.svg"
    assert safe_name("..\\x y?.png") == "x_y_.png"
    assert safe_name(".bashrc") == "bashrc.svg"
    assert safe_name("") == "export.svg"
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "link.svg").symlink_to(tmp_path / "victim.svg")
    assert target_in(str(tmp_path / "out"), "../x.dot") == (tmp_path / "out" / "x.dot").resolve()
    from autograd_tui.export.render import ExportError
    with pytest.raises(ExportError, match="link out of it"):
        target_in(str(tmp_path / "out"), "link.svg")


# --- a server ----------------------------------------------------------------------------------
def test_a_websocket_from_another_origin_is_refused(tmp_path: Path) -> None:
    with server(tmp_path) as (port, _):
        own = f"http://127.0.0.1:{port}"
        assert run(ws_status(port, "http://evil.example")) == 403
        assert run(ws_status(port, f"http://localhost:{port}")) == 403  # not the Host used
        assert run(ws_status(port, None)) == 403
        assert run(ws_status(port, own)) == 101
    log = (tmp_path / f"server-{port}.log").read_text()
    assert "Traceback" not in log, log


def test_a_request_for_another_host_is_refused(tmp_path: Path) -> None:
    with server(tmp_path, "--allow-host", "class-pc.lan") as (port, _):
        status, text, _ = run(get(port, host=f"rebind.evil.example:{port}"))
        assert status == 403
        assert text.startswith("autograd-tui serve: this server answers to ") and \
            "--allow-host" in text, text
        assert run(get(port, host=f"127.0.0.1:{port + 1}"))[0] == 403
        assert run(get(port, host=f"localhost:{port}"))[0] == 200
        status, page, _ = run(get(port, host=f"class-pc.lan:{port}"))
        assert status == 200 and f'"ws://class-pc.lan:{port}/ws"' in page


def test_the_token_is_needed_for_the_page_and_its_websocket(tmp_path: Path) -> None:
    token = "class-token-1234"
    with server(tmp_path, "--token", token) as (port, _):
        log = (tmp_path / f"server-{port}.log").read_text()
        assert f"at http://127.0.0.1:{port}/?token={token}" in log
        for path in ("/", "/?token=wrong-token-xyz"):
            status, text, _ = run(get(port, path))
            assert status == 403 and "needs its link with the token" in text, text
        status, _, cookies = run(get(port, f"/?token={token}"))
        assert status == 200
        cookie = cookies[f"autograd_tui_token_{port}"]
        assert cookie.value == token and cookie["httponly"] and cookie["samesite"] == "Strict"
        own = f"http://127.0.0.1:{port}"
        assert run(ws_status(port, own)) == 403
        assert run(ws_status(port, own, {cookie.key: "wrong"})) == 403
        assert run(ws_status(port, own, {cookie.key: token})) == 101
        assert run(ws_status(port, "http://evil.example", {cookie.key: token})) == 403


async def hold(port: int, opened: asyncio.Event, release: asyncio.Event) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(f"http://127.0.0.1:{port}/ws?width=100&height=30",
                                   headers={"Origin": f"http://127.0.0.1:{port}"}) as ws:
            await ws.receive(timeout=30)  # the app is running
            opened.set()
            await release.wait()


def test_beyond_max_clients_a_viewer_is_refused_with_a_message(tmp_path: Path) -> None:
    async def main(port: int) -> tuple[Any, ...]:
        opened, release = asyncio.Event(), asyncio.Event()
        first = asyncio.create_task(hold(port, opened, release))
        await asyncio.wait_for(opened.wait(), 40)
        page = await get(port)
        second = await ws_status(port, f"http://127.0.0.1:{port}")
        release.set()
        await first
        return page, second

    with server(tmp_path, "--max-clients", "1") as (port, _):
        (status, text, _), second = run(main(port))
        assert status == 503 and second == 503
        assert "has 1 viewers already, its limit (--max-clients 1)" in text, text
        deadline = time.monotonic() + 20  # the first one gone, the next is let in
        while run(get(port))[0] != 200:
            assert time.monotonic() < deadline
            time.sleep(0.2)


async def export_over_websocket(port: int, typed: str) -> tuple[list[Any], bytes | None]:
    """Open an app as a page does, type ``e``, ``typed``, enter; the text messages the
    server sent and the download's bytes (None if none was offered)."""
    origin = f"http://127.0.0.1:{port}"
    texts: list[Any] = []
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(f"{origin}/ws?width=120&height=40",
                                   headers={"Origin": origin}) as ws:
            output = b""

            async def read_until(done: Any, timeout: float) -> None:
                nonlocal output
                deadline = time.monotonic() + timeout
                while not done():
                    left = deadline - time.monotonic()
                    assert left > 0, output[-2000:]
                    try:
                        msg = await ws.receive(timeout=left)
                    except TimeoutError:
                        continue
                    if msg.type == aiohttp.WSMsgType.BINARY:
                        output += msg.data
                    elif msg.type == aiohttp.WSMsgType.TEXT:
                        texts.append(msg.json())
                    else:
                        raise AssertionError(f"the websocket closed: {msg}")

            await read_until(lambda: b"ready queues" in output, 60)
            await asyncio.sleep(1)
            await ws.send_json(["stdin", "e"])
            await read_until(lambda: b"Export the shown state" in output, 20)
            for keys in ("\x15", typed, "\r"):  # ctrl-u clears the line; the name; enter
                await ws.send_json(["stdin", keys])
                await asyncio.sleep(0.5)
            await read_until(lambda: any(t[0] == "deliver_file_start" for t in texts), 30)
            key = next(t[1] for t in texts if t[0] == "deliver_file_start")
            async with http.get(f"{origin}/download/{key}") as r:
                assert r.status == 200, await r.text()
                data = await r.read()
    return texts, data


def test_a_viewer_cannot_write_a_file_on_the_server(tmp_path: Path) -> None:
    victim = tmp_path / "report.pdf"
    victim.write_bytes(PDF)
    with server(tmp_path) as (port, _):
        _, data = run(export_over_websocket(port, str(victim)))
    assert victim.read_bytes() == PDF
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("server-")) \
        == ["report.pdf"]
    assert data is not None and data.startswith(b"%PDF")  # it went to the viewer instead


def test_with_export_dir_a_viewer_writes_only_into_it(tmp_path: Path) -> None:
    victim = tmp_path / "report.pdf"
    victim.write_bytes(PDF)
    folder = tmp_path / "exports"
    folder.mkdir()

    async def main(port: int) -> list[Any]:
        origin = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(f"{origin}/ws?width=120&height=40",
                                       headers={"Origin": origin}) as ws:
                output = b""
                deadline = time.monotonic() + 60
                while b"ready queues" not in output:
                    assert time.monotonic() < deadline, output[-2000:]
                    msg = await ws.receive(timeout=60)
                    if msg.type == aiohttp.WSMsgType.BINARY:
                        output += msg.data
                await asyncio.sleep(1)
                await ws.send_json(["stdin", "e"])
                await asyncio.sleep(1)
                for keys in ("\x15", "../report.pdf", "\r"):
                    await ws.send_json(["stdin", keys])
                    await asyncio.sleep(0.5)
                deadline = time.monotonic() + 30
                while not (folder / "report.pdf").exists():
                    assert time.monotonic() < deadline, output[-2000:]
                    await asyncio.sleep(0.2)
        return []

    with server(tmp_path, "--export-dir", str(folder)) as (port, _):
        run(main(port))
    assert victim.read_bytes() == PDF
    assert (folder / "report.pdf").read_bytes().startswith(b"%PDF")


# --- a real browser ----------------------------------------------------------------------------
async def browser_export(devtools_port: int, url: str, typed: str, downloads: Path) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
        async with http.get(f"http://127.0.0.1:{devtools_port}/json/list") as r:
            page = next(t for t in await r.json() if t["type"] == "page")
        async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            cdp = Cdp(ws)
            await cdp.call("Browser.setDownloadBehavior", behavior="allow",
                           downloadPath=str(downloads))
            await cdp.call("Emulation.setDeviceMetricsOverride", width=1400, height=900,
                           deviceScaleFactor=1, mobile=False)
            await cdp.call("Page.enable")
            await cdp.call("Page.addScriptToEvaluateOnNewDocument", source=KEEP_TERMINAL)
            await cdp.call("Page.navigate", url=url)
            await cdp.wait_screen(lambda s: shown(s) is not None
                                  and any("ready queues" in r for r in s), "the app")
            await cdp.evaluate("window.__xterm.focus()")
            await cdp.press("e")
            await cdp.wait_screen(lambda s: any("Export the shown state" in r for r in s),
                                  "the export dialog")
            await cdp.call("Input.dispatchKeyEvent", type="keyDown", key="u", code="KeyU",
                           modifiers=2, windowsVirtualKeyCode=85)
            await cdp.call("Input.dispatchKeyEvent", type="keyUp", key="u", code="KeyU",
                           modifiers=2, windowsVirtualKeyCode=85)
            await cdp.call("Input.insertText", text=typed)
            await cdp.call("Input.dispatchKeyEvent", type="keyDown", key="Enter",
                           code="Enter", text="\r", windowsVirtualKeyCode=13)
            await cdp.call("Input.dispatchKeyEvent", type="keyUp", key="Enter", code="Enter",
                           windowsVirtualKeyCode=13)
            deadline = time.monotonic() + 40
            while not [p for p in downloads.iterdir() if p.suffix == ".pdf"]:
                assert time.monotonic() < deadline, (
                    "no download arrived; the screen:\n" + "\n".join(await cdp.screen()))
                await asyncio.sleep(0.2)


@needs_chromium
def test_in_a_browser_export_is_a_download_not_a_file_on_the_server(tmp_path: Path) -> None:
    victim = tmp_path / "report.pdf"
    victim.write_bytes(PDF)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    profile = tmp_path / "chromium"
    assert CHROMIUM is not None
    with server(tmp_path) as (port, _):
        argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", f"--user-data-dir={profile}",
                "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
                "about:blank"]
        with process_group(argv, tmp_path / "chromium.log"):
            port_file = profile / "DevToolsActivePort"
            deadline = time.monotonic() + 60
            while not (port_file.exists() and port_file.read_text().strip()):
                assert time.monotonic() < deadline, (tmp_path / "chromium.log").read_text()
                time.sleep(0.2)
            run(browser_export(int(port_file.read_text().split()[0]),
                               f"http://127.0.0.1:{port}/", str(victim), downloads), 150)
    assert victim.read_bytes() == PDF
    (got,) = [p for p in downloads.iterdir() if p.suffix == ".pdf"]
    assert got.name == "report.pdf" and got.read_bytes().startswith(b"%PDF")


# --- the terminal app ----------------------------------------------------------------------------
def test_the_terminal_app_asks_before_replacing_a_file(tmp_path: Path) -> None:
    app = App("linear-relu")
    out = tmp_path / "mine.dot"
    out.write_text("keep me\n")

    async def export(pilot: Pilot[Any]) -> None:
        await press(pilot, "e")
        app.screen.query_one("#export-path", Input).value = str(out)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert "mine.dot exists: replace it?" in app.screen.question

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, *["full_stop"] * 12)
        await export(pilot)
        await pilot.press("enter")  # the focused button is Cancel
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        assert out.read_text() == "keep me\n"
        await export(pilot)
        await pilot.press("n")  # the dialog's No
        await settle(pilot)
        assert out.read_text() == "keep me\n"
        await export(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert "SumBackward0" in out.read_text(), app.notes
        assert app.said(f"wrote {out}")

    run_app(app, script)
