"""``autograd-tui torch --ranks N``: every rank of a data-parallel script, each recorded.

Not in PyTorch's engine: this is PyTorch's own launcher (``torch.distributed.run``, what
``torchrun`` runs) around N copies of ``autograd-tui torch SCRIPT --headless --record
DIR/rank{rank}.jsonl.gz`` (``{rank}`` is each rank's ``RANK``), with gloo on the loopback
address and a free port.  Where it departs from a plain ``torchrun``:

* nothing listens beyond 127.0.0.1.  torchrun's rendezvous store (a ``TCPStore``) binds
  every interface; ``agent`` hands it a socket bound to 127.0.0.1 instead
  (``master_listen_fd``), and gloo is told to use the loopback interface;
* every rank's process ends with the run.  The launcher (torchrun's agent) runs in a
  session of its own.  When it ends, when a rank fails (torchrun then stops the others)
  or when the person presses Ctrl-C, ``Launch.close`` ends the agent and then every
  process that descended from it (the ranks run in sessions of their own, so a
  process-group kill alone would miss them); if the command itself is killed, the agent
  gets SIGTERM (``PR_SET_PDEATHSIG``) and stops its ranks;
* each rank's output goes to a log of its own (torchrun's ``--redirects``), from which
  ``outcome`` reads one line per rank: completed, or what went wrong.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

LOOPBACK = "127.0.0.1"
#: the name of every rank's recording in the run's folder (``{rank}``: its RANK)
RECORD_NAME = "rank{rank}.jsonl.gz"
#: the outcome of a rank that said nothing of its end
STOPPED = ("ended before its backward finished (stopped by the launcher: another rank "
           "failed, or the run was interrupted)")


def free_port() -> int:
    """A TCP port free on the loopback address now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def record_path(folder: str | os.PathLike[str], rank: int) -> Path:
    return Path(folder) / RECORD_NAME.format(rank=rank)


def rank_command(script: str, folder: str | os.PathLike[str], entry: str | None = "main",
                 extra: Sequence[str] = ()) -> list[str]:
    """What each rank runs (after ``python -m``): the headless ``torch`` command (no
    ``--entry``: a script with no ``main()`` returning the loss runs as it is)."""
    return ["autograd_tui", "torch", script, *(["--entry", entry] if entry else []),
            "--headless", "--quiet", "--record", str(Path(folder) / RECORD_NAME), *extra]


def launcher_command(n: int, port: int, logs: str | os.PathLike[str],
                     rank_argv: Sequence[str]) -> list[str]:
    """``python -m autograd_tui.session.ranks`` (``agent``: torchrun, its store on the
    loopback address) with torchrun's options, then ``-m`` and what each rank runs."""
    return [sys.executable, "-m", "autograd_tui.session.ranks",
            "--nproc-per-node", str(n), "--nnodes", "1", "--node-rank", "0",
            "--master-addr", LOOPBACK, "--master-port", str(port), "--max-restarts", "0",
            "--monitor-interval", "0.2", "--log-dir", str(logs), "--redirects", "3",
            "-m", *rank_argv]


#: how ``torch --headless`` indents the further lines of a multi-line error (a gloo
#: error and PyTorch's "At:" trace) under ``error in the script ...``
CONTINUED = "    "


@dataclass
class Outcome:
    """One rank's end: ``ok`` (it completed), a line saying how it ended (``more``: the
    error's further lines, if it has several), and the summary lines its ``torch
    --headless --quiet`` printed."""

    rank: int
    ok: bool
    line: str
    summary: list[str]
    more: list[str] = field(default_factory=list)


