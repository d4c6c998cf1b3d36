"""``autograd-tui torch --ranks N``: two ranks of a tiny DDP script (gloo, 127.0.0.1) under
PyTorch's launcher, one recording per rank, each rank's outcome; every process ends with
the run (a failing rank, Ctrl-C); nothing listens beyond the loopback address.

Each run is a real ``autograd-tui`` process.  Every process it starts inherits a tag in
its environment, so a scan of ``/proc`` finds any of them still alive afterwards, even one
that its parent left behind (re-parented to init)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from autograd_tui.commands.parser import main
from autograd_tui.history import recordings

pytest.importorskip("torch", reason="--ranks needs PyTorch")
pytestmark = pytest.mark.timeout(150)

SCRIPT = str(Path(__file__).with_name("ddp_tiny.py"))
CLI = [sys.executable, "-m", "autograd_tui"]


def tagged(tag: str) -> list[int]:
    """The processes whose environment holds ``tag`` (this test's own are not tagged)."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if tag.encode() in Path(f"/proc/{d}/environ").read_bytes():
                    found.append(int(d))
            except OSError:
                pass
    return found


def gone(tag: str, within: float = 5.0) -> bool:
    """Every tagged process has ended (a zombie counts as ended) within ``within`` s."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = [p for p in tagged(tag) if not _zombie(p)]
        if not alive:
            return True
        time.sleep(0.1)
    return False


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[-1].split()[0] == b"Z"
    except OSError:
        return True


def ranks_of(tag: str) -> list[int]:
    """The tagged processes that are ranks (``python -u -m autograd_tui torch``, as
    torchrun starts them: the command and the launcher name the module too)."""
    found = []
    for q in tagged(tag):
        try:
            if b"\x00-u\x00-m\x00autograd_tui\x00torch\x00" in Path(
                    f"/proc/{q}/cmdline").read_bytes():
                found.append(q)
        except OSError:
            pass
    return found


def listening(pids: list[int]) -> list[str]:
    """The local addresses (hex, as /proc/net/tcp writes them) of the TCP sockets these
    processes listen on."""
    out = []
    for pid in pids:
        try:
            inodes = {os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1]
                      for fd in os.listdir(f"/proc/{pid}/fd")
                      if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:[")}
            for table in ("tcp", "tcp6"):
                for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                    f = line.split()
                    if f[3] == "0A" and f[9] in inodes:  # 0A: LISTEN
                        out.append(f[1])
        except OSError:
            pass
    return out


def launch(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.Popen[str], str]:
    tag = f"RANKS_TEST_TAG={uuid.uuid4().hex}"
    e = {**os.environ, "RANKS_TEST_TAG": tag.split("=")[1], "NO_COLOR": "1", **env}
    p = subprocess.Popen([*CLI, "torch", SCRIPT, "--ranks", "2", *args], cwd=tmp_path,
                         env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p, tag.split("=")[1]


def test_two_ranks_one_recording_each_with_its_rank(tmp_path: Path) -> None:
    p, tag = launch(tmp_path, "--headless", "--record", "runs")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, (out, err)
    assert "rank 0: completed" in out and "rank 1: completed" in out
    assert "grad module.0.weight: shape [8, 4]" in out
    assert "starting 2 ranks" in err and "127.0.0.1" in err
    for k in (0, 1):
        rec = recordings.load(tmp_path / "runs" / f"rank{k}.jsonl.gz")
        assert rec.header["distributed"] == {"rank": k, "world_size": 2, "backend": "gloo"}
        assert rec.footer["status"] == "completed" and len(rec.events) > 10
    assert gone(tag)
    # the 2-rank run in one Chrome trace: a process per rank, pid = rank, named (in this
    # process: test_budget runs chrome-trace as a real process)
    out_json = tmp_path / "ranks.json"
    assert main(["chrome-trace", str(tmp_path / "runs"), "-o", str(out_json)]) == 0
    t = json.loads(out_json.read_text())
    assert {ev["pid"]: ev["args"]["name"] for ev in t["traceEvents"]
            if ev["name"] == "process_name"} == {0: "rank 0", 1: "rank 1"}
    for pid in (0, 1):
        assert any(ev["pid"] == pid and ev["ph"] == "X" and "AccumulateGrad" in ev["name"]
                   for ev in t["traceEvents"])


def test_stop_at_stops_every_rank_at_its_first_match(tmp_path: Path) -> None:
    p, tag = launch(tmp_path, "--headless", "--quiet", "--stop-at", "node_start AccumulateGrad",
                    "--record", "runs")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, (out, err)
    for k in (0, 1):
        assert f"rank {k}: stopped at event " in out
        rec = recordings.load(tmp_path / "runs" / f"rank{k}.jsonl.gz")
        assert rec.footer["status"] == "running" and rec.events[-1].kind == "node_start"
        assert rec.events[-1].data["name"] == "AccumulateGrad"
    assert gone(tag)


def test_a_failing_rank_ends_the_others_with_a_clear_message(tmp_path: Path) -> None:
    start = time.monotonic()
    p, tag = launch(tmp_path, "--headless", DDP_TINY_FAIL_RANK="0")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1, (out, err)
    # rank 1 waited in a barrier for rank 0, which never came: it did not complete
    # the error's lines shown as lines, each filtered: no "\x0a", the ESC still escaped
    assert "rank 0: error in the script RuntimeError: rank 0 fails on purpose\n" \
           "    At:\n      pair.cc(553): \\x1b[2Jgone\n" in out
    assert "rank 1: completed" not in out and "rank 1: " in out
    assert "autograd-tui: rank 0 failed first: error in the script RuntimeError: rank 0 " \
           "fails on purpose\n    At:\n      pair.cc(553): \\x1b[2Jgone\n" in err
    assert "\\x0a" not in out + err and "\x1b" not in out + err
    assert "Traceback" not in out + err
    assert time.monotonic() - start < 60  # not torchrun's 30 s wait for a SIGTERM
    assert gone(tag)


def test_a_rank_killed_by_a_signal_is_named(tmp_path: Path) -> None:
    p, tag = launch(tmp_path, "--headless", "--quiet", DDP_TINY_KILL_RANK="1")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1, (out, err)
    assert "rank 1: killed by SIGKILL (the kernel's out-of-memory killer" in out
    assert "autograd-tui: rank 1 failed first: killed by SIGKILL" in err
    assert [line.split(":")[0] for line in out.splitlines()] == ["rank 0", "rank 1"]  # quiet
    assert "Traceback" not in out + err
    assert gone(tag)


def test_seen_gone_at_the_same_poll_the_rank_killed_by_a_signal_failed_first() -> None:
    """Rank 1 killed, rank 0's gloo error a moment later: one 0.1 s poll may see both
    gone; the killed rank is named first (a clean-clone CI run named rank 0)."""
    from types import SimpleNamespace

    from autograd_tui.session.ranks import Launch

    same = SimpleNamespace(ended={0: 5.0, 1: 5.0})
    assert Launch.first_to_end(same, [0, 1], signalled=[1]) == 1
    assert Launch.first_to_end(same, [0, 1]) == 0  # no signal: the lower rank
    earlier = SimpleNamespace(ended={0: 4.9, 1: 5.0})
    assert Launch.first_to_end(earlier, [0, 1], signalled=[1]) == 0  # the time decides
    assert Launch.first_to_end(SimpleNamespace(ended={}), [0, 1], signalled=[1]) is None


def test_ctrl_c_ends_the_launcher_and_every_rank_and_only_loopback_listens(
        tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    ready.mkdir()
    p, tag = launch(tmp_path, "--headless", DDP_TINY_HANG="1", DDP_TINY_READY=str(ready))
    try:
        deadline = time.monotonic() + 90
        # Both ranks joined the process group and sleep in their forward: each says so
        # (not a time: a loaded machine took 25 s to get there).  The torch command stops
        # a forward that stands still 10 s as stuck, so the SIGINT goes now.
        while len(list(ready.iterdir())) < 2:
            assert time.monotonic() < deadline and p.poll() is None, p.communicate()
            time.sleep(0.05)
        assert len(ranks_of(tag)) == 2
        addresses = listening(tagged(tag))  # the store and each rank's gloo
        assert len(addresses) >= 3 and all(a.startswith("0100007F:") for a in addresses), \
            addresses
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 130, (out, err)
    assert "autograd-tui: interrupted" in err
    assert gone(tag)


def test_bad_uses_are_one_message(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["torch", SCRIPT, "--ranks", "0", "--headless"]) == 2
    assert "--ranks needs a number of ranks from 1 to 64" in capsys.readouterr().err
    (tmp_path / "f").write_text("x")
    assert main(["torch", SCRIPT, "--ranks", "2", "--headless",
                 "--record", str(tmp_path / "f")]) == 1
    assert "--record names a folder" in capsys.readouterr().err
    assert main(["torch", str(tmp_path / "none.py"), "--ranks", "2", "--headless"]) == 1
    assert "no such file" in capsys.readouterr().err
    monkeypatch.delenv("RANK", raising=False)
    assert main(["torch", SCRIPT, "--headless", "--record", "r{rank}.jsonl"]) == 2
    assert "needs a rank: run under torchrun" in capsys.readouterr().err


def test_without_headless_the_app_opens_on_every_rank(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The app is given each rank's recording (ordered as recorded, rank in the header);
    the temporary folder they were in is removed once the app closes."""
    from autograd_tui.commands import torch_ranks

    given: list[list[recordings.Recording]] = []

    def fake_app(*, recordings: list[recordings.Recording]) -> int:
        given.append(list(recordings))
        return 0

    monkeypatch.setattr(torch_ranks, "open_app", fake_app)
    monkeypatch.setenv("TEXTUAL_DRIVER", "test")  # as if on a terminal
    monkeypatch.chdir(tmp_path)
    # the temporary folders this command makes (tests running beside it make theirs)
    made: list[Path] = []
    mkdtemp = tempfile.mkdtemp

    def spy(*args: Any, **kwargs: Any) -> str:
        made.append(Path(mkdtemp(*args, **kwargs)))
        return str(made[-1])

    monkeypatch.setattr(tempfile, "mkdtemp", spy)
    assert main(["torch", SCRIPT, "--ranks", "2"]) == 0
    (recs,) = given
    assert [r.header["distributed"]["rank"] for r in recs] == [0, 1]
    assert all(r.footer["status"] == "completed" for r in recs)
    ranks_folders = [p for p in made if p.name.startswith("autograd-tui-ranks-")]
    assert len(ranks_folders) == 1 and not ranks_folders[0].exists()
    # each rank's recording is counted as it comes in, in whichever order the ranks end
    err = capsys.readouterr().err
    said = sorted(re.findall(r"rank (\d): recorded \((\d) of 2\)", err))
    assert [r for r, _ in said] == ["0", "1"] and sorted(n for _, n in said) == ["1", "2"], err


@pytest.mark.parametrize("when", ["starting", "running"])
def test_a_killed_command_leaves_no_rank_behind(tmp_path: Path, when: str) -> None:
    """SIGKILL, which no handler sees: the launcher is told (PR_SET_PDEATHSIG), also while
    it still imports torch, and torchrun stops the ranks (each rank, too, ends with it)."""
    p, tag = launch(tmp_path, "--headless", DDP_TINY_HANG="1")
    try:
        deadline = time.monotonic() + 90

        def up() -> bool:
            if when == "starting":  # the launcher (torchrun's agent) exists
                return any(b"autograd_tui.session.ranks" in _cmdline(q) for q in tagged(tag))
            return len(ranks_of(tag)) == 2

        while not up():
            assert time.monotonic() < deadline and p.poll() is None, p.communicate()
            time.sleep(0.05)
        p.kill()
        p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert gone(tag, within=30)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed: the "
                    "real-terminal test needs it (apt-get install tmux; CI installs it)")
