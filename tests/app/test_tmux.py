"""The app in a real terminal: tmux runs ``autograd-tui run linear-relu`` at 120x40, and
at 80x24 (the side panes as tabs, each shown by its key; the footer's keys).

Keys go in with ``tmux send-keys``; what a person would see comes back with
``tmux capture-pane -p``.  Skipped when tmux is not installed (CI installs it).
Each test uses its own session name and always kills that session (never the
tmux server: other sessions may share it).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from pilot import shown_in

from autograd_tui import scenarios
from autograd_tui.engine.events import summarize
from autograd_tui.session.run import Run
from autograd_tui.words import short_value

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("tmux") is None,
                       reason="tmux is not installed: the real-terminal test needs it "
                              "(apt-get install tmux; CI installs it)"),
]

REPO = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).parent / "autograd-tui"


def tmux(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", "-u", *args], capture_output=True, text=True, timeout=20,
                          check=check)


def capture(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session).stdout


def wait_for(session: str, done: Callable[[str], bool], timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = capture(session)
        if done(screen):
            return screen
        time.sleep(0.1)
    raise AssertionError(f"timed out; the screen was:\n{screen}")


def timeline(screen: str) -> tuple[int, int, str] | None:
    """(shown event, newest event, status) from the timeline under the event log."""
    m = re.search(r"▏ (\d+)/(\d+)\s+(\w+)", screen)
    return (int(m.group(1)), int(m.group(2)), m.group(3)) if m else None


def pane_text(screen: str, title: str) -> str:
    """The text inside the side pane titled ``title``, its lines joined by spaces."""
    lines = screen.splitlines()
    top = next(i for i, line in enumerate(lines) if f"╭─ {title} " in line)
    left = lines[top].index(f"╭─ {title} ")
    out = []
    for line in lines[top + 1:]:
        part = line[left:]
        if part.startswith("╰"):
            break
        out.append(part.strip("│ "))
    return " ".join(out)


def pane_dead(session: str) -> bool:
    """The pane's process (the shell running the app) has exited."""
    out = tmux("display-message", "-p", "-t", session, "#{pane_dead}", check=False).stdout
    return out.strip() == "1"


@pytest.fixture
def session() -> str:
    name = f"autograd-tui-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    yield name
    tmux("kill-session", "-t", name, check=False)


def expected_leaf_grads() -> set[str]:
    """The gradients of linear-relu's five leaves, as the app prints them."""
    with Run(scenarios.load("linear-relu")) as run:
        assert run.run().status == "finished"
        return {short_value(summarize(g)) for g in run.gradients().values()}


def start(session: str, status_file: Path, width: int, height: int) -> str:
    """``autograd-tui run linear-relu`` in a tmux session of this size; its first screen."""
    assert CLI.exists(), f"{CLI}: the console script is not installed in this environment"
    # env -u: a tmux server started without a terminal can hand its panes COLUMNS=80 and
    # LINES=24, which Textual would take over the pane's real size.  The shell writes the
    # app's exit status to a file (tmux 3.3 leaves #{pane_dead_status} empty).
    command = (f"env -u COLUMNS -u LINES {shlex.quote(str(CLI))} run linear-relu; "
               f"echo $? > {shlex.quote(str(status_file))}")
    tmux("new-session", "-d", "-s", session, "-x", str(width), "-y", str(height),
         "-c", str(REPO), command)
    tmux("set-option", "-t", session, "remain-on-exit", "on")  # the last screen stays
    return wait_for(session, lambda s: "graph: 0 nodes" in s and "event 0/0" in s)


def step(session: str, screen: str) -> str:
    """``n``, and the screen once the timeline has moved."""
    before = timeline(screen)
    tmux("send-keys", "-t", session, ".")
    return wait_for(session, lambda s: timeline(s) not in (None, before), timeout=10)


def quit_app(session: str, status_file: Path) -> None:
    """``q``: the app exits with status 0, without a traceback."""
    tmux("send-keys", "-t", session, "q")
    deadline = time.monotonic() + 20
    while not pane_dead(session) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pane_dead(session), f"the app did not exit after q:\n{capture(session)}"
    assert status_file.read_text().strip() == "0", capture(session)
    assert "Traceback" not in capture(session)