class Launch:
    """The launcher, started: ``wait()`` until it ends, ``close()`` ends it and every
    process under it (also from ``finally``: Ctrl-C, an error)."""

    def __init__(self, n: int, script: str, folder: str | os.PathLike[str], *,
                 entry: str | None = "main", extra: Sequence[str] = (),
                 env: dict[str, str] | None = None) -> None:
        self.n = n
        self.folder = Path(folder)
        self.logs = self.folder / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        cmd = launcher_command(n, self.port, self.logs,
                               rank_command(script, self.folder, entry, extra))
        e = dict(os.environ if env is None else env)
        # gloo and the store on the loopback address only; ranks that torchrun stops end
        # at once (the torch command keeps SIGTERM's default under torchrun)
        e.update(GLOO_SOCKET_IFNAME=_loopback_interface(), MASTER_ADDR=LOOPBACK,
                 AUTOGRAD_TUI_RANKS=str(n), AUTOGRAD_TUI_LAUNCHER=str(os.getpid()),
                 PYTHONUNBUFFERED="1")
        self._agent_log = open(self.logs / "launcher.log", "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(cmd, env=e, stdin=subprocess.DEVNULL,
                                     stdout=self._agent_log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self._seen: dict[int, bytes] = {}  # pid -> /proc start time, of every descendant
        self._rank_pids: dict[int, int] = {}  # pid -> rank, of the ranks' processes
        self.ended: dict[int, float] = {}  # rank -> when its process was seen gone

    def poll(self) -> int | None:
        self._remember_descendants()
        return self.proc.poll()

    def recorded(self) -> list[int]:
        """The ranks whose recording is written."""
        return [k for k in range(self.n) if record_path(self.folder, k).is_file()]

    def wait(self, on_tick: object = None, every: float = 0.1) -> int:
        """Until the launcher ends (``on_tick()`` every ``every`` s meanwhile); its code."""
        while (code := self.poll()) is None:
            if callable(on_tick):
                on_tick()
            time.sleep(every)
        return code

    def close(self, grace: float = 5.0) -> None:
        """End the launcher (SIGTERM: torchrun stops its ranks), then, after ``grace``
        seconds at most, kill whatever of it and its descendants is still alive."""
        self._remember_descendants()
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (self.proc.poll() is None or self._alive()):
            self._remember_descendants()
            time.sleep(0.05)
        for pid in self._alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._agent_log.close()

    def _remember_descendants(self) -> None:
        for pid in descendants(self.proc.pid):
            if pid not in self._seen:
                self._seen[pid] = _start_time(pid)
            if pid not in self._rank_pids:  # again: first seen between fork and exec
                rank = _rank_of_process(pid)
                if rank is not None:
                    self._rank_pids[pid] = rank
        now = time.monotonic()
        for pid, rank in self._rank_pids.items():
            if rank not in self.ended and _start_time(pid) != self._seen[pid]:
                self.ended[rank] = now

    def _alive(self) -> list[int]:
        """The descendants seen so far that still run (the same process: same start)."""
        return [p for p, start in self._seen.items() if start and _start_time(p) == start]

    def outcome(self, rank: int) -> Outcome:
        """How rank ``rank`` ended, from its own output (torchrun's log of it)."""
        out, err = (_read(f) for f in _rank_logs(self.logs, rank))
        summary = [line for line in out.splitlines() if line.strip()]
        for i, line in enumerate(summary):
            if line == "completed":
                return Outcome(rank, True, "completed", summary)
            if line.startswith(("error in the script", "not supported:", "stopped:")):
                more = itertools.takewhile(lambda s: s.startswith(CONTINUED), summary[i + 1:])
                return Outcome(rank, False, line, summary,
                               [s.removeprefix(CONTINUED) for s in more])
            if line.startswith("stopped at"):  # --stop-at: found (a NaN is a failure)
                return Outcome(rank, "non-finite" not in line, line, summary)
        said = [line.removeprefix("autograd-tui: ") for line in err.splitlines()
                if line.startswith("autograd-tui: ")]
        if said:
            return Outcome(rank, False, said[-1], summary)
        last = [line for line in err.splitlines() if line.strip()]
        if last and "Error" in last[-1]:
            return Outcome(rank, False, last[-1].strip(), summary)
        code = self.exit_codes().get(rank)
        if code is not None and code < 0 and -code != signal.SIGTERM:
            name = _signal_name(-code)
            return Outcome(rank, False, f"killed by {name}" + (
                " (the kernel's out-of-memory killer sends it, among others)"
                if -code == signal.SIGKILL else ""), summary)
        if code is not None and code > 0:
            return Outcome(rank, False, f"exited with code {code}", summary)
        return Outcome(rank, False, STOPPED, summary)

    def exit_codes(self) -> dict[int, int]:
        """The failed ranks' exit codes, as torchrun's failure report lists them (a
        negative code: killed by that signal)."""
        return {int(r): int(c) for r, c in _FAILED.findall(self.launcher_text())}

    def first_to_end(self, ranks: Sequence[int],
                     signalled: Collection[int] = ()) -> int | None:
        """Of ``ranks``, the one whose process was seen gone first (polled every 0.1 s:
        a rank that fails because another did ends later than it), if any was seen.  Seen
        gone at the same poll, a rank killed by a signal (in ``signalled``) comes first:
        its peers' errors ("Connection closed by peer") follow from it, not it from them."""
        seen = [(self.ended[r], r not in signalled, r) for r in ranks if r in self.ended]
        return min(seen)[2] if seen else None

    def launcher_text(self) -> str:
        return _read(self.logs / "launcher.log")


#: a failed rank in torchrun's report: "rank : 1 (local_rank: 1)" then "exitcode : -9 ..."
_FAILED = re.compile(r"rank\s*:\s*(\d+) \(local_rank: \d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)")


def _rank_of_process(pid: int) -> int | None:
    """A rank's process (``-u -m autograd_tui torch``, as torchrun starts it): its RANK."""
    try:
        if b"\x00-u\x00-m\x00autograd_tui\x00torch\x00" not in Path(
                f"/proc/{pid}/cmdline").read_bytes():
            return None
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\x00")
    except OSError:
        return None
    rank = next((v[5:] for v in env if v.startswith(b"RANK=")), b"")
    return int(rank) if rank.isdigit() else None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _rank_logs(logs: Path, rank: int) -> tuple[Path, Path]:
    """torchrun's ``LOGDIR/<run id>/attempt_0/<local rank>/std{out,err}.log``."""
    found = sorted(logs.glob(f"*/attempt_*/{rank}"))
    base = found[-1] if found else logs / "missing"
    return base / "stdout.log", base / "stderr.log"


def _read(p: Path) -> str:
    try:
        return p.read_text(errors="replace")
    except OSError:
        return ""


def _start_time(pid: int) -> bytes:
    """Field 22 of ``/proc/PID/stat`` (b"" once it is gone): a pid with the same start
    time is the same process, not a new one that reused the number."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return b""
    fields = stat.rsplit(b")", 1)[-1].split()
    return fields[19] if len(fields) > 19 and fields[0] != b"Z" else b""


def descendants(root: int) -> list[int]:
    """Every process under ``root`` now (a scan of ``/proc``: children by parent id)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:  # no /proc (not Linux): the launcher's own SIGTERM has to do
        return []
    for d in entries:
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(b")", 1)[-1].split()[1])
        children.setdefault(parent, []).append(int(d))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), ()):
            out.append(c)
            todo.append(c)
    return out


