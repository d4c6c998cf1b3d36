"""Reentrant backward (nested thread_main, the depth limit and the pool) and
multi-device runs (device threads, queues, the wake-up task to the owner)."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
import torch

from autograd_tui import engine
from autograd_tui.engine import Function

pytestmark = pytest.mark.timeout(60)


def _observe(eng: engine.Engine):
    obs = engine.ListObserver()
    eng.add_observer(obs)
    return obs


def make_reentrant(mod, order: list[str]):
    """PyTorch's test_reentrant_priority, written for either library."""

    class MyFunction(mod.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, x):
            order.append("MyFunction")
            return x

    class Reentrant(mod.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            with mod.enable_grad():
                ctx.x = mod.tensor(float(x.detach()), requires_grad=True, dtype=mod.float64
                                   if mod is torch else None)
                ctx.x = ctx.x - 1
            return ctx.x.detach()

        @staticmethod
        def backward(ctx, x):
            order.append("Reentrant")
            if ctx.x < 0:
                return x
            with mod.enable_grad():
                Reentrant.apply(ctx.x).backward()
            return x

    return MyFunction, Reentrant


@pytest.mark.parametrize("mod", [engine, torch], ids=["engine", "torch"])
def test_reentrant_priority_matches_pytorch(mod):
    order: list[str] = []
    MyFunction, Reentrant = make_reentrant(mod, order)
    a = MyFunction.apply(mod.tensor(6.0, requires_grad=True))
    b = Reentrant.apply(mod.tensor(9.0, requires_grad=True))
    (a * b).backward()
    # All ten reentrant nodes run before the plain one: depth beats sequence number.
    assert order == ["Reentrant"] * 10 + ["MyFunction"]


def test_reentrant_priority_needs_depth_priority():
    """When the first reentrant backward runs through a graph built before the plain
    node, only the depth rule keeps the plain node (1 = Reentrant, 0 = MyFunction)
    from jumping in after the first reentrant step."""
    from autograd_tui import scenarios

    s = scenarios.get("reentrant-priority")
    orders = {}
    for depth_priority in (True, False):
        with engine.Engine(depth_priority=depth_priority) as eng, engine.use_engine(eng):
            orders[depth_priority] = s.run({"old_graph": True})["order"].tolist()
    assert orders[True] == [1.0] * 10 + [0.0]
    assert orders[False] == [1.0, 0.0] + [1.0] * 9


def test_custom_function_calling_backward_gives_torch_gradients():
    def run(mod):
        class Inner(mod.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * 3

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                with mod.enable_grad():
                    y = x.detach().requires_grad_()
                    (y.exp() * y).sum().backward()  # reentrant: computes exp(y)(1+y)
                return g * y.grad

        kw = {"dtype": torch.float64} if mod is torch else {}
        x = mod.tensor([0.5, -1.0, 2.0], requires_grad=True, **kw)
        (Inner.apply(x) * x).sum().backward()
        return np.asarray(x.grad.detach().numpy() if mod is torch else x.grad.numpy())

    np.testing.assert_allclose(run(engine), run(torch), rtol=1e-9)


class DeepReentrant(Function):
    @staticmethod
    def forward(ctx, x):
        with engine.enable_grad():
            ctx.x = engine.tensor(float(x.detach()), requires_grad=True)
            ctx.x = ctx.x - 1
        return ctx.x.detach()

    @staticmethod
    def backward(ctx, x):
        if ctx.x < 0:
            return x
        with engine.enable_grad():
            DeepReentrant.apply(ctx.x).sum().backward()
        return x


def test_deep_reentrant_hands_off_to_pool_threads():
    with engine.Engine() as eng, engine.use_engine(eng):
        obs = _observe(eng)
        v = engine.tensor(200.0, requires_grad=True)  # 200 nested backward calls
        DeepReentrant.apply(v).sum().backward()
        assert v.grad.item() == 1.0
        handoffs = [e for e in obs.events if e.kind == "reentrant_handoff"]
        assert len(handoffs) == 200
        pool = [e for e in handoffs if e.data["mode"] == "pool"]
        # A thread nests thread_main until its own depth reaches the limit (60), then
        # hands the next GraphTask to a pool thread: on the owner, then on each pool thread.
        assert [e.data["current_depth"] for e in pool] == [60, 60, 60]
        assert [e.data["depth"] for e in pool] == [61, 122, 183]
        assert [e.thread for e in pool] == ["cpu (owner)", "reentrant-pool-1",
                                            "reentrant-pool-2"]
        ran_on = {e.thread for e in obs.events if e.kind == "node_start"}
        assert {"reentrant-pool-1", "reentrant-pool-2", "reentrant-pool-3"} <= ran_on
        # The parent sleeps on the future of the GraphTask it handed off.
        waits = [e for e in obs.events if e.kind == "thread_wait" and e.data["on"] == "future"]
        assert [e.thread for e in waits] == ["cpu (owner)", "reentrant-pool-1",
                                             "reentrant-pool-2"]



def _deep_chain(levels: int, max_recursion_depth: int, caller_frames: int) -> float:
    """``levels`` nested backwards, called from ``caller_frames`` extra frames deep."""

    def at_depth(n: int) -> None:
        if n:
            at_depth(n - 1)
        else:
            DeepReentrant.apply(v).sum().backward()

    with engine.Engine(max_recursion_depth=max_recursion_depth) as eng, engine.use_engine(eng):
        v = engine.tensor(float(levels), requires_grad=True)
        at_depth(caller_frames)
        return v.grad.item()


def test_the_recursion_limit_is_raised_only_while_needed(monkeypatch):
    """Nested thread_main calls are Python frames (about 10 a level): the engine raises
    the interpreter's recursion limit only while a nested call close to it runs, and
    puts it back after; Engine() and a shallow reentrant-deep chain leave it alone."""
    set_limit = sys.setrecursionlimit
    before = sys.getrecursionlimit()
    sets: list[int] = []
    monkeypatch.setattr(sys, "setrecursionlimit", lambda n: (sets.append(n), set_limit(n)))
    set_limit(1000)  # the interpreter's default
    try:
        engine.Engine().close()
        assert sets == [] and sys.getrecursionlimit() == 1000
        # reentrant-deep (150 levels, MAX_DEPTH 60) from a fresh thread's stack: untouched.
        result: list[float] = []
        t = threading.Thread(target=lambda: result.append(_deep_chain(150, 60, 0)))
        t.start()
        t.join(30)
        assert result == [1.0] and sets == [] and sys.getrecursionlimit() == 1000
        # From 600 frames deep, or 300 levels on one thread: raised, then restored.
        assert _deep_chain(150, 60, 600) == 1.0
        assert sets and max(sets) < 2000 and sys.getrecursionlimit() == 1000
        sets.clear()
        assert _deep_chain(300, 300, 0) == 1.0
        assert sets and max(sets) < 4000 and sys.getrecursionlimit() == 1000
    finally:
        set_limit(before)

def test_depth_limit_is_configurable():
    with engine.Engine(max_recursion_depth=5) as eng, engine.use_engine(eng):
        obs = _observe(eng)
        v = engine.tensor(12.0, requires_grad=True)  # 12 nested calls
        DeepReentrant.apply(v).sum().backward()
        pool = [e for e in obs.events
                if e.kind == "reentrant_handoff" and e.data["mode"] == "pool"]
        assert [e.data["current_depth"] for e in pool] == [5, 5]
        assert v.grad.item() == 1.0


def _three_device_graph(mod, **kw):
    dev = (lambda d: d) if mod is engine else (lambda d: "cpu")
    x = mod.tensor([1.0, 2.0], requires_grad=True, **kw)
    w = mod.tensor([0.5, -0.25], requires_grad=True, device=dev("cuda:1"), **kw)
    y = (x * 2).to(dev("cuda:0"))
    z = y.exp().to(dev("cuda:1"))
    loss = (z * w).to("cpu").sum() + (x * x).sum()
    return x, w, loss


def test_multi_device_runs_nodes_on_device_threads_and_wakes_owner():
    with engine.Engine() as eng, engine.use_engine(eng):
        obs = _observe(eng)
        x, w, loss = _three_device_graph(engine)
        loss.backward()
        tx, tw, tloss = _three_device_graph(torch, dtype=torch.float64)
        tloss.backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9)
        np.testing.assert_allclose(w.grad.to("cpu").numpy(), tw.grad.numpy(), rtol=1e-9)
        names = {}
        for e in obs.events:
            if e.kind == "dependencies_computed":
                names = {n["id"]: (n["name"], n["device"]) for n in e.data["nodes"]}
        ran = [(names[e.node], e.thread) for e in obs.events if e.kind == "node_start"]
        for (name, device), thread in ran:
            # cpu nodes run on the thread that called backward; cuda:N nodes on cuda:N.
            assert thread == ("cpu (owner)" if device == "cpu" else device), (name, device)
        assert {t for _, t in ran} == {"cpu (owner)", "cuda:0", "cuda:1"}
        assert {t.name for t in eng.threads()} == {"autograd cuda:0", "autograd cuda:1"}
    assert not eng.threads()


def _ends_on_device(mod, **kw):
    """cpu -> cuda:0 -> cuda:1 in backward; the only leaf lives on cuda:1."""
    dev = (lambda d: d) if mod is engine else (lambda d: "cpu")
    w = mod.tensor([0.5, -0.25], requires_grad=True, device=dev("cuda:1"), **kw)
    loss = (w.to(dev("cuda:0")).exp() * 3).to("cpu").sum()
    return w, loss


def test_completion_on_a_device_thread_wakes_the_owner():
    with engine.Engine() as eng, engine.use_engine(eng):
        obs = _observe(eng)
        w, loss = _ends_on_device(engine)
        loss.backward()
        tw, tloss = _ends_on_device(torch, dtype=torch.float64)
        tloss.backward()
        np.testing.assert_allclose(w.grad.to("cpu").numpy(), tw.grad.numpy(), rtol=1e-9)
        # The owner ran the first nodes; the devices ran the rest.  Whichever device
        # thread brings outstanding_tasks to 0 completes the GraphTask and must wake
        # the owner, asleep in pop(), with a dummy task.  (Which device that is depends
        # on the interleaving; tests/control/test_controller.py pins one with a schedule.)
        threads = [e.thread for e in obs.events if e.kind == "node_start"]
        assert threads[0] == "cpu (owner)" and "cuda:0" in threads and threads[-1] == "cuda:1"
        completion = [e for e in obs.events if e.kind == "completion"]
        wake = [e for e in obs.events if e.kind == "wakeup"]
        assert len(completion) == 1
        if completion[0].thread == "cpu (owner)":  # possible, if the owner is slowest
            assert not wake
            return
        assert len(wake) == 1 and wake[0].thread == completion[0].thread
        assert wake[0].data["owner"] == "cpu"
        dummy_push = [e for e in obs.events if e.kind == "push" and e.data["dummy"]]
        dummy_pop = [e for e in obs.events if e.kind == "pop" and e.data["dummy"]]
        assert [e.queue for e in dummy_push] == ["cpu"]
        assert [e.thread for e in dummy_pop] == ["cpu (owner)"]
        assert dummy_push[0].seq < dummy_pop[0].seq


def test_without_wake_owner_the_owner_is_never_woken():
    """wake_owner=False drops the dummy task: the owner would sleep forever in pop()."""
    with engine.Engine(wake_owner=False) as eng, engine.use_engine(eng):
        obs = _observe(eng)
        _, loss = _ends_on_device(engine)
        import threading

        def owner() -> None:
            with engine.use_engine(eng):
                loss.backward()

        t = threading.Thread(target=owner, name="test-owner", daemon=True)
        t.start()
        t.join(2.0)
        assert t.is_alive(), "the owner should still be waiting in pop()"
        assert any(e.kind == "completion" for e in obs.events)
        assert not any(e.kind == "wakeup" for e in obs.events)
        # Unstick it by hand (what the wake-up task would have done) so no thread leaks.
        from autograd_tui.engine.input_buffer import InputBuffer
        from autograd_tui.engine.ready_queue import NodeTask

        owner_q = next(e.queue for e in obs.events if e.kind == "thread_wait"
                       and e.thread.startswith("cpu"))
        gt_pushes = [e for e in obs.events if e.kind == "push" and e.queue == owner_q]
        assert gt_pushes
        queue = eng.cpu_ready_queues[owner_q]
        queue.push(NodeTask(None, None, InputBuffer(0), is_shutdown_task=True), False)
        t.join(5.0)
        assert not t.is_alive()


def test_error_in_device_node_reaches_caller_and_engine_recovers():
    class Boom(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom on the device")

    with engine.Engine() as eng, engine.use_engine(eng):
        x = engine.tensor([1.0, 2.0], requires_grad=True)
        y = Boom.apply(x.to("cuda:0")).to("cpu").sum()
        with pytest.raises(ValueError, match="boom on the device"):
            y.backward()
        x2 = engine.tensor([3.0], requires_grad=True)
        (x2.to("cuda:0") * 2).to("cpu").sum().backward()
        assert x2.grad.tolist() == [2.0]
