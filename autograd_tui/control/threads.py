"""What the controller knows of each engine thread, and the words for it.

Not in PyTorch.  ``ThreadInfo`` is the controller's record of one thread (where it
is: at a gate, waiting, running; what it waits on); ``ThreadStatus`` is what a view
is given; ``thread_status`` says it in words, with the node the thread runs taken
from the run's folded state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autograd_tui.engine.events import Event
from autograd_tui.engine.sync import TrackedLock
from autograd_tui.history import EngineState


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


def describe_wait(obj: Any) -> str:
    """What a thread waits on, in words: ``queue cpu``, ``lock 'user lock'``, ..."""
    if obj is None:
        return "?"
    kind = getattr(obj, "wait_kind", "object")
    if kind == "queue":
        return f"queue {obj.name}"
    if kind == "future":
        return f"the future of GraphTask {obj.graph_task_id}"
    if kind == "lock":
        return f"lock '{obj.name}'"
    if kind == "pool":
        return "the reentrant pool's work queue"
    if kind == "signal":
        return f"signal '{obj.name}'"
    return repr(obj)


def thread_status(info: ThreadInfo, state: EngineState, *, serialized: bool,
                  by_ident: dict[int, ThreadInfo]) -> ThreadStatus:
    """``info`` in words; ``state`` (the run's head) says which node it runs."""
    th = state.threads.get(info.name)
    node = state.node_name(th.node) if th is not None and th.nodes else None
    depth = th.depth if th is not None else 0
    if info.state == "waiting":
        what = describe_wait(info.waiting_on)
        holder = None
        if isinstance(info.waiting_on, TrackedLock) and info.waiting_on.holder is not None:
            h = by_ident.get(info.waiting_on.holder)
            holder = h.name if h else "?"
            what += f" held by {holder}"
        return ThreadStatus(info.name, "waiting", f"waiting on {what}", node, depth,
                            describe_wait(info.waiting_on), holder, info.user_paused)
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
