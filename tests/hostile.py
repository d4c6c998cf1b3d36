"""Recordings built to be expensive rather than broken (issue 31): each is checksum-valid
(``forge.signed``: the checksum is unkeyed) and under 10 MB, and each states or repeats
something that once cost memory or time out of proportion to its size."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

from forge import signed

T = "cpu (owner)"
HEADER = {
    "format": "autograd-tui-trace", "version": 4,
    "engine": {"depth_priority": True, "max_recursion_depth": 60, "reentrant": "nested",
               "reentrant_pool_size": None, "wake_owner": True},
    "graph": {"nodes": []}, "program": {"name": "autograd-tui", "version": "0.1.0"},
    "schedule": {"policy": "round-robin", "seed": 0, "serialized": True},
    "tensors": "summary",
}
VALUE = {"shape": [1], "dtype": "float64", "values": [1.0], "norm": 1.0}
MAX_INPUTS = 65_536


def line(*fields: object) -> bytes:
    return json.dumps(list(fields), separators=(",", ":")).encode() + b"\n"


def recording(events: Callable[[Iterator[int]], Iterator[bytes]]) -> bytes:
    """The bytes of a recording of ``events(seqs)`` (seqs: 1, 2, ...)."""
    seqs = iter(range(1, 10**9))
    lines = list(events(seqs))
    header = json.dumps(HEADER, separators=(",", ":"), sort_keys=True).encode() + b"\n"
    return signed(header, lines, {"error": None, "events": len(lines), "gradients": {},
                                  "schedule": "", "status": "running"})


def _graph_task(seq: Iterator[int], gid: int, depth: int = 0) -> bytes:
    return line("graph_task_created", next(seq), T, gid, None, None, depth, False, False,
                True, [1], 1, True)


def _nodes(seq: Iterator[int], gid: int, ids: list[int], inputs: int = 1,
           name: str = "MulBackward0") -> bytes:
    infos = [[n, name, "cpu", n, 0, inputs, [], False] for n in ids]
    return line("dependencies_computed", next(seq), T, gid, ids[0], None, [], infos, 0)


def wide_inputs(nodes: int, waiting: bool = False) -> bytes:
    """``nodes`` nodes stating 65,536 inputs each, each given one gradient in its last
    slot (and, ``waiting``, put in not_ready): a 65,536-slot tuple per node, once."""
    def events(seq: Iterator[int]) -> Iterator[bytes]:
        yield _graph_task(seq, 1)
        ids = list(range(1, nodes + 1))
        yield _nodes(seq, 1, ids, MAX_INPUTS)
        for n in ids:
            yield line("buffer_accumulate", next(seq), T, 1, n, None, MAX_INPUTS - 1,
                       "first", VALUE, 0)
            if waiting:
                yield line("not_ready_insert", next(seq), T, 1, n, None, [True])
    return recording(events)


def pushes_never_popped(pushes: int) -> bytes:
    """One node pushed ``pushes`` times and never popped: a queue that only grows."""
    def events(seq: Iterator[int]) -> Iterator[bytes]:
        yield _graph_task(seq, 1)
        yield _nodes(seq, 1, [1])
        for k in range(1, pushes + 1):
            yield line("push", next(seq), T, 1, 1, "cpu", 0, 1, False, False, k, k, [])
    return recording(events)


def nested_graph_tasks(depth: int) -> bytes:
    """``depth`` GraphTasks, each started by a node of the one before (reentrant)."""
    def events(seq: Iterator[int]) -> Iterator[bytes]:
        for g in range(1, depth + 1):
            yield _graph_task(seq, g, g - 1)
            yield _nodes(seq, g, [g], name="Reentrant")
            yield line("node_start", next(seq), T, g, g, None, "Reentrant", g - 1, [])
    return recording(events)


def hooks_naming_new_tasks(hooks: int) -> bytes:
    """Hook events, each naming a GraphTask and a node no other event names."""
    def events(seq: Iterator[int]) -> Iterator[bytes]:
        yield _graph_task(seq, 1)
        yield _nodes(seq, 1, [1])
        for k in range(hooks):
            yield line("hook", next(seq), T, 1000 + k, 1000 + k, None, "post", False, "h")
    return recording(events)


def starts_never_ended(starts: int) -> bytes:
    """One node started ``starts`` times on one thread and never ended: a deep stack."""
    def events(seq: Iterator[int]) -> Iterator[bytes]:
        yield _graph_task(seq, 1)
        yield _nodes(seq, 1, [1])
        for _ in range(starts):
            yield line("node_start", next(seq), T, 1, 1, None, "MulBackward0", 0, [])
    return recording(events)


def last_node_repeated(nodes: int) -> bytes:
    """A node list of ``nodes`` ids whose last id repeats (the list is refused)."""
    def events(seq: Iterator[int]) -> Iterator[bytes]:
        yield _graph_task(seq, 1)
        ids = [*range(1, nodes + 1), nodes]
        infos = [[n, "M", "cpu", n, 0, 1, [], False] for n in ids]
        yield line("dependencies_computed", next(seq), T, 1, 1, None, [], infos, 0)
    return recording(events)


def names(text: str) -> bytes:
    """A node named ``text``, in not_ready with one gradient in, and pushed."""
    def events(seq: Iterator[int]) -> Iterator[bytes]:
        yield _graph_task(seq, 1)
        yield _nodes(seq, 1, [1], 2, name=text)
        yield line("buffer_accumulate", next(seq), T, 1, 1, None, 0, "first", VALUE, 0)
        yield line("not_ready_insert", next(seq), T, 1, 1, None, [True, False])
    return recording(events)


CASES: dict[str, Callable[[], bytes]] = {
    "wide-inputs": lambda: wide_inputs(3_000),
    "wide-inputs-waiting": lambda: wide_inputs(20, waiting=True),
    "pushes-never-popped": lambda: pushes_never_popped(140_000),
    "nested-graph-tasks": lambda: nested_graph_tasks(600),
    "hooks-naming-new-tasks": lambda: hooks_naming_new_tasks(60_000),
    "starts-never-ended": lambda: starts_never_ended(150_000),
    "last-node-repeated": lambda: last_node_repeated(190_000),
}
