"""KeyboardInterrupt, SystemExit and Ctrl-C during a backward pass.

In PyTorch every Python exception raised in a backward (a Function, a hook, a
final callback) becomes a ``python_error`` that ``thread_main`` hands to the
GraphTask, and ``backward()`` re-raises the same object in the caller.  The
engine does the same for BaseExceptions, on the owner thread and on device
threads; a Ctrl-C that interrupts the caller's wait fails the GraphTask, so the
device threads drop its remaining tasks.  ``ThreadAborted`` (the controller's
teardown) is not an error of the node and passes through.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import torch

from autograd_tui import engine
from autograd_tui.engine import Function
from autograd_tui.engine.engine import Engine, use_engine
from autograd_tui.engine.sync import ThreadAborted

pytestmark = pytest.mark.timeout(20)


@pytest.fixture
def eng() -> Iterator[Engine]:
    e = Engine()
    obs = engine.ListObserver()
    e.add_observer(obs)
    e.obs = obs  # type: ignore[attr-defined]
    with use_engine(e):
        yield e
    assert e.close(2.0)


def busy_threads(eng: Engine) -> list[str]:
    """Engine threads not idle-waiting on their (empty) queue."""
    busy = []
    for index, q in list(eng.device_ready_queues.items()):
        thread = next(t for t in eng.threads() if t.name == f"autograd cuda:{index}")
        if len(q) or thread.ident not in q._waiters:
            busy.append(thread.name)
    busy += [t.name for t in eng.threads() if "pool" in t.name]
    return busy


def wait_idle(eng: Engine, timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    while (busy := busy_threads(eng)) and time.monotonic() < deadline:
        time.sleep(0.005)
    return busy


def starts_after_error(eng: Engine, gt_id: int) -> list[str]:
    """Nodes of GraphTask ``gt_id`` that started after its first error event."""
    events = eng.obs.events  # type: ignore[attr-defined]
    first = next(e.seq for e in events if e.kind == "error" and e.graph_task == gt_id)
    return [e.data["name"] for e in events
            if e.kind == "node_start" and e.graph_task == gt_id and e.seq > first]


def tiny_backward_time(device: str) -> float:
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    y = (x.to(device) * 2).sum()
    t0 = time.perf_counter()
    y.backward()
    elapsed = time.perf_counter() - t0
    assert x.grad.numpy().tolist() == [2.0, 2.0]
    return elapsed


def make_graph(device: str, where: str, exc: BaseException) -> tuple[engine.Tensor, list[str]]:
    """``Rec(a) + <raiser>(a)``: the raiser pops first (higher sequence_nr); Rec must never run."""
    ran: list[str] = []

    class Rec(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            ran.append("Rec")
            return g

    class Boom(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise exc

    def hook(g: engine.Tensor) -> None:
        raise exc

    def callback() -> None:
        raise exc

    class Later(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            engine.queue_callback(callback)
            return g

    x = engine.tensor([1.0, 2.0], requires_grad=True)
    a = x.to(device)
    r = Rec.apply(a)
    if where == "function":
        b = Boom.apply(a)
    elif where == "hook":
        b = a * 2
        b.register_hook(hook)
    else:
        b = Later.apply(a)
    return (r + b).sum(), ran


@pytest.mark.parametrize("where", ["function", "hook", "final_callback"])
@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("device", ["cpu", "cuda:0"])
def test_base_exception_in_backward_reaches_the_caller(eng, device, exc_type, where):
    exc = exc_type("stop")
    y, ran = make_graph(device, where, exc)
    before = set(threading.enumerate())
    t0 = time.perf_counter()
    with pytest.raises(exc_type) as info:
        y.backward()
    elapsed = time.perf_counter() - t0
    assert info.value is exc
    assert elapsed < 1.0, elapsed
    gt = max(e.graph_task for e in eng.obs.events if e.graph_task is not None)
    if where != "final_callback":
        assert ran == []  # the GraphTask's other task was dropped
        assert starts_after_error(eng, gt) == []
    else:
        assert ran == ["Rec"]  # final callbacks run after every node
    assert wait_idle(eng, 1.0) == []
    new = [t for t in threading.enumerate() if t not in before]
    assert all(t.name.startswith("autograd cuda:") for t in new), new
    # The engine still works, promptly, on the same threads.
    assert tiny_backward_time(device) < 0.5
    assert tiny_backward_time("cuda:0") < 0.5
    assert wait_idle(eng, 1.0) == []
    assert ran in ([], ["Rec"])


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("mod", [engine, torch], ids=["engine", "torch"])
def test_same_exception_object_as_pytorch(mod, exc_type):
    exc = exc_type("stop")

    class Boom(mod.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise exc

    x = mod.tensor([1.0], requires_grad=True)
    with pytest.raises(exc_type) as info:
        Boom.apply(x).sum().backward()
    assert info.value is exc
    assert x.grad is None


def test_thread_aborted_is_not_a_node_error(eng):
    """The controller's teardown signal passes through thread_main untouched."""

    class Abort(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ThreadAborted()

    x = engine.tensor([1.0], requires_grad=True)
    with pytest.raises(ThreadAborted):
        Abort.apply(x).sum().backward()
    assert "error" not in eng.obs.kinds()
    assert tiny_backward_time("cpu") < 0.5


def _interrupt_main_after(delay: float) -> threading.Timer:
    main = threading.main_thread().ident
    assert main is not None
    t = threading.Timer(delay, signal.pthread_kill, (main, signal.SIGINT))
    t.start()
    return t


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="a signal interrupts the main thread only")
def test_ctrl_c_while_waiting_fails_the_graph_task(eng):
    """Ctrl-C while the caller waits for cuda:0: backward raises KeyboardInterrupt
    and cuda:0 drops the rest of the abandoned GraphTask."""
    calls: list[float] = []

    class Slow(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            calls.append(time.perf_counter())
            time.sleep(0.1)
            return g

    x = engine.tensor([1.0], requires_grad=True)
    h = x.to("cuda:0")
    for _ in range(30):  # 3 s of work on cuda:0
        h = Slow.apply(h)
    y = h.sum()
    previous: Callable[..., object] | int | None = signal.signal(signal.SIGINT,
                                                                 signal.default_int_handler)
    try:
        timer = _interrupt_main_after(0.25)
        t0 = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            y.backward()
        interrupted = time.perf_counter()
        timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert interrupted - t0 < 1.0
    # At most the node running when Ctrl-C came finishes; no other node of it starts.
    assert wait_idle(eng, 0.5) == []
    assert len(calls) <= 4 and all(c < interrupted for c in calls), (len(calls), calls)
    gt = max(e.graph_task for e in eng.obs.events if e.graph_task is not None)
    assert starts_after_error(eng, gt) == []
    errors = [e for e in eng.obs.events if e.kind == "error" and e.graph_task == gt]
    assert [(e.node, e.data["message"]) for e in errors] == [(None, "KeyboardInterrupt")]
    assert tiny_backward_time("cuda:0") < 0.5
    time.sleep(0.3)
    assert all(c < interrupted for c in calls)