def test_in_a_terminal_the_app_opens_on_both_ranks(tmp_path: Path) -> None:
    """``torch --ranks 2`` in tmux: the ranks run, then the app shows both; ``>`` shows
    rank 1 while rank 0 keeps its event; q ends it all (exit 0, no process left)."""
    name = f"autograd-tui-ranks-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tag = uuid.uuid4().hex
    status = tmp_path / "status"
    cli = Path(sys.executable).parent / "autograd-tui"
    command = (f"cd {shlex.quote(str(tmp_path))} && env -u COLUMNS -u LINES "
               f"RANKS_TEST_TAG={tag} {shlex.quote(str(cli))} torch {shlex.quote(SCRIPT)} "
               f"--ranks 2 --record runs; echo $? > {shlex.quote(str(status))}")

    def tmux(*args: str) -> str:
        return subprocess.run(["tmux", "-u", *args], capture_output=True, text=True,
                              timeout=20).stdout

    def wait_for(text: str, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = tmux("capture-pane", "-p", "-t", name)
            if text in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"no {text!r}; the screen was:\n{screen}")

    tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "40", command)
    try:
        screen = wait_for("ranks (< >)")
        n = int(re.search(r"▶ rank 0 · event \d+/(\d+)", screen).group(1))  # type: ignore[union-attr]
        assert f"rank 1 · event {n}/{n}" in screen
        tmux("send-keys", "-t", name, "Home")
        wait_for(f"▶ rank 0 · event 0/{n}")
        tmux("send-keys", "-t", name, "Right")
        wait_for(f"▶ rank 0 · event 1/{n}")
        tmux("send-keys", "-t", name, ">")
        screen = wait_for("▶ rank 1")
        assert f"rank 0 · event 1/{n}" in screen
        tmux("send-keys", "-t", name, "q")
        deadline = time.monotonic() + 30
        while not status.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert status.read_text().strip() == "0"
    finally:
        tmux("kill-session", "-t", name)
    assert sorted(p.name for p in (tmp_path / "runs").glob("rank*")) == [
        "rank0.jsonl.gz", "rank1.jsonl.gz"]
    assert gone(tag)
