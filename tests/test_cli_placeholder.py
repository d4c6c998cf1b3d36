"""The command line and the placeholder app."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from autograd_tui import __version__
from autograd_tui.app import PLACEHOLDER_TEXT, AutogradApp
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


@pytest.mark.timeout(30)
def test_placeholder_app_opens_and_quits() -> None:
    async def scenario() -> AutogradApp:
        app = AutogradApp()
        async with app.run_test(notifications=True) as pilot:
            placeholder = app.query_one("#placeholder")
            assert "visual debugger is coming" in str(placeholder.render())
            await pilot.press("question_mark")
            await pilot.pause()
            toasts = app.screen.query("Toast")
            assert any("quit" in str(toast.render()) for toast in toasts)
            await pilot.press("q")
            await pilot.pause()
            assert not app.is_running
        return app

    app = asyncio.run(scenario())
    assert app.return_code == 0
    assert "Press q to quit" in PLACEHOLDER_TEXT
