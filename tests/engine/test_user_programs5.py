"""Student programs and training algorithms users bring (round 3), each reproduced with plain
torch: the bridge must do what PyTorch does, or say plainly where it cannot.

- Two threads, two backward passes at once (PyTorch allows it): while a bridged backward ran
  on one thread, ``torch.autograd.backward``/``grad`` were replaced process-wide, so the
  program's other thread, running a backward of its own on PyTorch's engine, was sent to
  ours (and, at the instant the patch was undone, could find the original gone).
"""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch", reason="the torch bridge needs PyTorch (pip install torch)")

from autograd_tui.engine.torch_bridge import capture, from_torch  # noqa: E402

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("no_thread_left")]

OURS = 1 << 52  # our GraphTask ids are offset by 2**52 (queries.py)


def test_another_threads_backward_stays_pytorchs_while_ours_runs() -> None:
    """Thread A steps a bridged backward and waits in a hook; meanwhile thread B runs
    ``backward()`` and ``autograd.grad`` on a graph of its own: PyTorch's engine runs them
    (its own graph-task id, below ours), and both threads' gradients are PyTorch's."""
    torch.manual_seed(0)
    na, nb = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    ref_b = torch.autograd.grad(nb(x).pow(2).sum(), list(nb.parameters()))
    ref_a = torch.autograd.grad(na(x).tanh().sum(), list(na.parameters()))
    inside, b_done = threading.Event(), threading.Event()
    ids: list[int] = []
    a_hook_ran: list[bool] = []
    errors: list[BaseException] = []

    with capture():  # as autograd-tui torch runs the forward: the non-leaf hook is seen
        ha = na(x)
        ha.register_hook(lambda g: (inside.set(), b_done.wait(10)) and None)
        loss_a = ha.tanh().sum()

    def run_a() -> None:
        try:
            from_torch(loss_a).backward()
            a_hook_ran.append(b_done.is_set())
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
        finally:
            inside.set()

    def run_b() -> None:
        try:
            inside.wait(10)
            hb = nb(x)
            hb.register_hook(lambda g: ids.append(torch._C._current_graph_task_id()))
            grads = torch.autograd.grad(hb.pow(2).sum(), list(nb.parameters()),
                                        retain_graph=True)
            assert all(torch.equal(g, r) for g, r in zip(grads, ref_b))
            hb.pow(2).sum().backward()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
        finally:
            b_done.set()

    ts = [threading.Thread(target=run_a), threading.Thread(target=run_b)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert not errors, errors
    assert a_hook_ran == [True]  # B ran while A's backward waited in its hook
    assert len(ids) == 2 and all(0 <= i < OURS for i in ids), ids  # PyTorch's GraphTasks
    assert all(torch.equal(p.grad, r) for p, r in zip(nb.parameters(), ref_b))
    assert all(torch.equal(p.grad, r) for p, r in zip(na.parameters(), ref_a))
