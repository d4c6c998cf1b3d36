"""The controller: stepping, pausing, deterministic schedules, deadlocks."""

from __future__ import annotations

import numpy as np
import pytest
from graphs import (
    GRAPHS,
    deep_reentrant,
    device_last,
    linear_relu,
    multi_device,
    reentrant_on_device,
    reentrant_on_owner,
    two_devices,
    user_lock_across_backward,
    waits_on_device_thread,
)

from autograd_tui import engine
from autograd_tui.control import Controller, ScheduleDivergence, breakpoint_on

pytestmark = pytest.mark.timeout(120)


def run_free(program, **opts):
    with engine.Engine(**opts) as eng, engine.use_engine(eng):
        return program()


def run_controlled(program, policy="random", seed=0, engine_opts=None, serialized=True):
    eng = engine.Engine(**(engine_opts or {}))
    ctl = Controller(eng, policy=policy, seed=seed, serialized=serialized)
    try:
        ctl.start(program)
        result = ctl.run() if serialized else ctl.wait()
        return ctl, result
    except BaseException:
        ctl.close()
        raise


# (kind, node label, remaining dependencies or accumulate mode): the seeds' worked example.
LINEAR_RELU_STEPS = [
    ("graph_task_created", None), ("dependencies_computed", "Sum"),
    ("push", "Sum"), ("pop", "Sum"), ("node_start", "Sum"), ("node_end", "Sum"),
    ("dependency_decrement", "Select", 0), ("buffer_accumulate", "Select", "first"),
    ("push", "Select"), ("outstanding_decrement", "Sum", 1),
    ("pop", "Select"), ("node_start", "Select"), ("node_end", "Select"),
    ("dependency_decrement", "Add", 0), ("buffer_accumulate", "Add", "first"),
    ("push", "Add"), ("outstanding_decrement", "Select", 1),
    ("pop", "Add"), ("node_start", "Add"), ("node_end", "Add"),
    # Add's two outputs: ReLU and Linear2 both become ready
    ("dependency_decrement", "Relu", 0), ("buffer_accumulate", "Relu", "first"),
    ("push", "Relu"),
    ("dependency_decrement", "Linear2", 0), ("buffer_accumulate", "Linear2", "first"),
    ("push", "Linear2"), ("outstanding_decrement", "Add", 2),
    # Linear2 was created after ReLU: higher sequence number, so it pops first
    ("pop", "Linear2"), ("node_start", "Linear2"), ("node_end", "Linear2"),
    # Linear1 still waits for ReLU: its buffer goes into not_ready
    ("dependency_decrement", "Linear1", 1), ("buffer_accumulate", "Linear1", "first"),
    ("not_ready_insert", "Linear1"),
    ("dependency_decrement", "Acc", 0), ("buffer_accumulate", "Acc", "first"), ("push", "Acc"),
    ("dependency_decrement", "Acc", 0), ("buffer_accumulate", "Acc", "first"), ("push", "Acc"),
    ("outstanding_decrement", "Linear2", 3),
    # AccumulateGrads have the maximal sequence number: they run as soon as they are ready
    ("pop", "Acc"), ("node_start", "Acc"), ("node_end", "Acc"), ("outstanding_decrement", "Acc", 2),
    ("pop", "Acc"), ("node_start", "Acc"), ("node_end", "Acc"), ("outstanding_decrement", "Acc", 1),
    ("pop", "Relu"), ("node_start", "Relu"), ("node_end", "Relu"),
    # ReLU's gradient is added into Linear1's buffer, which leaves not_ready
    ("dependency_decrement", "Linear1", 0), ("buffer_accumulate", "Linear1", "add"),
    ("not_ready_remove", "Linear1"), ("push", "Linear1"), ("outstanding_decrement", "Relu", 1),
    ("pop", "Linear1"), ("node_start", "Linear1"), ("node_end", "Linear1"),
    *[s for _ in range(3) for s in (("dependency_decrement", "Acc", 0),
                                    ("buffer_accumulate", "Acc", "first"), ("push", "Acc"))],
    ("outstanding_decrement", "Linear1", 3),
    *[s for n in (2, 1, 0) for s in (("pop", "Acc"), ("node_start", "Acc"), ("node_end", "Acc"),
                                     ("outstanding_decrement", "Acc", n))],
    ("completion", None),
]


