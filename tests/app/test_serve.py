"""``autograd-tui serve``: the app in a real browser.

The server runs in a subprocess on 127.0.0.1 and a free port; Debian's Chromium, headless,
opens the page and is driven over the DevTools protocol (a websocket: aiohttp's client,
which textual-serve brings).  The page draws the terminal with xterm.js on a canvas, so
the text is read from xterm's own buffer: a script added before the page's scripts keeps
the ``Terminal`` that textual.js makes (it is not exposed otherwise).  Keys go in as real
key events.  Skipped when Chromium is not installed (CI installs it).

With ``AUTOGRAD_TUI_SERVE_SCREENSHOT=PATH`` the browser test also steps to the moment of
docs/tui.md's walkthrough step 5 (two tasks in the ready queue) and saves a screenshot
there: that is how docs/images/serve-linear-relu.png was made.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pilot import shown_in

from autograd_tui.commands import build_parser
from autograd_tui.commands.serve import app_command

pytestmark = pytest.mark.timeout(240)

CLI = str(Path(sys.executable).parent / "autograd-tui")
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser",
                                                "google-chrome")) if p), None)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed: the browser test needs it "
                             "(apt-get install chromium; CI installs it)")

#: Added before the page's own scripts: textual.js assigns ``this.terminal = new
#: Terminal(...)``; a setter on Object.prototype sees that assignment, keeps the terminal
#: in ``window.__xterm`` and turns the property back into a plain one.
KEEP_TERMINAL = """
Object.defineProperty(Object.prototype, "terminal", {configurable: true, set(v) {
  Object.defineProperty(this, "terminal",
                        {value: v, writable: true, configurable: true, enumerable: true});
  if (v && v.buffer && typeof v.write === "function") window.__xterm = v;
}});
"""
#: The terminal's screen, one string a row (null before the terminal exists).
SCREEN = """(() => {
  const t = window.__xterm;
  if (!t) return null;
  const b = t.buffer.active, rows = [];
  for (let i = 0; i < t.rows; i++) {
    const line = b.getLine(b.viewportY + i);
    rows.push(line ? line.translateToString(true) : "");
  }
  return rows;
})()"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_alive(pgid: int) -> bool:
    """Some process of the group is alive.  A zombie is not: the group's leader is our own
    child, reaped only by ``p.wait``, and counting it made every stop wait its whole grace
    period (10 s, twice)."""
    proc = Path("/proc")
    if proc.is_dir():
        for stat in proc.glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # gone while we looked
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user took the number: ours are gone
        return False
    return True


def wait_group_gone(pgid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not group_alive(pgid):
            return True
        time.sleep(0.1)
    return not group_alive(pgid)


def _die_with_the_test() -> Any:
    """For Popen: the child gets SIGKILL when this test process dies, even killed (the
    server then ends its apps: they get SIGTERM when it dies)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()

    def setup() -> None:
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)

    return setup


@contextmanager
def process_group(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``argv`` in a session of its own (its children too: the apps, Chromium's helpers);
    at the end the whole group is stopped, SIGTERM then SIGKILL, and waited for."""
    with open(log, "wb") as out:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True,
                             preexec_fn=_die_with_the_test())
    try:
        yield p
    finally:
        if group_alive(p.pid):
            os.killpg(p.pid, signal.SIGTERM)
            if not wait_group_gone(p.pid, 10):
                os.killpg(p.pid, signal.SIGKILL)
                wait_group_gone(p.pid, 10)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def wait_http(url: str, timeout: float) -> None:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer in {timeout:.0f} s")


def pane(screen: list[str], title: str) -> list[str]:
    """The rows inside the side pane whose border title is ``title``."""
    top = next((r for r, row in enumerate(screen) if f"─ {title}" in row), None)
    if top is None:
        raise AssertionError(f"no pane {title!r} on the screen:\n" + "\n".join(screen))
    left = screen[top].rfind("╭", 0, screen[top].find(f"─ {title}"))
    rows = []
    for row in screen[top + 1:]:
        cell = row[left:]
        if cell.startswith("╰"):
            break
        rows.append(cell.strip("│").strip())
    return rows


