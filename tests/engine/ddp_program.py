"""A DDP program for tests/engine/test_torch_ddp.py: two ranks (gloo on 127.0.0.1),
rank-dependent data, a three-layer model in DistributedDataParallel with buckets small
enough that DDP makes several.

Run by ``autograd-tui torch`` under ``torch.distributed.run`` (``main`` returns the loss;
the tool runs the backward), or with ``AGT_DDP_PLAIN=1`` by PyTorch alone (this file as a
script: the backward by ``loss.backward()``).  At exit each rank writes its parameters'
``.grad`` to ``$AGT_DDP_OUT/<mode>-<rank>.pt``; with ``AGT_DDP_HOOK=1`` the program
registers its own communication hook (which the tool must wrap, not replace).
"""

import atexit
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

MODEL: list = []


def build() -> DDP:
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                              torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    # 16*16 floats = 1 KiB: a cap of 1.2 KiB per bucket gives DDP several buckets from the
    # first iteration (bucket_cap_mb alone gives one bucket until DDP rebuilds them)
    ddp = DDP(net, bucket_cap_mb_list=[0.0012])
    if os.environ.get("AGT_DDP_HOOK") == "1":
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        def my_hook(state, bucket):
            my_hook.calls += 1
            return allreduce_hook(state, bucket)

        my_hook.calls = 0
        ddp.register_comm_hook(None, my_hook)
        atexit.register(lambda: print(f"my_hook called {my_hook.calls} times", flush=True))
    MODEL.append(ddp)
    atexit.register(dump)
    return ddp


def dump() -> None:
    out = os.environ.get("AGT_DDP_OUT")
    if out and MODEL:
        mode = os.environ.get("AGT_DDP_MODE", "tool")
        ddp = MODEL[0]
        names = {id(p): n for n, p in ddp.module.named_parameters()}
        grads = {n: p.grad for n, p in ddp.module.named_parameters()}
        buckets = [(b.index(), [names[id(p)] for p in b.parameters()])
                   for b in ddp.reducer._get_zeros_like_grad_buckets()]  # DDP's own
        torch.save({"grads": grads, "buckets": buckets},
                   os.path.join(out, f"{mode}-{dist.get_rank()}.pt"))


def main():
    ddp = build()
    torch.manual_seed(100 + dist.get_rank())  # each rank its own batch
    x = torch.randn(5, 8)
    return ddp(x).pow(2).sum()


if __name__ == "__main__":
    main().backward()
