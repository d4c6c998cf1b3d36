"""Installed (not editable), the project is one name in site-packages: ``autograd_tui``,
with the engine and the scenarios inside it, and it runs from anywhere."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(out), str(ROOT)], capture_output=True, text=True,
                       timeout=240)
    assert p.returncode == 0, p.stderr
    (whl,) = out.glob("autograd_tui-*.whl")
    return whl


def test_the_wheel_owns_one_top_level_name(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"autograd_tui"}
    for must in ("autograd_tui/engine/engine.py", "autograd_tui/engine/ready_queue.py",
                 "autograd_tui/scenarios/linear_relu.py", "autograd_tui/app/app.tcss",
                 "autograd_tui/control/controller.py", "autograd_tui/history/history.py",
                 "autograd_tui/commands/parser.py", "autograd_tui/export/dot.py"):
        assert must in names, must


def test_the_installed_package_runs_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site)}
    code = ("import autograd_tui, sys\n"
            "from autograd_tui import engine as torch, scenarios\n"
            "a = torch.tensor([1.0, 2.0], requires_grad=True)\n"
            "(a * a).sum().backward()\n"
            "print(a.grad.numpy().tolist(), len(scenarios.names()))\n"
            "assert autograd_tui.__file__.startswith(sys.argv[1]), autograd_tui.__file__\n"
            "assert torch.__file__.startswith(sys.argv[1]), torch.__file__\n"
            "assert 'engine' not in sys.modules and 'scenarios' not in sys.modules\n"
            "from autograd_tui.commands import main\n"
            "sys.exit(main(['run', 'error-in-node', '--headless', '--quiet']))\n")
    p = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    builtins = len([f for f in (ROOT / "scenarios").glob("*.py") if not f.name.startswith("_")])
    assert p.stdout.startswith(f"[2.0, 4.0] {builtins}\n") and "completed" in p.stdout
