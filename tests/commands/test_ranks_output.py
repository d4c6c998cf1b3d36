"""What ``torch --ranks N --headless`` prints of each rank's summary, in process: the
launcher is a stand-in whose ranks "completed" with the lines a rank's ``torch --headless
--quiet`` prints (no rank is started: a real run is tests/commands/test_torch_ranks.py).

Without ``--record`` the ranks record into a temporary folder removed at the end: the
output said ``recorded 94 events to /tmp/autograd-tui-ranks-.../rank1.jsonl.gz``, a file
that no longer exists.  It now says the events counted and no path; with ``--record DIR``
the path stays (the file is there)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from autograd_tui.commands.parser import main
from autograd_tui.session import ranks

if importlib.util.find_spec("torch") is None:  # as the command checks it: no import
    pytest.skip("--ranks needs PyTorch", allow_module_level=True)


class FakeLaunch:
    """The launcher's interface, its ranks done at once, each with a summary."""

    folders: list[Path] = []

    def __init__(self, n: int, script: str, folder: Path, **_: Any) -> None:
        self.n, self.folder, self.port = n, Path(folder), 12345
        FakeLaunch.folders.append(self.folder)

    def wait(self, on_tick: Any = None) -> int:
        return 0

    def close(self) -> None:
        pass

    def recorded(self) -> list[int]:
        return list(range(self.n))

    def outcome(self, k: int) -> ranks.Outcome:
        path = ranks.record_path(self.folder, k)
        return ranks.Outcome(k, True, "completed", [
            "grad w: shape [4]", "completed", f"recorded {90 + k} events to {path}"])


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    FakeLaunch.folders = []
    monkeypatch.setattr(ranks, "Launch", FakeLaunch)
    monkeypatch.setenv("NO_COLOR", "1")
    script = tmp_path / "ddp.py"
    script.write_text("def main():\n    pass\n")
    return script


def test_a_temporary_folder_is_not_named(fake: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["torch", str(fake), "--ranks", "2", "--headless"]) == 0
    out = capsys.readouterr().out
    (folder,) = FakeLaunch.folders
    assert not folder.exists()  # removed: no line may name it
    assert "rank 0: completed" in out and "rank 1: completed" in out
    assert "  recorded 90 events\n" in out and "  recorded 91 events\n" in out, out
    assert "grad w: shape [4]" in out
    assert folder.name not in out and " to " not in out and "recordings:" not in out, out


def test_a_record_folder_is_named(fake: Path, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    assert main(["torch", str(fake), "--ranks", "2", "--headless", "--record", str(runs)]) == 0
    out = capsys.readouterr().out
    assert f"recorded 91 events to {runs / 'rank1.jsonl.gz'}" in out, out
    assert f"recordings: {runs}" in out
