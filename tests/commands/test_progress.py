"""Progress bars: drawn on a terminal (standard error), nothing extra in a pipe.

The commands run as a person runs them, in a child process: once with standard
output and error as pipes (nothing but the command's own lines), once with
standard error on a pseudo-terminal (the bar appears there, and standard output,
still a pipe, stays clean).  ``progress`` itself is checked with streams that
say they are (or are not) a terminal.
"""

from __future__ import annotations

import io
import re
import sys
import threading
from pathlib import Path

import pytest
from terminal import run_on_terminal, run_piped

from autograd_tui.commands import main
from autograd_tui.commands.progress import Bar, progress

pty = pytest.importorskip("pty", reason="pseudo-terminals need a POSIX system")

pytestmark = pytest.mark.timeout(180)

BAR_CHARS = ("━", "╸", "╺")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _no_bar(text: str) -> None:
    assert not any(c in text for c in BAR_CHARS), text[:500]
    assert "\x1b[" not in text, text[:500]


# --- the module ------------------------------------------------------------------------------
def test_no_terminal_no_output():
    out = io.StringIO()
    with progress(3, "working", stream=out) as bar:
        bar.advance()
        bar.update(total=4, description="still working")
        bar.advance(3)
    assert out.getvalue() == ""
    assert type(bar) is Bar  # the silent one


def test_a_terminal_gets_a_bar_with_the_count():
    out = FakeTerminal()
    with progress(5, "writing frames", stream=out) as bar:
        for _ in range(5):
            bar.advance()
    text = ANSI.sub("", out.getvalue())
    assert "writing frames" in text
    assert "5/5" in text
    assert any(c in text for c in BAR_CHARS)


def test_a_name_from_a_file_is_shown_as_text():
    out = FakeTerminal()
    with progress(1, "loading [bold red]x[/bold red]\x07.jsonl", stream=out) as bar:
        bar.update(description="[link=http://x]y[/link]: folding")
        bar.advance()
    text = ANSI.sub("", out.getvalue())
    assert "loading [bold red]x[/bold red]" in text  # markup kept as text
    assert "[link=http://x]y[/link]: folding" in text
    assert "\x07" not in text  # a control character is made visible


def test_an_error_inside_ends_the_bar_and_passes_through():
    out = FakeTerminal()
    with pytest.raises(KeyError), progress(2, "x", stream=out) as bar:
        bar.advance()
        raise KeyError("boom")
    assert "\x1b[?25h" in out.getvalue()  # the cursor is shown again
    # Rich's refresh thread has stopped
    assert not [t for t in threading.enumerate() if type(t).__name__ == "_RefreshThread"]


# --- the commands -----------------------------------------------------------------------------
def test_export_frames_in_a_pipe_and_on_a_terminal(tmp_path: Path):
    args = ["export", "linear-relu", "--every", "1", "--format", "dot"]
    piped = run_piped([*args, "-o", "piped"], tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""
    assert piped.stdout.startswith("wrote ") and piped.stdout.count("\n") == 1
    _no_bar(piped.stdout)
    n = int(re.match(r"wrote (\d+) frames", piped.stdout).group(1))

    rc, out, terminal = run_on_terminal([*args, "-o", "tty"], tmp_path)
    assert rc == 0, terminal
    assert out == piped.stdout.replace("piped", "tty")  # standard output unchanged
    shown = ANSI.sub("", terminal)
    assert "linear-relu: frames" in shown
    assert f"{n}/{n}" in shown
    assert any(c in shown for c in BAR_CHARS)


def test_replay_reexecute_in_a_pipe_and_on_a_terminal(tmp_path: Path):
    rec = tmp_path / "r.jsonl"
    assert main(["run", "reentrant", "--headless", "--record", str(rec)]) == 0
    piped = run_piped(["replay", str(rec), "--reexecute"], tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""
    assert "identical to the recording" in piped.stdout
    _no_bar(piped.stdout)
    n = int(re.search(r"(\d+) events", piped.stdout).group(1))

    rc, out, terminal = run_on_terminal(["replay", str(rec), "--reexecute"], tmp_path)
    assert rc == 0, terminal
    assert out == piped.stdout
    shown = ANSI.sub("", terminal)
    assert "re-executing reentrant" in shown
    assert f"{n}/{n}" in shown


def test_explore_in_a_pipe_and_on_a_terminal(tmp_path: Path):
    args = ["explore", "race-lock-order", "--preemptions", "1"]
    piped = run_piped(args, tmp_path)
    assert piped.returncode == 3, piped.stderr  # it finds the deadlock
    assert piped.stderr == ""
    assert "exploring" not in piped.stdout  # the table is there, the bar is not
    n = int(re.search(r"explored (\d+) schedules", piped.stdout).group(1))

    rc, out, terminal = run_on_terminal(args, tmp_path)
    assert rc == 3, terminal
    shown = ANSI.sub("", terminal)
    assert "exploring" in shown and "deadlock" in shown
    assert f"explored {n} schedules" in out  # the same search, the same report
    assert any(c in shown for c in BAR_CHARS)


def test_loading_a_big_recording(tmp_path: Path, monkeypatch, capsys):
    """Stages on a terminal; in a pipe only the two lines it always printed."""
    from autograd_tui.commands import common
    from autograd_tui.history import recordings

    rec = tmp_path / "r.jsonl"
    assert main(["run", "linear-relu", "--headless", "--record", str(rec)]) == 0
    seen: list[str] = []
    recordings.load(rec, on_stage=seen.append)
    assert tuple(seen) == recordings.LOAD_STAGES
    capsys.readouterr()
    monkeypatch.setattr(common, "BIG_RECORDING", 0)

    common.load_recording(str(rec))
    err = capsys.readouterr().err
    assert err.startswith(f"loading {rec}") and "loaded 82 events" in err
    _no_bar(err)

    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    loaded = common.load_recording(str(rec))
    assert len(loaded.events) == 82
    shown = ANSI.sub("", terminal.getvalue())
    assert f"{rec.name}: folding" in shown
    assert f"{len(recordings.LOAD_STAGES)}/{len(recordings.LOAD_STAGES)}" in shown
