"""What the controller knows of each engine thread, and the words for it.

Not in PyTorch.  ``ThreadInfo`` is the controller's record of one thread (where it
is: at a gate, waiting, running; what it waits on); ``ThreadStatus`` is what a view
is given; ``thread_status`` says it in words (``words.py``'s, as the thread's events say
it), with the node the thread runs taken from the run's folded state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autograd_tui.engine.events import Event
from autograd_tui.engine.sync import TrackedLock
from autograd_tui.history import EngineState
from autograd_tui.words import wait_words


@dataclass
class ThreadInfo:
    name: str
    index: int
    state: str = "transit"  # transit | running | paused | waiting | finished
    last_event: Event | None = None
    waiting_kind: str | None = None
    waiting_on: Any = None
    user_paused: bool = False
    allowance: int = 0  # free mode: gates it may still pass while paused
    gates: int = 0
    ident: int | None = None
    cv: Any = None  # serialized: the condition it waits on at a gate for its turn


@dataclass(frozen=True)
class ThreadStatus:
    name: str
    state: str  # running | paused | waiting | finished | ready
    detail: str  # human words: "waiting on queue cpu", "paused after push", ...
    node: str | None
    depth: int
    waiting_on: str | None = None
    holder: str | None = None
    user_paused: bool = False


def _wait_target(obj: Any) -> tuple[str, str] | None:
    """(on, target) of the ``thread_wait`` event a wait on ``obj`` emits."""
    kind = getattr(obj, "wait_kind", None)
    if kind in ("queue", "lock", "signal"):
        return kind, obj.name
    if kind == "future":
        return kind, f"GraphTask {obj.graph_task_id}"
    if kind == "pool":
        return kind, "reentrant pool"
    return None


def describe_wait(obj: Any, holder: str | None = None) -> str:
    """What a thread waits on, in ``words.wait_words``'s words (as its ``thread_wait``
    event names it): ``queue cpu``, ``lock user lock (held by cuda:0)``, ``future
    GraphTask 2``, ..."""
    if obj is None:
        return "?"
    target = _wait_target(obj)
    return wait_words(*target, holder) if target is not None else repr(obj)


def thread_status(info: ThreadInfo, state: EngineState, *, serialized: bool,
                  by_ident: dict[int, ThreadInfo]) -> ThreadStatus:
    """``info`` in words; ``state`` (the run's head) says which node it runs."""
    th = state.threads.get(info.name)
    node = state.node_name(th.node) if th is not None and th.nodes else None
    depth = th.depth if th is not None else 0
    if info.state == "waiting":
        holder = None
        if isinstance(info.waiting_on, TrackedLock) and info.waiting_on.holder is not None:
            h = by_ident.get(info.waiting_on.holder)
            holder = h.name if h else "?"
        return ThreadStatus(info.name, "waiting",
                            f"waiting on {describe_wait(info.waiting_on, holder)}", node,
                            depth, describe_wait(info.waiting_on), holder, info.user_paused)
    if info.state == "paused":
        after = f" after {info.last_event.kind}" if info.last_event else ""
        shown = "paused" if info.user_paused or serialized else "ready"
        word = "paused" if info.user_paused else "at a gate"
        return ThreadStatus(info.name, shown, f"{word}{after}", node, depth,
                            user_paused=info.user_paused)
    if info.state == "finished":
        return ThreadStatus(info.name, "finished", "finished", None, 0)
    return ThreadStatus(info.name, "running", "running", node, depth,
                        user_paused=info.user_paused)
