"""``explore --jobs N``: the exhaustive search shared by N processes, by work stealing.

Not in PyTorch.  The serial search (``search.BoundedDFS``) is a depth-first walk of the
tree of scheduling choices.  Its state is its path: for each frame, the threads that
could move, the preemptions so far, the sleep set, and the choices explored there with
their steps' footprints.  What it does below a frame depends on that path alone (a new
frame's sleep set comes from the frame above it), so a part of the search is a pickled
path with a floor (the highest frame it may go back to), and a worker given one runs
exactly the runs the serial search runs there, in the same order.

Each bound starts as one task, the whole tree, on one worker.  When a worker is idle, a
busy one is asked (between two runs) for the end of its part (``BoundedDFS.split_off``):
it keeps the subtree below a frame's choice and gives away every choice left at that
frame and above it, a new task that comes right after its own in the serial order.
Nothing runs twice.  The workers stream their runs back; the parent records them task by
task in the serial order, so the report is the one process's (schedules, outcomes,
counts, shortest schedules, ``first_after``, per-bound counts, pruned and runs), also
when ``--schedules`` stops it; only the times differ.

Workers are forked while the process has no other thread (``start_method``), else
spawned; they ignore SIGINT; the parent stops them all when the search ends, at Ctrl-C,
or when one dies (``JobFailed``); one whose parent is gone ends by itself.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from itertools import groupby
from typing import Any

from autograd_tui.control.explore import (
    Budget,
    Explorer,
    Outcome,
    Report,
    ScheduleResult,
    schedule_runner,
)
from autograd_tui.control.search import BoundedDFS, Nondeterministic, _Frame
from autograd_tui.session.run import ScenarioRun

CHUNK_SECONDS = 0.2  # a worker sends its runs at least this often (the progress bar)
RETRY = 0.05  # seconds before a worker that had nothing to give away is asked again


class JobFailed(RuntimeError):
    """A worker process died or its search raised: the message says which and where."""


def schedule_words(frames: list[_Frame]) -> str:
    """A prefix of choices as a schedule string (``1:12,2:3``)."""
    steps = [f"{t}:{len(list(g))}" for t, g in groupby(f.chosen for f in frames)]
    return ",".join(steps) or "(the start)"


# --- the worker ------------------------------------------------------------------------------
def _light(r: ScheduleResult | None, sent: set[Outcome]) -> ScheduleResult | None:
    """A run to send: an outcome's gradients and cycle go once per worker (every schedule
    with that outcome has the same, bit for bit)."""
    if r is None or r.outcome in sent:
        return r and ScheduleResult(r.schedule, r.outcome, r.preemptions, r.events)
    sent.add(r.outcome)
    return r


def _worker(w: int, make_run: Callable[[], Any], reduce: bool, tasks: Any, out: Any,
            want: Any) -> None:
    """Take tasks until None: run the part, stream its runs in order; when ``want`` is
    set, give the end of the part away (``BoundedDFS.split_off``) as a new task."""
    # The parent decides: Ctrl-C and a hang-up reach it too, and it stops us with SIGTERM,
    # which kills at once (not the command's handler a fork inherits, which raises).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sent: set[Outcome] = set()
    one = None  # made in the first task's try: a scenario that fails to load is reported
    parent = os.getppid()
    while (task := _next_task(tasks, parent)) is not None:
        tid, bound, prefix, floor, deadline = task
        cpu = time.process_time()
        try:
            one = one or schedule_runner(make_run)[0]  # as one process runs them
            search = BoundedDFS(bound, reduce, prefix, floor)
            chunk: list[ScheduleResult | None] = []
            last, stopped = time.monotonic(), False
            going = prefix is None or search.backtrack()  # a split-off task: the next choice
            while going:
                if os.getppid() != parent:  # the parent was killed: nobody reads this
                    return
                if deadline is not None and time.time() >= deadline:
                    stopped = True
                    break
                result, _ = one(search.decide, reduce, search.needs_footprint)
                chunk.append(_light(result, sent))
                if want.is_set():
                    want.clear()
                    part = search.split_off()
                    out.put(("chunk", tid, chunk))
                    out.put(("nosplit", tid, w) if part is None else ("split", tid, *part, w))
                    chunk, last = [], time.monotonic()
                elif time.monotonic() - last >= CHUNK_SECONDS:
                    out.put(("chunk", tid, chunk))
                    chunk, last = [], time.monotonic()
                going = search.backtrack()
            out.put(("done", tid, chunk, search.pruned, search.capped, stopped, w,
                     time.process_time() - cpu))
        except BaseException as e:  # noqa: BLE001 - every failure goes to the parent
            out.put(("error", tid, type(e).__name__, str(e)))


def _next_task(tasks: Any, parent: int) -> Any:
    """The next task from this worker's pipe; None when the parent is gone (a fork's
    copy of the pipe's other end keeps it open: the worker asks who its parent is)."""
    try:
        while not tasks.poll(0.5):
            if os.getppid() != parent:
                return None
        return tasks.recv()
    except (EOFError, OSError):
        return None


