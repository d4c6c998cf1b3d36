"""Two DDP ranks started as ``torch.distributed.run`` starts them (RANK, WORLD_SIZE,
MASTER_ADDR=127.0.0.1, a free MASTER_PORT), each a process of its own in a session of its
own, killed at the end whatever happens (tests/engine/test_torch_ddp.py,
tests/engine/test_ddp_lesson.py, tests/app/test_ddp_pane.py)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

RANKS = 2
ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "tests" / "engine" / "ddp_program.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(tmp: Path, mode: str, args: list[str], extra: dict[str, str] | None = None,
           timeout: float = 120, check: bool = True) -> list[tuple[int, str]]:
    """Both ranks of ``python ARGS`` (``{rank}`` in an argument: the rank); each rank's
    output.  Every process is killed at the end, also when one fails or hangs."""
    port = free_port()
    procs = []
    try:
        for r in range(RANKS):
            env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(RANKS),
                       LOCAL_WORLD_SIZE=str(RANKS), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port), AGT_DDP_OUT=str(tmp), AGT_DDP_MODE=mode,
                       OMP_NUM_THREADS="1", **(extra or {}))
            procs.append(subprocess.Popen(
                [sys.executable, *[a.replace("{rank}", str(r)) for a in args]], env=env,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                start_new_session=True))
        outs = [p.communicate(timeout=timeout)[0] for p in procs]
        for r, (p, out) in enumerate(zip(procs, outs)):
            assert p.returncode == 0 or not check, \
                f"rank {r} ({mode}) exited {p.returncode}:\n{out}"
        return [(p.returncode, out) for p, out in zip(procs, outs)]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def tool(script: Path, *extra: str) -> list[str]:
    """``autograd-tui torch SCRIPT --headless --quiet EXTRA`` as arguments of python."""
    return ["-m", "autograd_tui", "torch", str(script), "--headless", "--quiet", *extra]
