"""A tiny DDP script for the ``--ranks`` tests: two ranks (gloo), each with its own batch.

``DDP_TINY_FAIL_RANK=K``: rank K raises before its forward (a multi-line message, as a
gloo error with PyTorch's "At:" trace, with an ESC in it) and the others wait in a
barrier (as a rank waits for a peer that is gone): the launcher must end them.
``DDP_TINY_HANG=1``: every rank sleeps (for the Ctrl-C test).  ``DDP_TINY_KILL_RANK=K``:
rank K is killed by SIGKILL (as the kernel's OOM killer would), the others wait."""

import os
import signal
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

KEEP: list[object] = []  # the DDP module lives through the backward


def main() -> torch.Tensor:
    if not dist.is_initialized():
        dist.init_process_group("gloo")
    rank = dist.get_rank()
    if os.environ.get("DDP_TINY_HANG"):
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
