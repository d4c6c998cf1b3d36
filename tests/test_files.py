"""``autograd_tui.files.atomic_write``: what each kind of output path gets.

Everything here lives in ``tmp_path``: a FIFO stands in for a device (the tests run
as root on some machines, where a mistake with ``/dev/null`` would replace it)."""

from __future__ import annotations

import gzip
import os
import stat
from pathlib import Path

import pytest
from forge import read_fifo

from autograd_tui.files import CannotWrite, atomic_write, write_bytes

pytestmark = pytest.mark.timeout(60)


def _umask() -> int:
    # os.umask reads by setting: fine in a test, restored at once
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_new_file_gets_the_usual_mode(tmp_path: Path) -> None:
    out = tmp_path / "new.jsonl"
    write_bytes(out, b"data")
    assert out.read_bytes() == b"data"
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~_umask()
    assert [p.name for p in tmp_path.iterdir()] == ["new.jsonl"]  # no temporary file left


@pytest.mark.parametrize("mode", [0o644, 0o600, 0o664])
def test_a_replaced_file_keeps_its_mode(tmp_path: Path, mode: int) -> None:
    out = tmp_path / "old.jsonl"
    out.write_bytes(b"old")
    out.chmod(mode)
    write_bytes(out, b"new")
    assert out.read_bytes() == b"new"
    assert stat.S_IMODE(out.stat().st_mode) == mode


def test_a_symlink_to_a_file_stays_a_link_to_the_new_content(tmp_path: Path) -> None:
    target = tmp_path / "real.jsonl"
    target.write_bytes(b"old")
    target.chmod(0o640)
    link = tmp_path / "link.jsonl"
    link.symlink_to("real.jsonl")
    write_bytes(link, b"new")
    assert link.is_symlink() and os.readlink(link) == "real.jsonl"
    assert link.read_bytes() == b"new" and target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.jsonl", "real.jsonl"]


def test_a_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    link = tmp_path / "link.jsonl"
    link.symlink_to("later.jsonl")
    write_bytes(link, b"data")
    assert link.is_symlink()
    assert (tmp_path / "later.jsonl").read_bytes() == b"data"


def test_a_dangling_symlink_into_a_missing_folder_says_which(tmp_path: Path) -> None:
    link = tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "gone" / "x.jsonl")
    with pytest.raises(CannotWrite) as e:
        write_bytes(link, b"data")
    assert str(e.value) == f"{link}: cannot write: the folder {tmp_path / 'gone'} does not exist"
    assert link.is_symlink()


def test_a_link_loop_is_one_message(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(CannotWrite, match=r"/a: cannot write: "):
        write_bytes(tmp_path / "a", b"data")


@pytest.mark.parametrize("name", ["pipe", "pipe.gz"])
def test_a_fifo_is_written_into_and_stays_a_fifo(tmp_path: Path, name: str) -> None:
    fifo = tmp_path / name
    os.mkfifo(fifo)
    reader, got = read_fifo(fifo)
    with atomic_write(fifo) as f:
        f.write(b"through the pipe")
    reader.join(timeout=30)
    data = got[0]
    assert (gzip.decompress(data) if name.endswith(".gz") else data) == b"through the pipe"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_a_symlink_to_a_fifo_writes_into_the_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "out.json"
    link.symlink_to(fifo)
    reader, got = read_fifo(fifo)
    write_bytes(link, b"{}")
    reader.join(timeout=30)
    assert got == [b"{}"]
    assert link.is_symlink() and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_character_device_is_written_into_not_replaced(tmp_path: Path, monkeypatch) -> None:
    """A device is found by ``os.stat``: faked here (over a plain file, which is what
    gets opened), so that no real device is touched."""
    dev = tmp_path / "null"
    dev.write_bytes(b"")
    real_stat = os.stat

    def fake_stat(path, *args, **kwargs):
        st = real_stat(path, *args, **kwargs)
        if Path(path) == dev:
            return os.stat_result((stat.S_IFCHR | 0o666, *tuple(st)[1:]))
        return st

    monkeypatch.setattr(os, "stat", fake_stat)
    replaced: list[object] = []
    monkeypatch.setattr(os, "replace", lambda *a: replaced.append(a))
    write_bytes(dev, b"discarded")
    assert replaced == []  # nothing renamed over it
    assert dev.read_bytes() == b"discarded"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


def test_a_directory_is_refused_with_one_message(tmp_path: Path) -> None:
    d = tmp_path / "out"
    d.mkdir()
    with pytest.raises(CannotWrite) as e:
        write_bytes(d, b"data")
    assert str(e.value) == f"{d}: cannot write: it is a directory"
    link = tmp_path / "to-dir"
    link.symlink_to(d)
    with pytest.raises(CannotWrite, match="it is a directory"):
        write_bytes(link, b"data")


def test_a_failure_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    out = tmp_path / "keep.jsonl"
    out.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_write(out) as f:
        f.write(b"half")
        raise RuntimeError("stop")
    assert out.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.jsonl"]
