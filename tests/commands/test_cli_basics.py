"""The command line and the placeholder app."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from autograd_tui import __version__
from autograd_tui.app import AutogradApp
from autograd_tui.commands import main

REPO = Path(__file__).resolve().parents[2]


def test_module_help_exits_zero_and_prints_usage() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "autograd_tui", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout
    assert "autograd-tui" in proc.stdout


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert __version__ in capsys.readouterr().out


@pytest.mark.timeout(60)
def test_app_opens_steps_and_quits_leaving_no_engine_thread() -> None:
    async def scenario() -> AutogradApp:
        app = AutogradApp("linear-relu")
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            for _ in range(3):
                await pilot.press("n")
                await pilot.pause(0.05)
            await pilot.pause(0.2)
            assert app.debugger.session is not None and app.debugger.session.count() >= 3
            await pilot.press("q")
            await pilot.pause()
        return app

    app = asyncio.run(scenario())
    assert app.return_code == 0
    import threading

    assert not [t for t in threading.enumerate() if t.name.startswith("autograd ")]


def test_a_big_recording_says_it_is_loading(tmp_path, monkeypatch, capsys):
    """Loading a million events takes seconds: the CLI says so, then how long it took."""
    from autograd_tui.commands import common

    rec = tmp_path / "r.jsonl"
    assert main(["run", "linear-relu", "--headless", "--record", str(rec)]) == 0
    capsys.readouterr()
    monkeypatch.setattr(common, "BIG_RECORDING", 0)
    assert main(["replay", str(rec), "--headless"]) == 0
    err = capsys.readouterr().err
    assert f"loading {rec} (0 MiB): reading, checking and folding every event..." in err
    assert "loaded 82 events in " in err


def test_run_in_the_app_checks_the_arguments_and_builds_no_run(monkeypatch, capsys):
    """Without --headless the arguments are checked here; the app builds the one Run."""
    from autograd_tui.commands import run as run_cmd
    from autograd_tui.session import run as runner

    def no_run(*args, **kwargs):
        raise AssertionError("a throw-away Run was built")

    opened = []
    monkeypatch.setattr(runner, "Run", no_run)
    monkeypatch.setattr(run_cmd, "open_app", lambda *a, **k: opened.append((a, k)) or 0)
    assert main(["run", "linear-relu", "--param", "x=2", "--engine", "reentrant=block",
                 "--policy", "random", "--seed", "3"]) == 0
    assert opened == [(("linear-relu",), {"params": {"x": "2"}, "policy": "random", "seed": 3,
                                          "engine_overrides": {"reentrant": "block"}})]
    capsys.readouterr()
    for bad, message in [
        (["--param", "x=abc"], "parameter 'x' must be float, not 'abc'"),
        (["--param", "nope=1"], "unknown parameter 'nope'"),
        (["--param", "x"], "--param 'x' must look like KEY=VALUE"),
        (["--engine", "bogus=1"], "unknown engine option 'bogus'"),
        (["--engine", "reentrant=sideways"], "reentrant must be 'nested' or 'block'"),
        (["--engine", "max_recursion_depth=-1"], "max_recursion_depth must be >= 0"),
        (["--policy", "fifo"], "unknown policy 'fifo'"),
    ]:
        assert main(["run", "linear-relu", *bad]) == 2, bad
        err = capsys.readouterr().err
        assert err.startswith("autograd-tui: ") and message in err and err.count("\n") == 1
    assert main(["run", "linear-rlu"]) == 2
    assert "did you mean linear-relu" in capsys.readouterr().err
    assert len(opened) == 1


def test_the_commands_have_no_import_cycle():
    """common imports no command; a command imports common (and the helper modules, not
    commands: the progress bars, serve's guard and apps, torch --ranks and the ranks'
    files, which imports common only), no other command."""
    import ast

    for path in (REPO / "autograd_tui" / "commands").glob("*.py"):
        mine = {node.module for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.ImportFrom) and node.module
                and node.module.startswith("autograd_tui.commands")}
        mine -= {"autograd_tui.commands.progress", "autograd_tui.commands.serve_guard",
                 "autograd_tui.commands.serve_apps", "autograd_tui.commands.torch_ranks"}
        if path.stem in ("common", "progress", "serve_guard", "serve_apps"):
            assert not mine, mine
        elif path.stem not in ("parser", "__init__"):
            assert mine == {"autograd_tui.commands.common"}, (path.name, mine)


def test_values_are_printed_as_text_and_a_nan_norm_replays(tmp_path, capsys):
    """``[nan,  0.]`` is not rich markup; a recording's NaN norm (the string "nan") is
    printed, not a traceback."""
    rec = tmp_path / "nan.jsonl"
    assert main(["run", "anomaly-nan", "--headless", "--quiet", "--record", str(rec)]) == 0
    assert "grad x.grad without anomaly mode = [nan,  0.]" in capsys.readouterr().out
    assert main(["replay", str(rec), "--headless"]) == 0
    out = capsys.readouterr().out
    assert "grad x.grad without anomaly mode = ['nan', 0.0] (shape [2], norm nan)" in out
