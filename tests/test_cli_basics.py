"""The command line and the placeholder app."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from autograd_tui import __version__
from autograd_tui.app import AutogradApp
from autograd_tui.cli import main

REPO = Path(__file__).resolve().parent.parent


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
            assert app.session is not None and app.session.count() >= 3
            await pilot.press("q")
            await pilot.pause()
        return app

    app = asyncio.run(scenario())
    assert app.return_code == 0
    import threading

    assert not [t for t in threading.enumerate() if t.name.startswith("autograd ")]


def test_a_big_recording_says_it_is_loading(tmp_path, monkeypatch, capsys):
    """Loading a million events takes seconds: the CLI says so, then how long it took."""
    from autograd_tui import cli as cli_module

    rec = tmp_path / "r.jsonl"
    assert main(["run", "linear-relu", "--headless", "--record", str(rec)]) == 0
    capsys.readouterr()
    monkeypatch.setattr(cli_module, "BIG_RECORDING", 0)
    assert main(["replay", str(rec), "--headless"]) == 0
    err = capsys.readouterr().err
    assert f"loading {rec} (0 MiB): reading, checking and folding every event..." in err
    assert "loaded 82 events in " in err
