"""Freeing a long graph does not recurse: a 100,000-node chain is built, backwarded (or
not) and freed in a fresh process, which exits 0; and it is freed on a thread whose C
stack is 256 KB, far less than one frame per node (a teardown that recursed once per
node, as a chain's ``next_edges`` hold the next node, would overflow it: SIGSEGV).

PyTorch deletes a chain iteratively (``function.cpp``: ``deleteNode`` gathers the next
functions whose last reference it holds and deletes them in a loop); ours is Python
objects, whose nested deallocation CPython bounds the same way (the "trashcan": past 50
nested deallocs it defers the rest to a loop).  These tests keep every link of a chain
(a node, its ``next_edges`` list, an ``Edge``, a saved tensor, a hook) on that path."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(120)

PROGRAM = textwrap.dedent("""
    import gc, sys, threading
    from autograd_tui import engine

    n, backward, link = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
    stack_kb = int(sys.argv[4])
    gc.disable()  # freed by reference counts alone, as the last reference goes
    x = engine.tensor([0.5, 0.25], requires_grad=True)
    y = x
    for i in range(n):
        if link == "mul":
            y = y * x  # MulBackward0 saves both operands: the previous value and the leaf
        elif link == "tanh":
            y = (y * 1.0).tanh()  # TanhBackward0 saves its result: a node <-> tensor cycle
        else:
            y = y * 1.0
            y.register_hook(lambda g, prev=y: g)  # a hook holding the previous tensor
    loss = y.sum()
    nodes, fn = 0, loss.grad_fn
    while fn is not None and fn.next_functions:
        nodes, fn = nodes + 1, fn.next_functions[0][0]
    assert nodes >= n, nodes
    if backward:
        loss.backward()
        assert x.grad is not None
    holder = [loss]
    del y, loss, fn

    def free():
        holder.clear()  # the last reference to the root: the whole chain goes here
        gc.collect()  # and the cycles, if any, here
        print("freed", nodes, flush=True)

    if stack_kb:
        threading.stack_size(stack_kb * 1024)
        t = threading.Thread(target=free)
        t.start()
        t.join()
    else:
        free()
""")


def run(n: int, backward: bool, link: str = "mul", stack_kb: int = 0) -> str:
    out = subprocess.run([sys.executable, "-c", PROGRAM, str(n), "1" if backward else "0",
                          link, str(stack_kb)], capture_output=True, text=True, timeout=110)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    return out.stdout


@pytest.mark.parametrize("backward", [True, False], ids=["backwarded", "not backwarded"])
def test_a_100k_node_chain_is_freed_and_the_process_exits_0(backward):
    assert run(100_000, backward).split()[0] == "freed"


@pytest.mark.parametrize("link", ["mul", "tanh", "hook"])
def test_a_100k_node_chain_is_freed_on_a_256kb_stack(link):
    """256 KB is about 2.6 bytes a node: only a teardown of bounded depth fits."""
    out = run(100_000, link == "mul", link, stack_kb=256)
    assert out.split()[0] == "freed" and int(out.split()[1]) >= 100_000


TORCH_PROGRAM = textwrap.dedent("""
    import sys, threading
    import torch
    from autograd_tui.engine.sync import start_thread
    from autograd_tui.engine.torch_bridge import from_torch

    n, how = int(sys.argv[1]), sys.argv[2]

    def body():
        w = torch.ones(2, requires_grad=True)
        x = w
        for _ in range(n):
            x = x * 1.0001
        graph = from_torch(x.sum())  # the bridge walks it: every node gets its wrapper
        del graph, x  # the last references: the chain goes here
        print("freed", flush=True)

    t = threading.Thread(target=body)
    if how == "default":
        threading.stack_size(8 << 20)  # the platform's usual default
        t.start()
    else:
        start_thread(t)  # how the engine and the controller start theirs
    t.join()
""")


def run_torch(n: int, how: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", TORCH_PROGRAM, str(n), how],
                          capture_output=True, text=True, timeout=110)


def test_a_walked_100k_node_torch_chain_is_freed_on_the_threads_we_start():
    """PyTorch frees a node that Python has wrapped through the wrapper, once per node
    along a chain (not by ``deleteNode``'s loop): on an 8 MiB stack a 100,000-node chain
    that the bridge walked kills the process (SIGSEGV); the threads the engine and the
    controller start (``sync.start_thread``) free it and the process exits 0."""
    crashed = run_torch(100_000, "default")
    assert crashed.returncode != 0 and "freed" not in crashed.stdout, crashed.returncode
    ours = run_torch(100_000, "ours")
    assert ours.returncode == 0 and ours.stdout.split() == ["freed"], ours.stderr[-2000:]
