"""The package as a user installs it: ``python -m build`` makes a wheel and an sdist; the
wheel, installed with pip into a fresh virtual environment (no editable install, the
dependencies at constraints.txt's versions), has the app and every command working."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parent.parent


def _run(args: list[str | Path], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=400, **kw)  # type: ignore[call-overload, no-any-return]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # --no-isolation: the build backend of this environment (dev extra: setuptools, build),
    # so the test needs no download for the build itself.
    p = _run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--sdist",
              "--outdir", out, ROOT])
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return out


def test_the_sdist_holds_the_sources_license_and_changelog(dist: Path) -> None:
    (sdist,) = dist.glob("autograd_tui-*.tar.gz")
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    for must in ("pyproject.toml", "LICENSE", "README.md", "engine/engine.py",
                 "scenarios/linear_relu.py", "autograd_tui/app/app.tcss"):
        assert must in names, must


def test_the_wheel_installs_in_a_fresh_venv_and_every_command_works(
        dist: Path, tmp_path: Path) -> None:
    (wheel,) = dist.glob("autograd_tui-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / "bin"
    p = _run([bin_dir / "python", "-m", "pip", "install", "-q", "-c", ROOT / "constraints.txt",
              wheel])
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    cli = bin_dir / "autograd-tui"
    # Run from elsewhere with a clean environment: nothing of the checkout is importable.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    work = tmp_path / "work"
    work.mkdir()

    def cmd(*args: str | Path) -> subprocess.CompletedProcess[str]:
        return _run([cli, *args], cwd=work, env=env)

    listed = cmd("list")
    assert listed.returncode == 0, listed.stderr
    assert "linear-relu" in listed.stdout and "deadlock-reentrant-block" in listed.stdout
    ran = cmd("run", "linear-relu", "--headless")
    assert ran.returncode == 0, ran.stderr
    assert "completed" in ran.stdout and "AccumulateGrad" in ran.stdout
    svg = work / "x.svg"
    exported = cmd("export", "linear-relu", "--at", "5", "-o", svg)
    if exported.returncode != 0 and "dot" in exported.stderr and "not found" in exported.stderr:
        pytest.skip("Graphviz's dot is not installed (CI installs it): " + exported.stderr)
    assert exported.returncode == 0, exported.stderr
    assert svg.read_text().lstrip().startswith(("<?xml", "<svg"))
    version = _run([bin_dir / "python", "-c",
                    "import autograd_tui, importlib.metadata as m; "
                    "print(autograd_tui.__file__); print(autograd_tui.__version__, "
                    "m.version('autograd-tui'))"], cwd=work, env=env)
    where, versions = version.stdout.splitlines()
    assert where.startswith(str(env_dir)), where  # the installed copy, not the checkout
    a, b = versions.split()
    assert a == b  # one version
