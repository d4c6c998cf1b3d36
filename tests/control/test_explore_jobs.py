"""``explore --jobs N`` (``control/explore_jobs.py``): the same search as one process, run
by N worker processes, with every worker stopped at the end, at Ctrl-C and when one dies;
the exit code for completed schedules that disagree (``commands/explore.py``)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from autograd_tui.commands.parser import main
from autograd_tui.control.explore import Budget, Explorer, Report, run_schedule
from autograd_tui.control.explore_jobs import (
    JobFailed,
    ParallelExplorer,
    ScenarioRun,
    start_method,
)
from autograd_tui.control.search import BoundedDFS

pytestmark = pytest.mark.timeout(300)

EXE = str(Path(sys.executable).parent / "autograd-tui")

# about the smallest program with two threads (bench_explore's two-devices): from a file,
# so that the workers load it by path
TWO_DEVICES = '''\
from autograd_tui import engine

NAME = "two-devices"
THREADS = ("cpu (owner)", "cuda:0")


def program():
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    (x.to("cuda:0") * 3.0).to("cpu").sum().backward()
    return {"x": x.grad}
'''

# the worker's process dies in the middle of its first run: SIGKILL, as the OOM killer would
DIES = TWO_DEVICES.replace('NAME = "two-devices"', 'NAME = "dies"').replace(
    "    return {", "    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n    return {")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("jobs")
    out = {}
    for name, text in {"two-devices": TWO_DEVICES, "dies": DIES}.items():
        (d / f"{name}.py").write_text(text)
        out[name] = str(d / f"{name}.py")
    return out


def _search(explorer: Explorer) -> tuple[Report, list[str | None]]:
    """The report and every run in the order it was recorded (None: a run cut short)."""
    runs: list[str | None] = []
    explorer.on_schedule = lambda report, r: runs.append(None if r is None else r.schedule)
    before = set(threading.enumerate())
    report = explorer.run("dfs")
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not left, f"threads left behind: {left}"
    assert not multiprocessing.active_children(), "a worker process left behind"
    return report, runs


def _table(report: Report) -> dict[str, Any]:
    """Everything a report says but its times."""
    return {
        "counts": (report.explored, report.runs, report.pruned, report.per_bound,
                   report.bound, report.complete, report.stopped),
        "outcomes": {str(o): (s.count, s.shortest.schedule, s.first_after,
                              s.shortest.preemptions, s.shortest.events, s.shortest.cycle,
                              {k: v.tobytes() for k, v in s.shortest.gradients.items()})
                     for o, s in report.outcomes.items()}}


def _both(source: str, params: dict[str, Any] | None = None,
          engine: dict[str, Any] | None = None, *, jobs: int = 2, reduce: bool = True,
          budget: Budget | None = None, method: str | None = None) -> tuple[Report, Report]:
    make = ScenarioRun(source, params, engine)
    budget = budget or Budget(None, None, 2)
    one, one_runs = _search(Explorer(make, source, budget=budget, reduce=reduce))
    many, many_runs = _search(ParallelExplorer(make, source, jobs=jobs, budget=budget,
                                               reduce=reduce, method=method))
    assert many_runs == one_runs  # the same runs, schedule for schedule, in the same order
    assert _table(many) == _table(one)
    return one, many


@pytest.mark.parametrize("method", ["fork", "spawn"])
@pytest.mark.parametrize("reduce", [True, False], ids=["reduction", "no-reduction"])
def test_two_devices_the_same_search_in_two_processes_as_in_one(files, reduce: bool,
                                                                method: str):
    one, _ = _both(files["two-devices"], reduce=reduce, method=method)
    assert one.complete and one.explored > 10  # 16 and 69 schedules


def test_workers_are_forked_only_while_no_other_thread_runs(monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(threading, "active_count", lambda: 1)
        assert start_method() == "fork"
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert start_method() == "spawn"
    finally:
        stop.set()
        t.join()


def test_three_jobs_give_the_same_search_too(files):
    _both(files["two-devices"], jobs=3, reduce=False)


def test_multi_device_the_same_search_in_two_processes():
    one, _ = _both("multi-device")
    assert one.complete and sum(one.per_bound.values()) == one.explored > 100


def test_reentrant_deep_the_same_search_in_two_processes():
    one, _ = _both("reentrant-deep", {"depth": 3}, {"max_recursion_depth": 1})
    assert one.complete and one.explored > 10


@pytest.mark.parametrize("name", ["race-lock-order", "deadlock-wait-on-device"])
def test_deadlocking_scenarios_the_same_search_in_two_processes(name: str):
    one, _ = _both(name, budget=Budget(None, None, 1))
    assert one.of_kind("deadlock")


def test_a_schedules_budget_stops_at_the_same_schedule():
    one, many = _both("multi-device", reduce=False, budget=Budget(40, None, 2))
    assert many.explored == 40 and many.stopped == "schedules" and not many.complete


def test_order_dependent_gradients_found_by_both():
    one, _ = _both("race-accumulation-order", budget=Budget(None, None, 1))
    assert len(one.of_kind("completed")) == 2


def test_ctrl_c_stops_every_worker():
    seen: list[int] = []

    def interrupt(report: Report, result: Any) -> None:
        seen.append(report.explored)
        if report.explored == 5:
            raise KeyboardInterrupt

    ex = ParallelExplorer(ScenarioRun("multi-device"), "multi-device", jobs=2,
                          budget=Budget(None, None, 2), reduce=False, on_schedule=interrupt)
    report = ex.run("dfs")
    assert report.stopped == "interrupted" and report.explored == 5
    assert ex.pool is not None and all(p.exitcode is not None for p in ex.pool.procs)
    assert not multiprocessing.active_children()


def _session_processes(sid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) == sid and fields[0] != "Z":  # session id; not a zombie
                out.append(int(entry))
    return out


#: a search still running when a signal comes: bound 3 without the reduction is 33,758
#: schedules (about 15 s with two jobs here); bound 2's 1,519 now end within a second
_LONG_SEARCH = ("--no-reduction", "--preemptions", "3", "--schedules", "0")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_ctrl_c_at_the_terminal_leaves_no_process():
    """Ctrl-C reaches every process of the foreground group: the command reports what it
    found, exits 130, and none of its workers outlives it."""
    p = subprocess.Popen([EXE, "explore", "multi-device", *_LONG_SEARCH, "--jobs", "2",
                          "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(_session_processes(p.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)  # the command and its two workers
        assert len(_session_processes(p.pid)) >= 3
        time.sleep(1.0)  # the workers are searching
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130, err
    assert json.loads(out)["stopped"] == "interrupted"
    assert "Traceback" not in err  # nor a stopped worker's
    deadline = time.monotonic() + 10
    while _session_processes(p.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _session_processes(p.pid) == []


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_workers_end_when_the_command_is_killed():
    """SIGKILL leaves the command no chance to stop its workers: each notices between
    two runs that its parent is gone, and ends."""
    p = subprocess.Popen([EXE, "explore", "multi-device", *_LONG_SEARCH, "--jobs", "2",
                          "--json"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(_session_processes(p.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_session_processes(p.pid)) >= 3
        time.sleep(0.5)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(30)
        deadline = time.monotonic() + 20
        while _session_processes(p.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _session_processes(p.pid) == []
    finally:
        if _session_processes(p.pid):
            os.killpg(p.pid, signal.SIGKILL)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_worker_that_dies_is_reported(files, method: str):
    ex = ParallelExplorer(ScenarioRun(files["dies"]), "dies", jobs=2,
                          budget=Budget(None, None, 1), method=method)
    with pytest.raises(JobFailed, match=r"explore worker \d \(pid \d+\) died \(signal 9\) "
                                        r"while exploring the schedules that start"):
        ex.run("dfs")
    assert not multiprocessing.active_children()


def test_a_worker_whose_search_raises_is_reported(tmp_path: Path):
    """A spawned worker loads the scenario itself: here the file is gone by then."""
    path = tmp_path / "gone.py"
    path.write_text(TWO_DEVICES)
    make = ScenarioRun(str(path))
    make.load()  # the parent has it
    path.unlink()
    ex = ParallelExplorer(make, "gone", jobs=2, budget=Budget(None, None, 1), method="spawn")
    with pytest.raises(JobFailed, match=r"an explore worker failed on the schedules that "
                                        r"start \(the start\): .*gone\.py"):
        ex.run("dfs")
    assert not multiprocessing.active_children()


def test_the_command_says_a_worker_died(files, capsys):
    assert main(["explore", files["dies"], "--jobs", "2"]) == 1
    err = capsys.readouterr().err
    assert "dies.py: explore worker" in err and "died (signal 9)" in err
    assert "Traceback" not in err


# --- the exit code for order-dependent gradients -------------------------------------------
def test_exit_code_5_when_completed_schedules_disagree(capsys):
    assert main(["explore", "race-accumulation-order", "--preemptions", "1", "--json",
                 "--jobs", "2"]) == 5
    out = json.loads(capsys.readouterr().out)
    assert len({o["detail"] for o in out["outcomes"] if o["kind"] == "completed"}) == 2


def test_exit_code_0_when_they_agree(capsys):
    assert main(["explore", "multi-device", "--preemptions", "1", "--json", "--jobs", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [o["kind"] for o in out["outcomes"]] == ["completed"]


def test_help_names_the_exit_codes_and_jobs(capsys):
    with pytest.raises(SystemExit):
        main(["explore", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--jobs N" in text and "5 the completed schedules disagree" in text


@pytest.mark.parametrize("argv, words", [
    (["--jobs", "-1"], "--jobs must be 0"),
    (["--jobs", "2", "--strategy", "random"], "--jobs splits the dfs search only"),
])
def test_bad_jobs_is_one_message(argv: list[str], words: str, capsys):
    assert main(["explore", "multi-device", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


# --- the split itself, in one process ---------------------------------------------------------
def _stolen(make: Any, bound: int, every: int, prefix: Any = None,
            floor: int = 0) -> tuple[list[str | None], int, bool, int]:
    """A search that gives away the end of itself every ``every`` runs, each part searched
    the same way; the runs in the serial order (a part given away comes after what the
    giver kept, the last one given first), the pruned count, the capped flag and how many
    parts were given away."""
    search = BoundedDFS(bound, True, prefix, floor if prefix is not None else None)
    runs: list[str | None] = []
    parts = []
    going = prefix is None or search.backtrack()
    while going:
        result, _ = run_schedule(make, search.decide)
        runs.append(None if result is None else result.schedule)
        if len(runs) % every == 0 and (part := search.split_off()) is not None:
            parts.append(part)
        going = search.backtrack()
    pruned, capped, splits = search.pruned, search.capped, len(parts)
    for p, f in reversed(parts):
        more, p_pruned, p_capped, p_splits = _stolen(make, bound, every, p, f)
        runs += more
        pruned, capped, splits = pruned + p_pruned, capped or p_capped, splits + p_splits
    return runs, pruned, capped, splits


@pytest.mark.parametrize("source, params, engine, every", [
    ("multi-device", {}, {}, 3),
    ("reentrant-deep", {"depth": 3}, {"max_recursion_depth": 1}, 2),
    ("race-lock-order", {}, {}, 5),
])
def test_a_search_split_again_and_again_is_the_serial_search(source, params, engine,
                                                             every: int):
    make = ScenarioRun(source, params, engine)
    for bound in (1, 2) if source != "race-lock-order" else (1,):
        serial = BoundedDFS(bound)
        runs: list[str | None] = []
        while True:
            result, _ = run_schedule(make, serial.decide)
            runs.append(None if result is None else result.schedule)
            if not serial.backtrack():
                break
        split, pruned, capped, splits = _stolen(make, bound, every)
        assert splits >= 1 and split == runs
        assert (pruned, capped) == (serial.pruned, serial.capped)


def test_a_seconds_budget_stops_the_workers():
    # bound 3 without the reduction: 33,758 schedules, about 15 s with two jobs on this
    # 2-core machine (at bound 2, 1,519 schedules now fit in the second: the test raced)
    ex = ParallelExplorer(ScenarioRun("multi-device"), "multi-device", jobs=2,
                          budget=Budget(None, 1.0, 3), reduce=False)
    report, runs = _search(ex)
    assert report.stopped == "seconds" and not report.complete
    assert 0 < report.explored < 33_758 and len(runs) == report.runs
    assert sum(s.count for s in report.outcomes.values()) == report.explored


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals need a POSIX system")
def test_the_progress_bar_runs_with_jobs(tmp_path: Path):
    """On a terminal the bar is drawn while two workers search, and the report is the
    one process's (standard output a pipe, standard error a pseudo-terminal)."""
    from terminal import run_on_terminal, run_piped

    args = ["explore", "race-lock-order", "--preemptions", "1"]
    one = run_piped(args, tmp_path)
    rc, out, terminal = run_on_terminal([*args, "--jobs", "2"], tmp_path)
    assert rc == one.returncode == 3, terminal
    assert "exploring" in terminal and "deadlock" in terminal
    assert "Traceback" not in terminal  # the workers stop without a word
    last = [line for line in one.stdout.splitlines() if line.startswith("explored ")][0]
    assert last.split(" in ")[0] in out  # the same counts; the time may differ