def _labeler(event):
    nodes = {n["id"]: n for n in event.data["nodes"]}
    linears = sorted((n["seq"], i) for i, n in nodes.items() if n["name"] == "LinearBackward0")
    labels = {}
    for i, n in nodes.items():
        name = n["name"].replace("Backward0", "").replace("AccumulateGrad", "Acc")
        if n["name"] == "LinearBackward0":
            name = f"Linear{1 + [j for _, j in linears].index(i)}"
        labels[i] = name
    return labels


def test_step_the_worked_example_one_event_at_a_time():
    ctl = Controller(engine.Engine())
    try:
        ctl.start(linear_relu)
        owner = "cpu (owner)"
        assert ctl.thread_states()[owner].detail == "at a gate"
        labels: dict[int, str] = {}
        for expected in LINEAR_RELU_STEPS:
            r = ctl.step(owner)
            assert r.status == "stepped" and len(r.events) == 1, r
            e = r.events[0]
            if e.kind == "dependencies_computed":
                labels = _labeler(e)
                assert dict(e.data["dependencies"])[
                    next(i for i, v in labels.items() if v == "Linear1")] == 2
            got = (e.kind, labels.get(e.node) if e.node is not None else None)
            if e.kind == "dependency_decrement":
                got += (e.data["remaining"],)
            elif e.kind == "buffer_accumulate":
                got += (e.data["mode"],)
            elif e.kind == "outstanding_decrement":
                got += (e.data["outstanding"],)
            assert got == expected
            # Between steps the owner waits at its gate, right after the event it reported.
            st = ctl.thread_states()[owner]
            assert st.state == "paused" and st.detail == f"at a gate after {e.kind}"
            if e.kind == "node_start":
                assert st.node == e.data["name"]
            if e.kind == "node_end":
                assert st.node is None
            if e.kind == "not_ready_insert":
                assert e.data["slots"] == [True]
        r = ctl.step(owner)
        assert r.status == "finished" and r.events == []
        assert ctl.finished and ctl.program_error is None
        np.testing.assert_allclose(ctl.program_result[0], [[0.35]])
    finally:
        assert ctl.close()


def test_run_until_a_breakpoint():
    ctl = Controller(engine.Engine())
    try:
        ctl.start(linear_relu)
        r = ctl.run_until(breakpoint_on(kind="not_ready_insert"))
        assert r.status == "breakpoint" and r.events[-1].kind == "not_ready_insert"
        r = ctl.run_until(breakpoint_on(kind="node_start", node="ReluBackward0"))
        assert r.events[-1].data["name"] == "ReluBackward0"
        r = ctl.run_until(lambda e: e.kind == "completion")
        assert r.status == "breakpoint"
        assert ctl.run().status == "finished"
    finally:
        ctl.close()


def test_pausing_one_thread_lets_the_others_run_until_they_need_it():
    """Two devices and a reentrant pool, free-running: pause the first pool thread."""
    expected = run_free(reentrant_on_device, max_recursion_depth=1)
    eng = engine.Engine(max_recursion_depth=1)
    ctl = Controller(eng, serialized=False)
    try:
        ctl.pause("reentrant-pool-1")  # before it exists: paused as soon as it starts
        ctl.start(reentrant_on_device)
        r = ctl.wait(timeout=20)
        assert r.status == "paused", r
        assert not r.report.real and "you paused reentrant-pool-1" in r.report.explanation
        st = ctl.thread_states()
        assert st["reentrant-pool-1"].state == "paused"
        # cuda:0 handed its nested GraphTask to the pool thread and waits on its future.
        assert st["cuda:0"].state == "waiting"
        assert st["cuda:0"].waiting_on.startswith("future GraphTask")
        assert st["cuda:0"].node == "ReentrantBackward"
        assert st["cpu (owner)"].detail == "waiting on queue cpu"
        assert st["cuda:1"].detail == "waiting on queue cuda:1"
        assert not ctl.finished
        ctl.resume("reentrant-pool-1")
        r = ctl.wait(timeout=20)
        assert r.status == "finished"
        for got, want in zip(ctl.program_result, expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-12)
    finally:
        assert ctl.close()


