""""Stuck" means waiting on something that cannot come, never computing: a thread between
two gates that uses CPU is waited for however long it takes (``threads.sample``), one
blocked where the controller cannot see is reported, with the line it waits at, and a
teardown leaves no thread behind, even one that computes (no SIGABRT at exit)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

from autograd_tui import engine
from autograd_tui.control import Controller, table

pytestmark = pytest.mark.timeout(60)

STUCK_AFTER = 0.3


def spin(seconds: float) -> int:
    """Pure Python work for ``seconds`` (the thread's CPU time advances all along)."""
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        n += sum(range(200))
    return n


class Slow(engine.Function):
    """A backward that computes for 1.5 s between two gates."""

    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        spin(1.5)
        return g * 2.0


def slow_program() -> float:
    spin(1.5)  # a forward that takes long: one controller step
    x = engine.tensor(3.0, requires_grad=True)
    Slow.apply(x * 1.0).sum().backward()
    return float(x.grad.item())


def no_thread_left(before: set[threading.Thread]) -> bool:
    return all(not t.is_alive() for t in set(threading.enumerate()) - before)


@pytest.mark.parametrize("clock", ["cpu clock", "process clock"])
def test_a_thread_that_computes_for_seconds_is_not_stuck(clock, monkeypatch):
    if clock == "process clock":  # no per-thread CPU clock on the platform
        monkeypatch.setattr(table, "own_cpu_clock", lambda: None)
    before = set(threading.enumerate())
    busy: list[tuple[str, float]] = []
    ctl = Controller(engine.Engine(), stuck_after=STUCK_AFTER)
    ctl.on_busy = lambda name, seconds: busy.append((name, seconds))
    try:
        ctl.start(slow_program)
        t0 = time.monotonic()
        r = ctl.run()
        assert r.status == "finished", r.report
        assert ctl.program_error is None and ctl.program_result == 2.0
        assert time.monotonic() - t0 >= 3.0  # both long steps were waited for
        # the caller heard of the long steps, once a second, with the thread's name
        assert busy and {name for name, _ in busy} == {"cpu (owner)"}
        assert max(s for _, s in busy) >= 1.0
    finally:
        assert ctl.close()
    assert no_thread_left(before)


def test_a_free_running_wait_waits_for_a_thread_that_computes():
    ctl = Controller(engine.Engine(), serialized=False, stuck_after=STUCK_AFTER)
    try:
        ctl.start(slow_program)
        r = ctl.wait(timeout=0.5)  # 0.5 s with nothing computed, not 0.5 s in all
        assert r.status == "finished" and ctl.program_result == 2.0
    finally:
        assert ctl.close()


def blocked_program(event: threading.Event) -> None:
    x = engine.tensor(2.0, requires_grad=True)
    y = x * 3.0
    event.wait()  # an untracked wait: nothing the controller can see will end it
    y.backward()


@pytest.mark.parametrize("clock", ["cpu clock", "process clock"])
def test_a_thread_blocked_on_an_untracked_event_is_stuck_and_says_where(clock, monkeypatch):
    if clock == "process clock":
        monkeypatch.setattr(table, "own_cpu_clock", lambda: None)
    before = set(threading.enumerate())
    event = threading.Event()
    ctl = Controller(engine.Engine(), stuck_after=STUCK_AFTER)
    try:
        ctl.start(blocked_program, event)
        t0 = time.monotonic()
        r = ctl.run()
        assert r.status == "stuck" and r.thread == "cpu (owner)"
        assert time.monotonic() - t0 < 5.0
        text = r.report.explanation
        assert "has not reached a gate" in text and "uses no CPU" in text
        # where: the standard library's line, and the program's own line that called it
        assert "threading.py" in text
        assert "test_stuck.py" in text and "in blocked_program (event.wait()" in text
        assert r.report.kind == "stuck" and not r.report.real
        event.set()  # what it waited for comes: the run goes on to the end
        assert ctl.run().status == "finished" and ctl.program_error is None
    finally:
        event.set()
        assert ctl.close()
    assert no_thread_left(before)


def test_close_ends_a_thread_that_computes_between_gates():
    """No gate stops a thread in a long computation: close() raises ThreadAborted in it
    at its next Python line, and it is gone in well under its 30 s of work."""
    before = set(threading.enumerate())
    ctl = Controller(engine.Engine(), stuck_after=STUCK_AFTER)
    ctl.start(lambda: spin(30.0))
    driver = threading.Thread(target=ctl.run, daemon=True)
    driver.start()
    time.sleep(0.5)  # the program is in its 30 s step
    t0 = time.monotonic()
    assert ctl.close(timeout=5.0)
    assert time.monotonic() - t0 < 5.0
    driver.join(5.0)
    assert not driver.is_alive() and ctl.program_error is None
    assert no_thread_left(before)


ABORT = textwrap.dedent("""
    import threading, time
    import torch
    from autograd_tui import engine
    from autograd_tui.control import Controller

    torch.set_num_threads(1)

    def program():
        a = torch.randn(200, 200)
        t0 = time.monotonic()
        while time.monotonic() - t0 < {seconds}:
            a = torch.tanh(a @ a)
        return 1

    ctl = Controller(engine.Engine(), stuck_after=0.3)
    ctl.start(program)
    if {close_early}:
        threading.Thread(target=ctl.run, daemon=True).start()
        time.sleep(0.5)
        print("closed", ctl.close(timeout=2.0))
    else:
        print("status", ctl.run().status)
        print("closed", ctl.close(timeout=2.0))
""")


@pytest.mark.parametrize("close_early", [False, True])
def test_a_torch_forward_longer_than_stuck_after_exits_cleanly(close_early):
    """Was: "stopped: stuck" after stuck_after, then SIGABRT at exit ("terminate called
    without an active exception": the daemon thread, still in torch's C++ code, ended by
    the interpreter's finalization)."""
    pytest.importorskip("torch")
    src = ABORT.format(seconds=2.0 if not close_early else 30.0, close_early=close_early)
    out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True,
                         timeout=50)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "terminate called" not in out.stderr
    if close_early:
        assert out.stdout.split() == ["closed", "True"]
    else:
        assert out.stdout.split() == ["status", "finished", "closed", "True"]