def test_linear_relu_to_completion_in_a_real_terminal(session: str, tmp_path: Path) -> None:
    status_file = tmp_path / "exit-status"
    screen = start(session, status_file, 120, 40)
    assert "No graph yet" in screen

    # n, one at a time (each waits for the screen to change), until the run has ended: the
    # timeline then says "82/82  completed"
    last = timeline(screen)
    for _ in range(300):
        screen = step(session, screen)
        last = timeline(screen)
        if last is not None and last[2] == "completed":
            break
    assert last is not None and last[2] == "completed" and last[0] == last[1] > 0, screen
    assert shown_in(screen) == (last[0], last[0]), screen
    # the first notification ("n steps, space runs ...") has timed out: nothing covers the panes
    screen = wait_for(session, lambda s: "space runs" not in s and "run has ended" not in s)

    # every node is done: the boxes in view (the GraphTask's frame and the forward ops'
    # lines make the graph taller than the pane) have the ✓ badge, and so do the eleven
    # rows of the list view (v), which the pane holds whole
    badges = re.findall(r"╭ (\S) \w+", screen)
    assert len(badges) >= 6 and set(badges) == {"✓"}, screen
    tmux("send-keys", "-t", session, "v")
    listed = wait_for(session, lambda s: "list view" in s)
    badges = re.findall(r"(\S) (?:\w+Backward\d|AccumulateGrad)\s+cpu\s", listed)
    assert len(badges) == 11 and set(badges) == {"✓"}, listed
    # the GraphTask completed (the GraphTasks pane, its wrapped lines joined)
    tasks = pane_text(screen, "GraphTasks")
    assert re.search(r"GT1 owner cpu \(owner\) depth 0 outstanding 0 completed", tasks), tasks
    # the final gradients of the five leaves (by AccumulateGrad node)
    assert "leaf .grad" in tasks
    shown_grads = re.findall(r"#\d+=(\[[^\]]*\])", tasks)
    assert len(shown_grads) == 5, screen
    assert set(shown_grads) == expected_leaf_grads()
    assert "#9=[0.35]" in screen  # input.grad = w1 * (relu' + w2) = 0.5 * 0.7

    # the footer shows the keys that used to be cut off at 120 columns
    footer = screen.splitlines()[-1]
    for key in ("n Node", "space Run/Pause", "← Back", "→ Fwd", "s Scenarios", "e Export",
                "t Notes", "? Help", "q Quit"):
        assert key in footer, footer
    quit_app(session, status_file)


# the side panes at 80x24: (key, the pane's title, what it shows with Linear1 in not_ready)
PANE_KEYS = [("T", "threads (1-9 step, p pause)", "cpu (owner)"),
             ("Q", "ready queues (pop order)", "ReluBackward0#4"),
             ("R", "not_ready", "LinearBackward0#6 GT1 deps 1"),
             ("G", "GraphTasks", "GT1 owner cpu (owner)")]


def test_80x24_every_pane_one_key_away(session: str, tmp_path: Path) -> None:
    """At 80x24 the side panes are tabs: each key shows its pane (whole, with its text),
    ``w`` the next; the graph, the event log and the timeline stay; the footer shows the
    keys a class needs most, whole."""
    status_file = tmp_path / "exit-status"
    screen = start(session, status_file, 80, 24)
    for _ in range(100):  # to Linear1's not_ready_insert (event 33)
        if "not_ready += LinearBackward0#6" in screen:
            break
        screen = step(session, screen)
    assert "not_ready += LinearBackward0#6" in screen, screen
    footer = screen.splitlines()[-1]
    for key in ("n Node", "space Run/Pause", "← Back", "→ Fwd", "w Pane", "? Help", "q Quit"):
        assert key in footer, footer

    def shown(title: str) -> list[str]:
        return [t for _, t, _ in PANE_KEYS if f"╭─ {t} " in capture(session)]

    for key, title, text in PANE_KEYS:
        tmux("send-keys", "-t", session, key)
        screen = wait_for(session, lambda s, t=title: f"╭─ {t} " in s)
        assert shown(title) == [title], screen  # one side pane at a time
        assert text in pane_text(screen, title), screen
        assert "graph: 11 nodes" in screen and "╭─ events " in screen, screen
        assert timeline(screen) is not None, screen
    for _, title, _ in PANE_KEYS:  # from GraphTasks, w: threads, ..., GraphTasks again
        tmux("send-keys", "-t", session, "w")
        screen = wait_for(session, lambda s, t=title: f"╭─ {t} " in s)
        assert shown(title) == [title], screen
    quit_app(session, status_file)


def test_y_copies_the_event_line_through_osc52(session: str, tmp_path: Path) -> None:
    """``y`` sends the shown event's line as OSC 52: tmux (set-clipboard on) keeps it in
    its paste buffer, as a terminal would put it on the clipboard."""
    status_file = tmp_path / "exit-status"
    tmux("start-server", check=False)
    screen = start(session, status_file, 120, 40)
    tmux("set-option", "-t", session, "set-clipboard", "on", check=False)
    tmux("set-option", "-s", "set-clipboard", "on", check=False)
    for _ in range(3):
        screen = step(session, screen)
    before = f"nothing copied yet {uuid.uuid4().hex}"  # tmux's buffers are the server's
    tmux("set-buffer", before)
    tmux("send-keys", "-t", session, "y")
    deadline = time.monotonic() + 10
    copied = before
    while time.monotonic() < deadline and copied == before:
        time.sleep(0.1)
        copied = tmux("show-buffer", check=False).stdout
    assert copied != before, f"nothing reached tmux's buffer:\n{capture(session)}"
    assert copied.startswith("3 ") and "cpu (owner)" in copied  # event 3's log line
    assert "\x1b" not in copied and "[" not in copied.split()[0]
    quit_app(session, status_file)
