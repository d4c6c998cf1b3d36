"""Every benchmark's ``--help`` prints its usage, what it runs and how long, and runs nothing."""

from __future__ import annotations

import importlib
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.__main__ import discover

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["bench.__main__", *discover()])
def test_help_prints_usage_and_runs_nothing(name: str, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    module = importlib.import_module(name)
    # `python -m bench --help` must not reach any module's main
    monkeypatch.setattr(importlib, "import_module", lambda n: pytest.fail(f"imported {n}"))
    t0 = time.perf_counter()
    with pytest.raises(SystemExit) as exc:
        module.main(["--help"])
    assert exc.value.code == 0
    assert time.perf_counter() - t0 < 5.0
    out = capsys.readouterr().out
    prog = "bench" if name == "bench.__main__" else name
    assert out.startswith(f"usage: python -m {prog}")
    assert "How long:" in out
    assert (module.__doc__ or "").splitlines()[0] in out  # what it runs


def test_help_from_the_command_line() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.bench_controller", "--help"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--cpu" in done.stdout and "events per second" in done.stdout.lower()
