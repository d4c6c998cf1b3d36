"""DDP lesson: a parameter unused on one rank, and the bucket that never becomes ready.

Run it on two ranks (gloo on 127.0.0.1): ``autograd-tui torch --ranks 2
scenarios/_torch_ddp_unused.py`` (or ``torchrun --nproc-per-node 2 -m autograd_tui torch
scenarios/_torch_ddp_unused.py``).  ``LESSON_FIX`` picks a fix (``FIXES``); ``LESSON_TIMEOUT`` the
process group's timeout in seconds; ``LESSON_NEXT=1`` runs the next iteration's forward
pass at exit (PyTorch's own, where it says what it says; with
``TORCH_DISTRIBUTED_DEBUG=INFO`` its error names the parameters, as ours do).  Not a
built-in scenario (the leading underscore): it needs two processes.
"""

import atexit
import datetime
import os

TITLE = "DDP: a parameter unused on one rank"
#: the keyword arguments each fix gives DistributedDataParallel
FIXES = {"none": {}, "find_unused_parameters": {"find_unused_parameters": True},
         "static_graph": {"static_graph": True}}
#: the parameters rank 1 leaves unused (the branch it skips)
UNUSED_ON = {1: ("b.weight", "b.bias")}
#: what PyTorch 2.13 says, and where (checked by tests/engine/test_ddp_lesson.py)
NEXT_ITERATION_ERROR = "Expected to have finished reduction in the prior iteration"
NOTES = """
### DDP: a parameter unused on one rank

```
h = relu(a(x))
if rank == 0:            # a branch: rank 1 never uses b
    h = relu(b(h))
loss = c(h).pow(2).sum()  # model = DDP(Net(), find_unused_parameters=False)
```

DDP's reducer groups the parameters into buckets and all-reduces a bucket once the
gradient of every parameter in it has been accumulated (a hook on each parameter's
`AccumulateGrad`).  Buckets are launched in order; when the last one is launched the
reducer queues `finalize_backward` on the GraphTask, which waits for every all-reduce.

**What to watch.**
1. On rank 1, `b.weight` and `b.bias` get no gradient: their `AccumulateGrad` never runs,
   so the bucket holding them never becomes ready (`ddp_bucket_never_ready`, the DDP pane:
   `D`), and no bucket after it is launched either.  The backward itself completes, with
   rank 1's *local* gradients: nothing was averaged.
2. On rank 0 every bucket is launched; its backward waits in `finalize_backward` for the
   all-reduce of the bucket rank 1 never started: a hang until the process group's
   timeout (30 minutes by default for gloo), or an error as soon as rank 1 exits.
3. At rank 1's next forward, DDP raises `RuntimeError: Expected to have finished
   reduction in the prior iteration before starting a new one`.

The fixes: `find_unused_parameters=True` (DDP walks the graph after the forward and
marks the unused parameters ready at the first hook) or `static_graph=True` (the first
iteration all-reduces every bucket at the end of the backward, from a final callback,
and learns which parameters are unused).  Run each with `LESSON_FIX=...`.

**Ask a student:** why does rank 1 not notice anything until the next iteration?

**Source:** `Reducer::autograd_hook`, `mark_variable_ready`, `finalize_backward` in
`torch/csrc/distributed/c10d/reducer.cpp`; `Engine::queue_callback` in
`torch/csrc/autograd/engine.cpp`.
"""

MODEL: list = []


def build():
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.c = (torch.nn.Linear(8, 16), torch.nn.Linear(16, 16),
                                      torch.nn.Linear(16, 4))

        def forward(self, x, use_b):
            h = torch.relu(self.a(x))
            if use_b:
                h = torch.relu(self.b(h))
            return self.c(h)

    timeout = datetime.timedelta(seconds=float(os.environ.get("LESSON_TIMEOUT", "60")))
    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=timeout)
        atexit.register(close)  # registered first, so it runs after the others below
    torch.manual_seed(0)
    fix = FIXES[os.environ.get("LESSON_FIX", "none")]
    # 1.2 KiB per bucket: DDP makes several buckets from the first iteration
    ddp = DDP(Net(), bucket_cap_mb_list=[0.0012], **fix)
    MODEL.append(ddp)
    # without a fix only the rank that errs runs on (the others wait in their backward)
    if os.environ.get("LESSON_NEXT") == "1" and (fix or dist.get_rank() in UNUSED_ON):
        atexit.register(next_iteration)
    if os.environ.get("LESSON_OUT"):
        atexit.register(dump, os.environ["LESSON_OUT"])
    return ddp


def step(ddp):
    import torch
    import torch.distributed as dist

    r = dist.get_rank()
    torch.manual_seed(100 + r + 10 * len(MODEL))
    MODEL.append(None)  # one more iteration
    return ddp(torch.randn(5, 8), use_b=r not in UNUSED_ON).pow(2).sum()


def next_iteration() -> None:
    """The next iteration's forward (and backward), by PyTorch alone: what it says."""
    try:
        step(MODEL[0]).backward()
        print("next iteration: completed", flush=True)
    except RuntimeError as e:
        lines = str(e).splitlines()
        print(f"next iteration: RuntimeError: {lines[0]}", flush=True)
        for line in lines:  # with TORCH_DISTRIBUTED_DEBUG=INFO: the parameters, by name
            if line.startswith("Parameters which did not receive grad"):
                print(f"next iteration: {line}", flush=True)


def close() -> None:
    """At exit: the model, then the process group, before the interpreter tears down
    (left to it, gloo's threads may be destroyed while joinable: SIGABRT)."""
    import gc

    import torch.distributed as dist

    MODEL.clear()
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()


def dump(folder: str) -> None:
    """Each parameter's ``.grad`` to ``FOLDER/<rank>.pt`` (tests compare the runs)."""
    import torch
    import torch.distributed as dist

    grads = {n: p.grad for n, p in MODEL[0].module.named_parameters()}
    torch.save(grads, os.path.join(folder, f"{dist.get_rank()}.pt"))


def main():
    return step(build())


if __name__ == "__main__":
    main().backward()