class Cdp:
    """The DevTools protocol on one page's websocket: a call waits (bounded) for its
    answer, and the events that come in between are dropped."""

    def __init__(self, ws: Any) -> None:
        self.ws, self.n = ws, 0

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.n += 1
        await self.ws.send_json({"id": self.n, "method": method, "params": params})
        deadline = time.monotonic() + 30
        while True:
            msg = await asyncio.wait_for(self.ws.receive_json(),
                                         max(0.1, deadline - time.monotonic()))
            if msg.get("id") == self.n:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                return msg["result"]

    async def evaluate(self, expression: str) -> Any:
        r = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return r["result"].get("value")

    async def screen(self) -> list[str]:
        return await self.evaluate(SCREEN) or []

    async def wait_screen(self, done: Any, what: str, timeout: float = 60) -> list[str]:
        deadline = time.monotonic() + timeout
        screen: list[str] = []
        while time.monotonic() < deadline:
            screen = await self.screen()
            if screen and done(screen):
                return screen
            await asyncio.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}; the screen was:\n"
                             + "\n".join(screen))

    async def press(self, key: str) -> None:
        """One key, as a person types it (keyDown with its text, keyUp): a letter, or
        ``full_stop`` (the one-event step)."""
        if key == "full_stop":
            key, code, vk = ".", "Period", 190
        else:
            code, vk = f"Key{key.upper()}", ord(key.upper())
        await self.call("Input.dispatchKeyEvent", type="keyDown", key=key, code=code,
                        text=key, windowsVirtualKeyCode=vk)
        await self.call("Input.dispatchKeyEvent", type="keyUp", key=key, code=code,
                        windowsVirtualKeyCode=vk)


def shown(screen: list[str]) -> tuple[int, int] | None:
    return shown_in(screen[0]) if screen else None


async def step(cdp: Cdp) -> list[str]:
    """``.`` once (one event), and the screen once the header shows one more event."""
    before = shown(await cdp.screen())
    assert before is not None
    await cdp.press("full_stop")
    want = before[1] + 1
    return await cdp.wait_screen(lambda s: shown(s) == (want, want), f"event {want}/{want}",
                                 timeout=30)


async def drive(devtools_port: int, url: str, server: subprocess.Popen[bytes],
                screenshot: str | None) -> dict[str, Any]:
    """Open ``url`` in the browser, work the app, stop the server; returns what the test
    asserts."""
    import aiohttp

    found: dict[str, Any] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        async with http.get(f"http://127.0.0.1:{devtools_port}/json/list") as r:
            targets = await r.json()
        page = next(t for t in targets if t["type"] == "page")
        async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            cdp = Cdp(ws)
            # the page's size, whatever the window's frame takes: the terminal fits it
            await cdp.call("Emulation.setDeviceMetricsOverride", width=1400, height=900,
                           deviceScaleFactor=1, mobile=False)
            await cdp.call("Page.enable")  # a script to add needs the Page domain on
            await cdp.call("Page.addScriptToEvaluateOnNewDocument", source=KEEP_TERMINAL)
            await cdp.call("Page.navigate", url=url)
            first = await cdp.wait_screen(
                lambda s: shown(s) is not None and any("ready queues" in r for r in s),
                "the app's screen")
            found["xterm"] = await cdp.evaluate("document.querySelectorAll('.xterm').length")
            found["first"] = first
            await cdp.evaluate("window.__xterm.focus()")
            screen = first
            for _ in range(4):  # the graph appears at dependencies_computed (event 2)
                if any("LinearBackward0" in row for row in screen):
                    break
                screen = await step(cdp)
            found["graph"] = screen
            queue0 = pane(screen, "ready queues")
            queues = [queue0]
            for _ in range(6):  # the root is pushed (and popped) within a few events
                screen = await step(cdp)
                queues.append(pane(screen, "ready queues"))
                if queues[-1] != queue0:
                    break
            found["queues"] = queues
            if screenshot:
                while shown(screen)[1] < 26:  # docs/tui.md walkthrough, step 5
                    screen = await step(cdp)
                shot = await cdp.call("Page.captureScreenshot", format="png")
                Path(screenshot).write_bytes(base64.b64decode(shot["data"]))
            # Ctrl-C (to the server alone) with the page open: the server stops, ends the
            # app it started for the page, and the page says the session ended
            os.kill(server.pid, signal.SIGINT)
            loop = asyncio.get_running_loop()
            found["code"] = await loop.run_in_executor(None, server.wait, 30)
            found["closed"] = await cdp.evaluate(
                "document.body.classList.contains('-closed')")
    return found