# --- the pool ---------------------------------------------------------------------------------
class _Pool:
    """``jobs`` workers, each given tasks on its own pipe, in the order they were made;
    when one is idle, a busy one is asked for the end of its part (work stealing)."""

    def __init__(self, jobs: int, make_run: Callable[[], Any], reduce: bool,
                 method: str | None = None, last_bound: int = 0,
                 deadline: float | None = None) -> None:
        ctx = multiprocessing.get_context(method or start_method())
        self.method = ctx.get_start_method()
        if self.method == "fork" and isinstance(make_run, ScenarioRun):
            make_run.load()
        pipes = [ctx.Pipe(duplex=False) for _ in range(jobs)]  # (worker's end, ours)
        self.tasks = [ours for _, ours in pipes]
        self.out = ctx.Queue()  # the workers' messages (we only read: no feeder thread)
        self.want = [ctx.Event() for _ in range(jobs)]
        self.procs = [ctx.Process(target=_worker, name=f"autograd-tui explore job {w + 1}",
                                  args=(w, make_run, reduce, pipes[w][0], self.out,
                                        self.want[w]), daemon=True)
                      for w in range(jobs)]
        sys.stdout.flush()  # a forked worker flushes its copy of what is buffered
        sys.stderr.flush()
        for p in self.procs:
            p.start()
        self.prefixes: dict[int, str] = {}
        self.buffers: dict[int, list[ScheduleResult | None]] = {}
        self.done: dict[int, tuple[int, bool, bool]] = {}
        self.full: dict[Outcome, ScheduleResult] = {}  # an outcome's gradients and cycle
        self.orders: dict[int, list[int]] = {}  # bound -> its tasks in the serial order
        self.bound_of: dict[int, int] = {}  # task -> its bound
        self.running: dict[int, int] = {}  # worker -> task
        self.idle = list(range(jobs))
        self.pending: list[tuple[Any, ...]] = []  # tasks made while no worker was idle
        self.asked: dict[int, float] = {}  # worker -> when it was asked to split
        self.splits = 0
        self.cpu = [0.0] * jobs  # each worker's CPU seconds in its tasks (the benchmark)
        self._next = 0
        self.last_bound, self._deadline = last_bound, deadline

    def start(self, bound: int) -> list[int]:
        """A bound's search: one task, the whole tree (unless started already: the next
        bound starts on a worker that found nothing left to take in this one)."""
        if bound not in self.orders:
            self.orders[bound] = [self._submit(bound, None, 0, "(the start)")]
        return self.orders[bound]

    def _submit(self, bound: int, prefix: list[_Frame] | None, floor: int,
                words: str) -> int:
        tid, self._next = self._next, self._next + 1
        self.prefixes[tid] = words
        self.buffers[tid] = []
        self.bound_of[tid] = bound
        self.pending.append((tid, bound, prefix, floor, self._deadline))
        self._dispatch()
        return tid

    def _dispatch(self) -> None:
        """Each task waiting, in order, to a worker that is idle."""
        while self.pending and self.idle:
            w, task = self.idle.pop(0), self.pending.pop(0)
            self.running[w] = task[0]
            try:
                self.tasks[w].send(task)
            except OSError:  # it died since the last look
                self._check_alive()
                raise JobFailed(f"explore worker {w + 1} stopped taking work") from None

    def pump(self, timeout: float = 0.05) -> None:
        """Take one message (or none within ``timeout``); a dead worker is an error."""
        self._check_alive()  # also while the others keep sending
        try:
            msg = self.out.get(timeout=timeout)
        except queue.Empty:
            self._balance()
            return
        kind, tid = msg[0], msg[1]
        if kind == "error":
            if msg[2] == "Nondeterministic":
                raise Nondeterministic(msg[3])
            raise JobFailed(f"an explore worker failed on the schedules that start "
                            f"{self.prefixes[tid]}: {msg[2]}: {msg[3]}")
        if kind == "split":  # the end of the giver's part: right after it in the order
            prefix, floor, w = msg[2:5]
            order = self.orders[bound := self.bound_of[tid]]
            order.insert(order.index(tid) + 1,
                         self._submit(bound, prefix, floor, schedule_words(prefix[:floor])))
            self.splits += 1
            self.asked.pop(w, None)
        elif kind == "nosplit":
            self.asked[msg[2]] = time.monotonic()  # ask it again a little later
        else:
            for r in msg[2]:
                if r is not None:
                    first = self.full.setdefault(r.outcome, r)
                    r.gradients, r.cycle = first.gradients, first.cycle
            self.buffers[tid].extend(msg[2])
            if kind == "done":
                self.done[tid], w = msg[3:6], msg[6]
                self.cpu[w] += msg[7]
                self.running.pop(w, None)
                self.asked.pop(w, None)
                self.want[w].clear()  # a request its task ended before
                self.idle.append(w)
                self._dispatch()
        self._balance()

    def _balance(self) -> None:
        """An idle worker: ask a busy worker for the end of its part,
        the one on the earliest task (the most likely to have much left).  A worker that
        had nothing to give is asked again ``RETRY`` seconds later; when every busy one
        had nothing, the next bound starts (its runs are merged after this bound's, and
        dropped if this bound shows that larger ones add nothing)."""
        if len(self.idle) <= sum(1 for t in self.asked.values() if t == 0.0):
            return  # (a task waits only while no worker is idle)
        now = time.monotonic()
        can = [w for w in self.running
               if w not in self.asked or (self.asked[w] and now - self.asked[w] > RETRY)]
        if can:
            w = min(can, key=self._place)
            self.asked[w] = 0.0  # asked, no answer yet
            self.want[w].set()
        elif self.orders and not any(t == 0.0 for t in self.asked.values()):
            if (bound := max(self.orders) + 1) <= self.last_bound:
                self.start(bound)

    def _place(self, w: int) -> tuple[int, int]:
        """Where worker ``w``'s task is in the serial order: (bound, index)."""
        bound = self.bound_of[tid := self.running[w]]
        return bound, self.orders[bound].index(tid)

    def _check_alive(self) -> None:
        for i, p in enumerate(self.procs):
            if p.exitcode is not None:
                how = f"signal {-p.exitcode}" if p.exitcode < 0 else f"exit code {p.exitcode}"
                tid = self.running.get(i)
                where = "" if tid is None else (
                    f" while exploring the schedules that start {self.prefixes[tid]}")
                raise JobFailed(f"explore worker {i + 1} (pid {p.pid}) died ({how}){where}")

    def close(self) -> None:
        """Stop every worker (mid-task too) and wait for it: no process left behind."""
        for p in self.procs:
            if p.is_alive():
                p.terminate()
        for p in self.procs:
            p.join(5.0)
            if p.is_alive():
                p.kill()
                p.join()
        self.out.close()
        self.out.join_thread()
        for conn in self.tasks:
            conn.close()