def test_paused_lock_holder_is_reported_as_a_pause_not_a_deadlock():
    """Serialized: pause cuda:1 while it holds the GraphTask's mutex; the owner then
    blocks on that mutex.  That is a pause, not a deadlock."""
    ctl = Controller(engine.Engine())
    try:
        ctl.start(two_devices)
        # cuda:1 has just decremented a dependency: it is inside the locked region.
        r = ctl.run_until(breakpoint_on(kind="dependency_decrement", thread="cuda:1"))
        assert r.status == "breakpoint"
        ctl.pause("cuda:1")
        r = ctl.run(max_steps=500)
        assert r.status == "paused"
        assert not r.report.real and r.report.kind == "paused"
        states = ctl.thread_states()
        assert states["cuda:1"].user_paused and states["cuda:1"].state == "paused"
        owner = states["cpu (owner)"]
        assert owner.state == "waiting" and owner.waiting_on == "lock GraphTask 1 mutex"
        assert owner.holder == "cuda:1"
        assert "cpu (owner) is waiting on lock GraphTask 1 mutex (held by cuda:1) (held by " \
               "cuda:1, which you paused)" in r.report.explanation
        assert not any(e.kind == "deadlock" for e in ctl.events)
        ctl.resume("cuda:1")
        assert ctl.run().status == "finished"
        assert ctl.program_error is None
        np.testing.assert_allclose(ctl.program_result[1], [3.0, 3.0])
    finally:
        ctl.close()


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_same_seed_same_run_and_schedules_replay(name):
    program = GRAPHS[name]
    opts = {"max_recursion_depth": 1} if "device" in name else {}
    first = None
    for _ in range(100):
        ctl, r = run_controlled(program, "random", 7, opts)
        try:
            assert r.status == "finished" and ctl.program_error is None
            run = (ctl.events, ctl.schedule_string(), ctl.program_result)
        finally:
            assert ctl.close()
        if first is None:
            first = run
        else:
            assert run[0] == first[0] and run[1] == first[1]
    events, schedule, grads = first
    ctl, r = run_controlled(program, f"schedule:{schedule}", 0, opts)
    try:
        assert r.status == "finished"
        assert ctl.events == events
        assert ctl.schedule_string() == schedule
        for got, want in zip(ctl.program_result, grads, strict=True):
            np.testing.assert_array_equal(got, want)
    finally:
        ctl.close()


def test_different_seeds_interleave_differently_with_the_same_gradients():
    expected = run_free(multi_device)
    orders = set()
    for seed in range(8):
        ctl, r = run_controlled(multi_device, "random", seed)
        try:
            assert r.status == "finished"
            orders.add(tuple((e.thread, e.kind) for e in ctl.events))
            for got, want in zip(ctl.program_result, expected, strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-12)
        finally:
            ctl.close()
    assert len(orders) > 1


def test_a_schedule_that_does_not_fit_is_reported():
    ctl = Controller(engine.Engine(), policy="schedule:1:3,5:1")
    try:
        ctl.start(linear_relu)
        with pytest.raises(ScheduleDivergence, match="thread 5 cannot move"):
            ctl.run()
    finally:
        ctl.close()


@pytest.mark.parametrize("bad", ["x:1", "1:0", "1:-1", "1;2", "0:3"])
def test_bad_schedule_strings(bad):
    with pytest.raises(ValueError, match="bad schedule"):
        Controller(engine.Engine(), policy=f"schedule:{bad}")