@needs_chromium
@pytest.mark.timeout(240)
def test_the_app_in_a_browser(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    profile = tmp_path / "chromium"
    screenshot = os.environ.get("AUTOGRAD_TUI_SERVE_SCREENSHOT")
    with process_group([CLI, "serve", "linear-relu", "--port", str(port)],
                       tmp_path / "server.log") as server:
        wait_http(url, 60)
        browser_argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                        "--no-first-run", "--no-default-browser-check",
                        f"--user-data-dir={profile}", "--remote-debugging-port=0",
                        "--remote-debugging-address=127.0.0.1", "--window-size=1280,800",
                        "about:blank"]
        with process_group(browser_argv, tmp_path / "chromium.log"):
            port_file = profile / "DevToolsActivePort"
            deadline = time.monotonic() + 60
            while not (port_file.exists() and port_file.read_text().strip()):
                assert time.monotonic() < deadline, (
                    "Chromium did not start:\n" + (tmp_path / "chromium.log").read_text())
                time.sleep(0.2)
            devtools_port = int(port_file.read_text().split()[0])
            found = asyncio.run(asyncio.wait_for(
                drive(devtools_port, url, server, screenshot), 180))
        gone = wait_group_gone(server.pid, 30)
        log = (tmp_path / "server.log").read_text()

    assert found["xterm"] == 1  # the page's terminal, which the app draws in
    assert "autograd-tui — linear-relu" in found["first"][0], found["first"][0]
    assert any("LinearBackward0" in row for row in found["graph"]), "\n".join(found["graph"])
    queues = found["queues"]
    assert queues[-1] != queues[0], f"the ready queues pane never changed: {queues}"
    assert any("SumBackward0" in row for q in queues for row in q), queues
    assert f"serving the app on linear-relu at http://127.0.0.1:{port}" in log
    assert found["code"] == 0, log
    assert found["closed"], "the page did not see its session end"
    assert gone, "the server left a process behind (the app it started?)"
    assert "Traceback" not in log, log


# --- without a browser ---------------------------------------------------------------------------
def test_the_app_command_is_run_with_the_same_options_quoted() -> None:
    argv = ["serve", "chain", "--param", "n=3", "--param", "label=it's a \"test\"; rm -rf x",
            "--engine", "reentrant=block", "--policy", "random", "--seed", "7"]
    words = shlex.split(app_command(build_parser().parse_args(argv)))
    assert words[:3] == [sys.executable, "-m", "autograd_tui"]
    run_args = build_parser().parse_args(words[3:])
    assert run_args.command == "run" and run_args.scenario == "chain"
    assert run_args.param == ["n=3", "label=it's a \"test\"; rm -rf x"]
    assert run_args.engine == ["reentrant=block"]
    assert (run_args.policy, run_args.seed, run_args.headless) == ("random", 7, False)


def test_a_scenario_file_is_named_by_its_absolute_path(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mine.py").write_text("")
    monkeypatch.chdir(tmp_path)
    words = shlex.split(app_command(build_parser().parse_args(["serve", "mine.py"])))
    assert words[4] == str(tmp_path / "mine.py")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_an_unknown_scenario_is_bad_usage_before_the_server_starts() -> None:
    port = free_port()
    p = cli("serve", "linear-rlu", "--port", str(port))
    assert p.returncode == 2
    assert "did you mean linear-relu" in p.stderr
    assert "serving" not in p.stdout and "Traceback" not in p.stderr
    p = cli("serve", "chain", "--param", "n=x", "--port", str(port))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    p = cli("serve", "--port", "70000")
    assert p.returncode == 2 and "--port 70000" in p.stderr


def test_a_port_in_use_is_one_message() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = cli("serve", "--port", str(port))
    assert p.returncode == 1
    assert p.stderr.strip() == (f"autograd-tui: port {port} on 127.0.0.1 is in use (another "
                                "server, or another `autograd-tui serve`): choose another "
                                "with --port")
    assert p.stdout == ""


def test_the_page_points_its_websocket_at_the_address_the_browser_used(tmp_path: Path) -> None:
    """With --host 0.0.0.0 a student's browser reaches the server by its name (allowed with
    --allow-host): the page's websocket must go there too, not to 127.0.0.1; a Host header
    the server does not answer to is refused (tests/app/test_serve_security.py)."""
    import urllib.error
    import urllib.request

    port = free_port()
    url = f"http://127.0.0.1:{port}/"

    def ws_url(host: str) -> str:
        req = urllib.request.Request(url, headers={"Host": host})
        with urllib.request.urlopen(req, timeout=10) as r:
            page = r.read().decode()
        m = re.search(r'data-session-websocket-url="([^"]*)"', page)
        assert m is not None, page
        return m.group(1)

    with process_group([CLI, "serve", "--port", str(port), "--allow-host", "class-pc.lan",
                        "--allow-host", "::1"], tmp_path / "server.log"):
        wait_http(url, 60)
        assert ws_url(f"class-pc.lan:{port}") == f"ws://class-pc.lan:{port}/ws"
        assert ws_url(f"[::1]:{port}") == f"ws://[::1]:{port}/ws"
        assert ws_url(f"localhost:{port}") == f"ws://localhost:{port}/ws"
        with pytest.raises(urllib.error.HTTPError, match="403"):
            ws_url(f'x"><b>:{port}')