def start_method() -> str:
    """``fork`` while this process has no other thread (no engine thread: a fork copies no
    lock another thread holds): a worker in milliseconds, everything imported; else
    ``spawn`` (a fresh interpreter importing the project: about 0.35 s of CPU a worker)."""
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        return "fork"
    return "spawn"


# --- the explorer -----------------------------------------------------------------------------
def default_jobs(jobs: int) -> int:
    """``--jobs 0``: one per core this process may use."""
    if jobs > 0:
        return jobs
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None  # Linux
    return max(1, len(cores) if cores is not None else os.cpu_count() or 1)


class ParallelExplorer(Explorer):
    """``Explorer`` whose ``dfs`` runs in ``jobs`` processes; ``make_run`` must pickle
    (``ScenarioRun``) unless they are forked.  The runs are merged in the serial search's
    order.  ``method``: a multiprocessing start method (default: ``start_method()``)."""

    def __init__(self, make_run: Callable[[], Any], scenario: str, *, jobs: int,
                 budget: Budget | None = None, reduce: bool = True,
                 on_schedule: Callable[[Report, ScheduleResult | None], None] | None = None,
                 method: str | None = None) -> None:
        super().__init__(make_run, scenario, budget=budget, reduce=reduce,
                         on_schedule=on_schedule)
        self.jobs, self.method = jobs, method
        self.pool: _Pool | None = None

    def start(self) -> None:
        """Start the workers now (``run`` does if not): before any other thread starts,
        they can be forked (``start_method``)."""
        if self.pool is None:
            b = self.budget
            deadline = None if b.seconds is None else time.time() + b.seconds
            self.pool = _Pool(self.jobs, self.make_run, self.reduce, self.method,
                              b.preemptions, deadline)

    def run(self, strategy: str = "dfs") -> Report:
        """The search; every worker is stopped when it returns or raises."""
        try:
            if strategy != "dfs":
                raise ValueError("--jobs splits the dfs search only")
            self.start()
            return super().run(strategy)
        finally:
            if self.pool is not None:
                self.pool.close()

    def _schedule_runner(self) -> tuple[None, bool]:
        """None: the workers run the schedules (``_worker``: each as one process would)."""
        return None, False

    def _dfs(self, report: Report, seen: set[str]) -> None:
        """``Explorer._dfs`` with the runs from the workers, recorded task by task in the
        serial order (a budget stops it at the same run)."""
        pool, b = self.pool, self.budget
        assert pool is not None
        for bound in range(b.preemptions + 1):
            before, report.bound, report.complete = report.explored, bound, False
            order = pool.start(bound)
            pruned, capped, k, pos = 0, False, 0, 0
            over: str | None = None
            while k < len(order) and over is None:
                tid = order[k]
                finished = tid in pool.done
                for r in pool.buffers[tid][pos:]:
                    if (over := self._over(report)) is not None:
                        break
                    self._record(report, r, seen)
                    pos += 1
                else:
                    if finished:
                        del pool.buffers[tid]  # merged: a long search keeps no run twice
                        t_pruned, t_capped, stopped = pool.done[tid]
                        pruned, capped = pruned + t_pruned, capped or t_capped
                        over = "seconds" if stopped else None  # the worker's clock ran out
                        k, pos = k + 1, 0
                    else:
                        pool.pump()
                        over = "seconds" if self._over(report) == "seconds" else None
            report.pruned += pruned
            report.per_bound[bound] = report.explored - before
            if over is not None:
                report.stopped = over
                return
            report.complete = True
            if not capped:
                report.bound = b.preemptions
                return
