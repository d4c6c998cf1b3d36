"""Shared fixtures: every test leaves no engine thread behind.

Engine threads are named ``autograd cuda:N`` / ``autograd reentrant-pool-N``.
The default engine's device threads live as long as the engine, as in
PyTorch; they are shut down at the end of the session, and the session then
fails if any engine thread is still alive.
"""

from __future__ import annotations

import threading
import time

import pytest

from autograd_tui import engine


def _engine_threads(exclude: set[threading.Thread] = frozenset()) -> list[threading.Thread]:  # type: ignore[assignment]
    return [t for t in threading.enumerate()
            if t.name.startswith("autograd ") and t.is_alive() and t not in exclude]


#: long tests that collection (alphabetical) puts last, moved first: pytest-xdist hands out
#: tests in collection order, so the one worker that got test_wheel's build and install
#: (27 s in a loaded run) ran on alone while the other, done, waited
RUN_FIRST = ("test_wheel.py",)


#: Textual's Pilot waits after each key until a window of SLEEP_GRANULARITY (20 ms) passes
#: with the process idle (SLEEP_IDLE of CPU at most), twice per key: most of an app test's
#: wall time on an idle machine (test_app.py: 2,100 such windows, 42 s, beside 23 s of CPU).
#: A 5 ms window, the same 1/20 of it idle, detects the same idleness sooner; the tests do
#: not rely on it for the engine's work, which tests/app/pilot.py's settle() polls for.
PILOT_IDLE_WINDOW_S = 0.005


def pytest_configure(config: pytest.Config) -> None:
    import textual._wait

    textual._wait.SLEEP_GRANULARITY = PILOT_IDLE_WINDOW_S
    textual._wait.SLEEP_IDLE = PILOT_IDLE_WINDOW_S / 20


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    first = [item for item in items if item.path.name in RUN_FIRST]
    if first:
        items[:] = first + [item for item in items if item.path.name not in RUN_FIRST]


@pytest.fixture(autouse=True)
def no_leaked_engine_threads():
    """A test may use the default engine; any other Engine it makes it must close."""
    before = set(_engine_threads())
    yield
    default = engine.engine._default_engine
    allowed = set(default._threads) if default is not None else set()
    deadline = time.monotonic() + 5.0
    while True:
        leaked = [t for t in _engine_threads(before | allowed)]
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert not leaked, f"test left engine threads alive: {[t.name for t in leaked]}"


@pytest.fixture
def no_thread_left():
    """Stricter, for a module that asks for it (``usefixtures``): no thread of any name
    that the test started (a program thread, a watcher, PyTorch's) is left alive."""
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not left, left


def pytest_sessionfinish(session, exitstatus):
    engine.shutdown_default_engine()
    deadline = time.monotonic() + 5.0
    while _engine_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    left = _engine_threads()
    if left:
        print(f"\nERROR: engine threads still alive after the suite: {[t.name for t in left]}")
        session.exitstatus = 1


@pytest.fixture(scope="module")
def multi_device_recording(tmp_path_factory: pytest.TempPathFactory):
    """A real recording (two devices, so two threads and queues) and its events."""
    from autograd_tui import scenarios
    from autograd_tui.session.run import Run

    p = tmp_path_factory.mktemp("recorded") / "multi.jsonl"
    with Run(scenarios.get("multi-device")) as run:
        run.run()
        run.save(p)
        events = list(run.events)
    return p, events


@pytest.fixture(scope="session")
def ddp_recorded(tmp_path_factory: pytest.TempPathFactory):
    """One recorded two-rank run of tests/engine/ddp_program.py (``autograd-tui torch
    --record``, gloo on 127.0.0.1), shared by the tests that read it (test_torch_ddp's
    gradients, test_ddp_pane's pane): its folder holds ``rank{r}.jsonl`` and the
    program's ``recorded-{r}.pt``.  Made once per session: under xdist the workers share
    the session's temporary root, and a lock lets the first one run it."""
    import fcntl
    import os

    from ddp_ranks import PROGRAM, launch, tool

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # every worker's basetemp is a folder of the session's
    folder = root / "ddp_recorded"
    with open(root / "ddp_recorded.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / "done").exists():  # not yet, or a worker's run failed
            folder.mkdir(exist_ok=True)
            launch(folder, "recorded", tool(PROGRAM, "--record", str(folder / "rank{rank}.jsonl")))
            (folder / "done").touch()
    return folder