def _loopback_interface() -> str:
    """The name of the interface of 127.0.0.1 (``lo`` on Linux)."""
    try:
        return next(name for _, name in socket.if_nameindex() if name.startswith("lo"))
    except (OSError, StopIteration):
        return "lo"


def agent(argv: Sequence[str]) -> None:
    """torchrun (``torch.distributed.run.main``) with its rendezvous store listening on
    the loopback address only: the static rendezvous's ``TCPStore`` server is handed a
    socket bound to 127.0.0.1 (``master_listen_fd``; it would bind every interface)."""
    # first, before torch's seconds of imports: the command may die meanwhile
    end_with_parent(int(os.environ.get("AUTOGRAD_TUI_LAUNCHER", "0")) or os.getppid())
    import torch.distributed.elastic.rendezvous.static_tcp_rendezvous as static
    from torch.distributed import TCPStore
    from torch.distributed.run import main

    keep: list[socket.socket] = []

    class LoopbackStore(TCPStore):  # type: ignore[misc]
        def __init__(self, host: str, port: int, world_size: int | None = None,
                     is_master: bool = False, *args: object, **kw: object) -> None:
            if is_master and kw.get("master_listen_fd") is None:
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((LOOPBACK, port))
                s.listen(1024)
                keep.append(s)
                kw["master_listen_fd"] = s.fileno()
            super().__init__(host, port, world_size, is_master, *args, **kw)

    static.TCPStore = LoopbackStore  # type: ignore[misc]
    main(list(argv))


def end_with_parent(parent: int) -> None:
    """SIGTERM to this process when ``parent``, the process that started it, dies, even by
    SIGKILL (Linux's ``PR_SET_PDEATHSIG``): the agent then stops its ranks, a rank ends
    (SIGTERM's default under torchrun), and none outlives the command."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before the call
        os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    agent(sys.argv[1:])