# --- the deadlock variants ----------------------------------------------------------------
VARIANTS = {
    "reentrant-block": (reentrant_on_owner, {"reentrant": "block"}, "cycle",
                        ["thread cpu (owner)", "future GraphTask 2", "queue cpu"]),
    "no-wake-owner": (device_last, {"wake_owner": False}, "lost-wakeup",
                      ["thread cpu (owner)", "queue cpu"]),
    "no-depth-priority": (user_lock_across_backward, {"depth_priority": False}, "cycle",
                          ["thread cpu (owner)", "lock user lock"]),
    "pool-exhausted": (deep_reentrant, {"reentrant_pool_size": 1, "max_recursion_depth": 2},
                       "cycle", None),
    "waits-on-device": (waits_on_device_thread, {}, "cycle",
                        ["thread cpu (owner)", "signal cuda:0 has run MulBackward0",
                         "thread cuda:0", "queue cuda:0"]),
}
DEFAULT_GRADS = {
    "reentrant-block": [np.array([[6.0, 8.0]]), np.array([4.0])],
    "no-wake-owner": [np.array([1.5, 1.5]) * np.exp([0.5, -0.5]), np.exp([0.5, -0.5])],
    "no-depth-priority": [np.array(2.0), np.array(3.0)],
    "pool-exhausted": [np.array(1.0)],
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_deadlock_variant(name):
    program, opts, kind, cycle = VARIANTS[name]
    if name in DEFAULT_GRADS:  # the real engine's design completes
        ctl, r = run_controlled(program, "random", 0)
        try:
            assert r.status == "finished" and ctl.program_error is None
            for got, want in zip(ctl.program_result, DEFAULT_GRADS[name], strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-12)
        finally:
            assert ctl.close()
    # The variant deadlocks under every schedule we try.
    for policy, seed in [("round-robin", 0)] + [("random", s) for s in range(5)]:
        ctl, r = run_controlled(program, policy, seed, opts)
        try:
            assert r.status == "deadlock", (policy, seed, r.status)
            rep = r.report
            assert rep.real and rep.kind == kind
            assert rep.explanation.startswith("Deadlock: ")
            if cycle is not None:
                assert rep.cycle == cycle
            else:  # pool exhausted: a pool thread waits on a future only the pool could serve
                assert any(c.startswith("thread reentrant-pool-") for c in rep.cycle)
                assert any(c.startswith("future GraphTask") for c in rep.cycle)
            assert ctl.events[-1].kind == "deadlock"
            assert ctl.events[-1].data["cycle"] == rep.cycle
            for u, v in zip(rep.cycle, rep.cycle[1:] + rep.cycle[:1]):
                if kind == "cycle":
                    assert rep.graph.has_edge(u, v)
        finally:
            assert ctl.close()
        assert not ctl.engine.threads()


def test_free_running_mode_also_detects_the_deadlock():
    ctl, r = run_controlled(reentrant_on_owner, engine_opts={"reentrant": "block"},
                            serialized=False)
    try:
        assert r.status == "deadlock"
        assert r.report.cycle == ["thread cpu (owner)", "future GraphTask 2", "queue cpu"]
    finally:
        assert ctl.close()


def test_wake_up_task_under_a_pinned_schedule():
    """Round-robin pins the interleaving: the device completes and wakes the owner."""
    ctl, r = run_controlled(device_last, "round-robin")
    try:
        assert r.status == "finished"
        done = [e for e in ctl.events if e.kind == "completion"]
        wake = [e for e in ctl.events if e.kind == "wakeup"]
        assert done[0].thread.startswith("cuda:") and wake[0].thread == done[0].thread
        pops = [e for e in ctl.events if e.kind == "pop" and e.data["dummy"]]
        assert [e.thread for e in pops] == ["cpu (owner)"]
    finally:
        ctl.close()


@pytest.mark.parametrize("seed", range(4))
def test_resume_all_clears_every_pause(seed):
    """Random pause/resume/pause_all/resume_all, with threads starting in between:
    after resume_all no thread is paused, nor will be when it starts."""
    import random

    names = ["cpu (owner)", "cuda:0", "cuda:1", "reentrant-pool-1", "reentrant-pool-2"]
    rng = random.Random(seed)
    for _ in range(100):
        eng = engine.Engine()
        ctl = Controller(eng, serialized=False)
        try:
            unstarted = list(names)
            rng.shuffle(unstarted)
            for _ in range(rng.randint(1, 12)):
                op = rng.choice(["pause", "resume", "pause_all", "resume_all", "start"])
                started = ctl.thread_names()
                if op == "start" and unstarted:
                    ctl.gates.register_thread(unstarted.pop())
                elif op in ("pause", "resume"):
                    target = (rng.choice(range(1, len(started) + 1))
                              if started and rng.random() < 0.3 else rng.choice(names))
                    getattr(ctl, op)(target)
                elif op in ("pause_all", "resume_all"):
                    getattr(ctl, op)()
            ctl.resume_all()
            for name in unstarted[:rng.randint(0, len(unstarted))]:
                ctl.gates.register_thread(name)
            paused = [t.name for t in ctl.snapshot().threads if t.user_paused]
            assert paused == [], (seed, paused)
            assert not any(s.user_paused for s in ctl.thread_states().values())
        finally:
            ctl.close()


def test_resume_all_forgets_a_pause_by_name_before_start():
    eng = engine.Engine(max_recursion_depth=1)
    ctl = Controller(eng, serialized=False)
    try:
        ctl.pause("reentrant-pool-1")
        ctl.resume_all()
        ctl.start(reentrant_on_device)
        assert ctl.wait(timeout=20).status == "finished"
    finally:
        assert ctl.close()
