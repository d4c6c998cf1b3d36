"""A tiny DDP script for the ``--ranks`` tests: two ranks (gloo), each with its own batch.

``DDP_TINY_FAIL_RANK=K``: rank K raises before its forward (a multi-line message, as a
gloo error with PyTorch's "At:" trace, with an ESC in it) and the others wait in a
barrier (as a rank waits for a peer that is gone): the launcher must end them.
``DDP_TINY_HANG=1``: every rank sleeps (for the Ctrl-C test), having joined the process
group when the script was imported (before the run: a rendezvous slow on a loaded machine
is not the program standing still, which the torch command stops after 10 s) and, with
``DDP_TINY_READY=DIR``, written ``DIR/rankK`` (the test's signal that the ranks sleep).
``DDP_TINY_KILL_RANK=K``: rank K is killed by SIGKILL (as the kernel's OOM killer would),
the others wait."""

import os
import signal
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

KEEP: list[object] = []  # the DDP module lives through the backward

if os.environ.get("DDP_TINY_HANG"):
    dist.init_process_group("gloo")


def main() -> torch.Tensor:
    if not dist.is_initialized():
        dist.init_process_group("gloo")
    rank = dist.get_rank()
    if os.environ.get("DDP_TINY_HANG"):
        if os.environ.get("DDP_TINY_READY"):
            open(os.path.join(os.environ["DDP_TINY_READY"], f"rank{rank}"), "w").close()
        time.sleep(600)
    if os.environ.get("DDP_TINY_KILL_RANK") == str(rank):
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get("DDP_TINY_KILL_RANK"):
        dist.barrier()
    if os.environ.get("DDP_TINY_FAIL_RANK") == str(rank):
        raise RuntimeError(f"rank {rank} fails on purpose\n\nAt:\n  pair.cc(553): \x1b[2Jgone\n")
    if os.environ.get("DDP_TINY_FAIL_RANK"):
        dist.barrier()  # the failed rank never comes
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)))
    KEEP.append(model)
    torch.manual_seed(1 + rank)
    return model(torch.randn(3, 4)).sum()
