"""The command line's output paths and its exit codes for mistakes (in-process ``main``).

Output paths: ``--record`` and ``-o`` into a FIFO, through a symlink, onto a directory,
or empty.  Exit codes: a scenario's ``sys.exit(5)`` is an error in it (1, with a
message), a parameter value the program refuses and a non-finite float are bad usage
(2).  Every path is under ``tmp_path``: a FIFO stands in for a device."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from forge import read_fifo

from autograd_tui.commands import main
from autograd_tui.history import recordings

pytestmark = pytest.mark.timeout(120)

RUN = ["run", "linear-relu", "--headless", "--quiet"]


def _scenario(tmp_path: Path, body: str, top: str = "") -> Path:
    f = tmp_path / "exits.py"
    f.write_text(f"import sys\nfrom autograd_tui import engine\n{top}\nNAME = 'exits'\n\n"
                 f"def program():\n{body}\n")
    return f


# --- output paths -------------------------------------------------------------------------------
def test_record_into_a_fifo(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "run.jsonl"
    os.mkfifo(fifo)
    reader, got = read_fifo(fifo)
    assert main([*RUN, "--record", str(fifo)]) == 0
    reader.join(timeout=60)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(got[0])
    assert recordings.load(copy).scenario == "linear-relu"  # the whole recording came through
    assert f"to {fifo}" in capsys.readouterr().out


def test_record_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    target = tmp_path / "runs" / "latest.jsonl"
    target.parent.mkdir()
    target.write_bytes(b"old")
    target.chmod(0o644)
    link = tmp_path / "run.jsonl"
    link.symlink_to(target)
    assert main([*RUN, "--record", str(link)]) == 0
    assert link.is_symlink() and link.resolve() == target
    assert recordings.load(link).scenario == "linear-relu"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_a_new_recording_is_not_private(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    try:
        assert main([*RUN, "--record", str(tmp_path / "run.jsonl.gz")]) == 0
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "run.jsonl.gz").stat().st_mode) == 0o644


def test_chrome_trace_and_export_into_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    reader, got = read_fifo(fifo)
    assert main(["chrome-trace", "linear-relu", "-o", str(fifo)]) == 0
    reader.join(timeout=60)
    assert got[0].startswith(b"{") and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    reader, got = read_fifo(fifo)
    assert main(["export", "linear-relu", "--at", "3", "--format", "dot", "-o", str(fifo)]) == 0
    reader.join(timeout=60)
    assert got[0].startswith(b"digraph") and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize("argv", [
    [*RUN, "--record", "{d}"],
    ["chrome-trace", "linear-relu", "-o", "{d}"],
    ["export", "linear-relu", "-o", "{d}"],
])
def test_an_output_that_is_a_directory_is_one_message(tmp_path: Path, capsys, argv) -> None:
    d = tmp_path / "out"
    d.mkdir()
    assert main([a.format(d=d) for a in argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"autograd-tui: {d}: cannot write: it is a directory")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert d.is_dir() and list(d.iterdir()) == []


@pytest.mark.parametrize("argv, option", [
    ([*RUN, "--record", ""], "--record"),
    (["chrome-trace", "linear-relu", "-o", ""], "-o/--output"),
    (["export", "linear-relu", "-o", ""], "-o/--output"),
])
def test_an_empty_output_name_is_bad_usage(capsys, argv, option) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith(f"autograd-tui: {option} needs a ")


def test_record_without_headless_is_bad_usage(tmp_path: Path, capsys) -> None:
    assert main(["run", "linear-relu", "--record", str(tmp_path / "x.jsonl")]) == 2
    assert "--record needs --headless" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


# --- exit codes ----------------------------------------------------------------------------------
def test_a_program_that_calls_sys_exit_is_an_error_with_a_message(tmp_path: Path, capsys) -> None:
    f = _scenario(tmp_path, "    t = engine.tensor(2.0, requires_grad=True)\n"
                            "    (t * t).backward()\n    sys.exit(5)")
    rec = tmp_path / "run.jsonl"
    assert main(["run", str(f), "--headless", "--quiet", "--record", str(rec)]) == 1
    out, err = capsys.readouterr()
    assert err == f"autograd-tui: {f}: the scenario's program called sys.exit(5)\n"
    assert "error in the scenario's program" in out and "it called sys.exit(5)" in out
    assert recordings.load(rec).footer["status"] == "error"  # what was recorded is kept


def test_a_scenario_file_that_exits_on_import_is_one_message(tmp_path: Path, capsys) -> None:
    f = _scenario(tmp_path, "    pass", top="sys.exit(5)")
    for argv in (["run", str(f), "--headless"], ["run", str(f)], ["show", str(f)],
                 ["export", str(f), "-o", str(tmp_path / "x.dot")]):
        assert main(argv) == 1
        assert capsys.readouterr().err == f"autograd-tui: {f}: importing it called sys.exit(5)\n"


@pytest.mark.parametrize("argv", [
    ["run", "chain", "--param", "n=-5", "--headless", "--quiet"],
    ["export", "chain", "--param", "n=0", "-o", "{tmp}/x.dot"],
    ["chrome-trace", "fan-in", "--param", "n=-1", "-o", "{tmp}/x.json"],
])
def test_a_parameter_the_program_refuses_is_bad_usage(tmp_path: Path, capsys, argv) -> None:
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    out, err = capsys.readouterr()
    assert "must be at least 1" in err and err.count("\n") == 1
    assert out == "" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999"])
def test_a_float_parameter_must_be_finite(tmp_path: Path, capsys, value) -> None:
    rec = tmp_path / "run.jsonl"
    assert main(["run", "chain", "--param", f"x={value}", "--headless", "--record",
                 str(rec)]) == 2
    assert capsys.readouterr().err == (f"autograd-tui: chain: parameter 'x' must be "
                                       f"a finite number, not {value!r}\n")
    assert not rec.exists()
    assert main(["run", "chain", "--param", f"x={value}"]) == 2  # checked before the app opens


def test_main_turns_any_other_sys_exit_into_an_error(monkeypatch, capsys) -> None:
    """A ``SystemExit`` a command does not catch itself (a scenario file imported by a
    layer below, say) is exit 1 with a message, not the code the file chose."""
    from autograd_tui.commands import list_cmd

    def exits(args: object) -> int:
        raise SystemExit(7)

    monkeypatch.setattr(list_cmd, "run", exits)
    assert main(["list"]) == 1
    assert capsys.readouterr().err == "autograd-tui: a scenario's code called sys.exit(7)\n"


# --- the headless trace -------------------------------------------------------------------------
@pytest.mark.parametrize("options", [{}, {"force_terminal": True},
                                     {"force_terminal": True, "color_system": "standard"},
                                     {"force_terminal": True, "no_color": True}])
def test_the_batched_trace_is_what_rich_prints_line_by_line(options) -> None:
    """``print_trace`` writes its lines in batches, framed as Rich frames each style:
    the same bytes as one ``Console.print`` per event, in a pipe and on a terminal."""
    import io

    from rich.console import Console
    from rich.text import Text

    from autograd_tui import scenarios
    from autograd_tui.export.text import TRACE_BATCH, print_trace
    from autograd_tui.session.run import Run
    from autograd_tui.words import KIND_STYLE, format_event, node_names

    events = []
    for name in ("hooks", "deadlock-reentrant-block", "reentrant-deep", "error-in-node"):
        with Run(scenarios.get(name)) as run:
            run.run()
            events += run.events
    assert len(events) > TRACE_BATCH and len({e.kind for e in events}) > 15
    names = node_names(events)
    got, want = io.StringIO(), io.StringIO()
    for out in (got, want):
        con = Console(file=out, highlight=False, soft_wrap=True, **options)
        if out is got:
            print_trace(events, con)
        else:
            for e in events:
                con.print(Text(format_event(e, names), style=KIND_STYLE.get(e.kind, "")))
        con.print("summary")
    assert got.getvalue() == want.getvalue()
    assert ("\x1b[" in got.getvalue()) == options.get("force_terminal", False)  # bold at least


# --- stdout: a closed pipe, no terminal ---------------------------------------------------------
def _cli() -> list[str]:
    import sys
    return [sys.executable, "-m", "autograd_tui"]


def test_a_closed_pipe_ends_quietly_and_keeps_the_recording(tmp_path: Path) -> None:
    """``run ... | head -1``: the reader goes away after one line; the command ends with
    exit 0 and no message, and the recording it was asked for is complete."""
    import subprocess

    rec = tmp_path / "r.jsonl"
    for argv in (["run", "chain", "--headless", "--param", "n=2000", "--record", str(rec)],
                 ["show", "linear-relu"], ["list"]):
        p = subprocess.Popen([*_cli(), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert p.stdout is not None and p.stdout.readline()
        p.stdout.close()  # what head does after its line
        err = p.stderr.read() if p.stderr else b""
        assert p.wait(timeout=100) == 0, err
        assert err == b"", err
    assert len(recordings.load(rec).events) == 28_008


def _recording(tmp_path: Path) -> Path:
    assert main([*RUN, "--record", str(tmp_path / "lr.jsonl")]) == 0
    return tmp_path / "lr.jsonl"


def test_the_app_without_a_terminal_says_use_headless(tmp_path: Path) -> None:
    """stdout a pipe: the commands that would open the app stop at once, exit 2."""
    import importlib.util
    import subprocess

    argvs = [[], ["run", "linear-relu"], ["replay", str(_recording(tmp_path))]]
    if importlib.util.find_spec("torch") is not None:
        script = Path(__file__).resolve().parents[2] / "scenarios" / "torch_mlp.py"
        argvs.append(["torch", str(script)])
    for argv in argvs:
        p = subprocess.run([*_cli(), *argv], capture_output=True, text=True, timeout=100)
        assert p.returncode == 2, (argv, p.stderr)
        assert "needs a terminal" in p.stderr and "--headless" in p.stderr
        assert "Traceback" not in p.stderr and p.stdout == ""


def test_a_program_that_fails_before_any_backward_prints_no_threads_line(
        tmp_path: Path, capsys) -> None:
    f = _scenario(tmp_path, "    engine.tensor(2.0, requires_grad=True)\n"
                            "    raise ValueError('no backward today')")
    assert main(["run", str(f), "--headless"]) == 1
    out, err = capsys.readouterr()
    assert "events: 0\n" in out and "no backward today" in out + err
    assert "threads" not in out  # before: an empty "threads: " line
