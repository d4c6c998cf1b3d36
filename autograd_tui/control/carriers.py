"""Greenlet plumbing of the explorer's cooperative substrate (``fastrun.py``).

Not in PyTorch.  *Carriers*: greenlets that outlive a run, each carrying one thread's
body at a time, because a new greenlet costs more than a switch into an idle one (its
frames' data stack is allocated afresh; about 27 us, measured).  The engine's
``threading.local`` objects, which the greenlets of one OS thread share (``fastrun``
swaps their contents at a switch).  And Ctrl-C: while greenlets run it must reach the
explorer, not an engine thread.
"""

from __future__ import annotations

import signal
import sys
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


def restore_locals(dicts: list[dict[str, Any]], saved: list[Any] | None) -> None:
    """Put a thread's saved thread-locals (``fastrun``'s ``_switch``) in ``dicts``, the
    engine's thread-locals' own; None: none saved."""
    if saved is None:
        return
    for ld, d in zip(dicts, saved):
        if ld:
            ld.clear()
        if d:
            ld.update(d)


_LOCALS: dict[tuple[bool, ...], tuple[threading.local, ...]] = {}
_BRIDGE = ("saved", "_tls"), ("bridge", "_local"), ("hooks", "_probe")
_NAMES = tuple(f"autograd_tui.engine.torch_bridge.{m}" for m, _ in _BRIDGE)


def module_locals() -> tuple[threading.local, ...]:
    """Every module-level ``threading.local`` of the engine (an engine's own ``_tls`` is
    added per run); the same objects each run, once the torch bridge's modules loaded are
    the same (kept by which are)."""
    mods = sys.modules
    key = (_NAMES[0] in mods, _NAMES[1] in mods, _NAMES[2] in mods)  # (once a run)
    out = _LOCALS.get(key)
    if out is None:
        from autograd_tui.engine import engine as eng
        from autograd_tui.engine import grad_mode, graph, graph_task

        found = [eng._thread_engine, grad_mode._tls, graph_task._current, graph._seq_tls]
        for mod, attr in _BRIDGE:
            m = mods.get(f"autograd_tui.engine.torch_bridge.{mod}")
            if m is not None:
                found.append(getattr(m, attr))
        out = _LOCALS[key] = tuple(found)
    return out


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
