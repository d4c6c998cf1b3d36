"""Greenlet plumbing of the explorer's cooperative substrate (``fastrun.py``).

Not in PyTorch.  *Carriers*: greenlets that outlive a run, each carrying one thread's
body at a time, because a new greenlet costs more than a switch into an idle one (its
frames' data stack is allocated afresh; about 27 us, measured).  And Ctrl-C: while
greenlets run it must reach the explorer, not an engine thread.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from greenlet import getcurrent, greenlet

from autograd_tui.engine.sync import ThreadAborted

INTERRUPTED = [False]  # Ctrl-C came during a run: the next gate hands it to the driver

_DONE = object()
POOL: list[greenlet] = []  # idle carriers, each parked in ``_carry``


def _carry(body: Any) -> None:
    """A carrier's life: run a thread's body, then wait, idle, for the next one."""
    while True:
        try:
            body()
        except ThreadAborted:
            pass
        body = None  # idle, it keeps nothing of the run it carried alive
        body = getcurrent().parent.switch(_DONE)


def carrier(driver: greenlet) -> greenlet:
    """An idle carrier of the driver's OS thread, or a new one."""
    while POOL:
        g = POOL.pop()
        if not g.dead and g.parent is driver:
            return g
    return greenlet(_carry, parent=driver)


@contextmanager
def interrupts_to_driver() -> Iterator[None]:
    """Ctrl-C while greenlets run: raised in the driver (as ``KeyboardInterrupt``) at the
    next gate, never in an engine thread, whose ``except BaseException`` would make it
    the run's outcome.  On real threads the signal reaches the driver's thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def note(signum: int, frame: Any) -> None:
        INTERRUPTED[0] = True

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if INTERRUPTED[0]:
            INTERRUPTED[0] = False
            raise KeyboardInterrupt
