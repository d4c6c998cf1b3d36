"""The app's step latency: from pressing ``n`` to the redrawn screen, via Textual's Pilot.

For each scenario (``linear-relu``, the default, and the largest built-in one:
``transformer-block`` if it exists, else the scenario whose backward graph has
the most nodes), the app is started headless at 120x40 and:

* **start**: the time from entering ``App.run_test`` to the app being mounted
  (compose and ``on_mount`` done: the context manager returns) and to its first
  frame (the first ``pilot.pause()`` after that: the first refresh processed);
* **step**: ``STEPS`` times, post the key event ``n`` to the app (what the
  terminal driver does for a key press) and poll (``asyncio.sleep`` of 0.5 ms)
  until ``app.debugger.session.count()`` has grown and the app has drawn it (the title's
  ``event i/n`` shows the new count; a step that makes no event: until its
  worker has been seen and is done), then
  ``pilot.pause(0)`` twice: the screen's compositor renders the updated widgets.
  (Until commit 86a46c1 "no event" was "no worker busy", which is also true
  before the app has handled the key at all: when the previous step's worker was
  already gone, a sample could end at once and the next one time two steps.)
  The wall time of each is one sample.  ``pilot.press`` and ``pilot.pause()``
  are not used inside the timing: they wait for the process to look idle (in
  20 ms slices, up to a second), which measures the machine's load, not the app.
  A scenario that ends before ``STEPS`` steps is restarted (``r``), outside the
  timing.

Then a **wide queue** (``--wide``, default 4,000): ``bench/scenarios/wide_queue.py``
recorded at that width, opened at the event where its queue is widest, and stepped
forward ``STEPS // 4`` times (the queue pane shows the pop order of about w tasks at
each step); the same goal applies.

Then a **big recording** (``--recording-events``, default 1,000,000; 0 skips it):
the recording ``bench.bench_trace`` generates (a real run replicated: 21 graphs of
5,590 nodes, 117,390 nodes in all), saved, then, in a fresh process each (so that its
resident memory is the recording's), loaded (``trace.load``, default settings, with
``background=True`` as ``autograd-tui replay`` does where the tree has it) and opened
(``AutogradApp(recording=...)``): the time to the first frame (the title drawn, then two
compositor passes), to every event checked and the end shown, then ``STEPS // 4``
steps back (``left``, from the end) and the jumps ``home`` and ``end``, each until
the title shows the new index and the screen is rendered, and the RSS.  Before (the
sources at ``bench_trace.BASE_COMMIT``, with the cap raised: they refused the file by
default) and after, in the same run.  Goal: under 2 s to the first frame, under 1 GB
RSS, a step median under ``GOAL_MS``.  This measures what
opening a long recording costs: the event log and the list view make only the
rows on screen (before that change: 40 s to the first frame, 1.4 s per step).

Prints the median and the maximum per scenario, and PASS/FAIL against the goal:
a median under ``GOAL_MS`` on the large graph.  On a failure (or with
``--profile``) the large scenario's steps are profiled with cProfile and the top
functions by cumulative time are printed.

Run: ``.venv/bin/python -m bench.bench_app`` (``--steps N``, ``--profile``,
``--recording-events N``; ``--only-recording`` with ``--base COMMIT``: only the big
recording, before at that commit).
"""

from __future__ import annotations

import asyncio
import cProfile
import inspect
import os
import pstats
import re
import statistics
import sys
import time
from typing import Any

from textual import events

from autograd_tui.app import AutogradApp
from bench import _cli

STEPS = 200
GOAL_MS = 50.0
SIZE = (120, 40)
SMALL = "linear-relu"
PREFERRED_LARGE = "transformer-block"
PROFILE_TOP = 25
PROFILE_FILTER = r"autograd_tui|_compositor|screen\.py|_styles_cache|widget\.py|visual\.py"
_SHOWN = re.compile(r"event (\d+)/(\d+)")


def largest_scenario() -> tuple[str, int]:
    """``transformer-block`` if it exists, else the built-in with the most graph nodes."""
    from autograd_tui import scenarios
    from autograd_tui.session.run import Run

    names = scenarios.names()
    if PREFERRED_LARGE in names:
        return PREFERRED_LARGE, -1
    best = ("", -1)
    for name in names:
        run = Run(scenarios.load(name))
        try:
            result = run.run()
            nodes = len(run.history.state_at(len(run.history)).nodes)
        finally:
            run.close()
        if result.status == "finished" and nodes > best[1]:
            best = (name, nodes)
    return best


def _shown(app: AutogradApp) -> tuple[int, int]:
    m = _SHOWN.search(str(app.debugger.sub_title))
    return (int(m.group(1)), int(m.group(2))) if m else (-1, -1)


def _busy(app: AutogradApp) -> bool:
    return any(w.group == "driver" and not w.is_finished for w in app.workers)


async def _settle(pilot: Any, before: int, timeout: float = 10.0) -> None:
    """Until the step is done and drawn (or nothing more will come), then render."""
    app = pilot.app
    deadline = time.perf_counter() + timeout
    worked = False  # a driver worker was seen: the key has been handled
    while time.perf_counter() < deadline:
        s = app.debugger.session
        if s is None:
            return
        n = s.count()
        busy = _busy(app)
        worked = worked or busy
        if _shown(app)[1] == n and (n > before or s.finished or (worked and not busy)):
            break  # drawn (or the step made no event and its worker is done)
        await asyncio.sleep(0.0005)
    await pilot.pause(0)
    await pilot.pause(0)


async def _measure(name: str, steps: int, profile: cProfile.Profile | None,
                   params: dict[str, str] | None = None) -> dict[str, Any]:
    app = AutogradApp(name, params=params)
    t0 = time.perf_counter()
    async with app.run_test(size=SIZE, notifications=False) as pilot:
        t_mounted = time.perf_counter()
        await pilot.pause()
        t_frame = time.perf_counter()
        assert app.debugger.session is not None
        samples: list[float] = []
        cpu: list[float] = []
        restarts = 0
        while len(samples) < steps:
            s = app.debugger.session
            assert s is not None
            if s.finished:
                restarts += 1
                await pilot.press("r")
                await _settle(pilot, -1)
                await pilot.pause()
                continue
            before = s.count()
            if profile is not None:
                profile.enable()
            t, c = time.perf_counter(), time.process_time()
            app.post_message(events.Key("full_stop", "."))
            await _settle(pilot, before)
            samples.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
            if profile is not None:
                profile.disable()
        n_events = app.debugger.session.count() if app.debugger.session else 0
        nodes = len(app.debugger.session.state_at(n_events).nodes) if app.debugger.session else 0
        await pilot.press("q")
    return {"name": name, "mounted": t_mounted - t0, "frame": t_frame - t0,
            "samples": samples, "cpu": cpu, "restarts": restarts, "events": n_events,
            "nodes": nodes}


async def _measure_wide(path: str, steps: int) -> dict[str, Any]:
    """The wide-queue recording, opened at the event where its queue is widest: ``steps``
    steps forward from there (the queue pane sorts about w tasks at each)."""
    from autograd_tui.history import recordings as trace

    rec = trace.load(path)
    widest = max((e for e in rec.events if e.kind == "push"), key=lambda e: e.size)
    app = AutogradApp(recording=rec)
    async with app.run_test(size=SIZE, notifications=False) as pilot:
        await pilot.pause()
        app.debugger.cursor = widest.seq
        while _shown(app)[0] != widest.seq:
            await asyncio.sleep(0.0005)
        await pilot.pause()
        samples = []
        for i in range(steps):
            t = time.perf_counter()
            app.post_message(events.Key("right", None))
            while _shown(app)[0] != widest.seq + i + 1 and time.perf_counter() < t + 30:
                await asyncio.sleep(0.0005)
            await pilot.pause(0)
            await pilot.pause(0)
            samples.append(time.perf_counter() - t)
        await pilot.press("q")
    return {"events": len(rec.events), "width": widest.size, "at": widest.seq,
            "samples": samples}


def _wide_recording(width: int, steps: int) -> float:
    """Record ``bench/scenarios/wide_queue.py`` at ``width`` and step through it."""
    import tempfile
    from pathlib import Path

    from autograd_tui import scenarios
    from autograd_tui.session.run import Run

    scenario = scenarios.load(str(Path(__file__).parent / "scenarios" / "wide_queue.py"))
    with tempfile.TemporaryDirectory(prefix="bench-app-") as tmp:
        path = os.path.join(tmp, "wide.jsonl")
        run = Run(scenario, params={"w": width})
        try:
            run.run()
            run.save(path)
        finally:
            run.close()
        r = asyncio.run(_measure_wide(path, steps))
    ms = [x * 1000 for x in r["samples"]]
    med = statistics.median(ms)
    print(f"{'wide-queue w=' + format(width, ','):<20} {r['events']:,} events; from event "
          f"{r['at']:,} (the queue holds {r['width']:,} tasks) {len(ms)} steps forward: "
          f"median {med:6.2f} ms, max {max(ms):7.2f} ms")
    return med


async def _measure_recording(path: str, steps: int) -> dict[str, Any]:
    from autograd_tui.history import recordings as trace

    t0 = time.perf_counter()
    # as `autograd-tui replay` opens the app (a tree before it: load() had no background)
    background = "background" in inspect.signature(trace.load).parameters
    rec = trace.load(path, background=True) if background else trace.load(path)
    loaded = time.perf_counter() - t0
    app = AutogradApp(recording=rec)
    t0 = time.perf_counter()
    async with app.run_test(size=SIZE, notifications=False) as pilot:
        # the first frame: mounted, the title drawn, the compositor's render (not
        # pilot.pause(), which waits for the process to look idle: the check keeps it busy)
        while _shown(app)[1] < 0 and time.perf_counter() < t0 + 60:
            await asyncio.sleep(0.0005)
        await pilot.pause(0)
        await pilot.pause(0)
        frame = time.perf_counter() - t0
        assert app.debugger.session is not None
        first_shown = _shown(app)[0]
        # the check in the background: until every event is checked and the end shown
        n = len(rec.events)
        while _shown(app)[0] != n and time.perf_counter() < t0 + 120:
            await asyncio.sleep(0.005)
        await pilot.pause(0)
        checked = time.perf_counter() - t0
        assert app.debugger.session.count() == n, "the check did not end"
        await pilot.pause()

        async def key(k: str, want: int) -> float:
            t = time.perf_counter()
            app.post_message(events.Key(k, None))
            deadline = t + 30
            while _shown(app)[0] != want and time.perf_counter() < deadline:
                await asyncio.sleep(0.0005)
            await pilot.pause(0)
            await pilot.pause(0)
            return time.perf_counter() - t

        back = [await key("left", n - 1 - i) for i in range(steps)]
        home = await key("home", 0)
        end = await key("end", n)
        nodes = len(app.debugger.session.state_at(n).nodes)
        await pilot.press("q")
    return {"events": n, "nodes": nodes, "load": loaded, "frame": frame, "back": back,
            "home": home, "end": end, "checked": checked, "first_shown": first_shown}


#: a fresh process opens the recording in the app (``_measure_recording`` of this
#: bench_app, with this tree's autograd_tui or the base commit's) and says what it took
APP_SCRIPT = """
import asyncio, importlib.util, json, sys
spec = importlib.util.spec_from_file_location("bench_app_now", sys.argv[3])
bench_app = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_app)
r = asyncio.run(bench_app._measure_recording(sys.argv[1], int(sys.argv[2])))
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
r["rss_mb"] = int(status["VmRSS"].split()[0]) / 1024
r["peak_mb"] = int(status["VmHWM"].split()[0]) / 1024
print(json.dumps(r))
"""
GOAL_FIRST_FRAME_S, GOAL_RSS_MB = 2.0, 1024


def _big_recording(n_events: int, steps: int, base_commit: str | None = None) -> bool:
    """The big recording opened in a fresh process, before (``bench_trace.BASE_COMMIT``,
    its cap raised: it refused the file by default) and after (the default settings);
    True if the goals are met after.  ``base_commit``: another "before"."""
    import tempfile

    from autograd_tui.history import recordings as trace
    from bench import bench_trace

    base = bench_trace.record_base()
    events_, _ = bench_trace.replicate(base, n_events)
    ok = False
    with tempfile.TemporaryDirectory(prefix="bench-app-") as tmp, \
            bench_trace.base_tree(base_commit or bench_trace.BASE_COMMIT) as before_tree:
        path = os.path.join(tmp, "big.jsonl")
        trace.save(path, bench_trace.header_for(events_), events_, {"status": "completed"})
        del base, events_
        runs = [("after", None, {})]
        if before_tree is not None:
            runs.insert(0, (f"before ({base_commit or bench_trace.BASE_COMMIT})", before_tree,
                            {"AUTOGRAD_TUI_MAX_RECORDING_MB": bench_trace.BASE_CAP_MB}))
        for name, tree, env in runs:
            r = bench_trace.in_subprocess(APP_SCRIPT, [path, str(steps), __file__], tree, env)
            if "error" in r:
                print(f"{'big recording':<20} {name}: {r['error']}")
                continue
            ms = [x * 1000 for x in r["back"]]
            first = r["load"] + r["frame"]
            print(f"{'big recording':<20} {name}: {r['events']:,} events, {r['nodes']:,} "
                  f"nodes: trace.load {r['load']:.2f} s + first frame {r['frame']:.2f} s = "
                  f"{first:.2f} s; RSS {r['rss_mb']:,.0f} MB (peak {r['peak_mb']:,.0f})")
            if "checked" in r:  # the fold checked in the background (not before it)
                print(f"{'':<20} once the first frame is drawn the title shows event "
                      f"{r['first_shown']:,} (a check under way follows it); every event "
                      f"checked and the end shown at {r['load'] + r['checked']:.2f} s")
            med = statistics.median(ms)
            print(f"{'':<20} {len(ms)} steps back from the end: median {med:6.2f} ms, max "
                  f"{max(ms):7.2f} ms; home {r['home'] * 1000:.0f} ms, end "
                  f"{r['end'] * 1000:.0f} ms")
            if name == "after":
                ok = (first < GOAL_FIRST_FRAME_S and r["rss_mb"] < GOAL_RSS_MB
                      and med < GOAL_MS)
                print(f"goal: opens by default in under {GOAL_FIRST_FRAME_S:g} s to the first "
                      f"frame ({first:.2f} s), under {GOAL_RSS_MB:,} MB RSS "
                      f"({r['rss_mb']:,.0f} MB), step median under {GOAL_MS:g} ms "
                      f"({med:.2f} ms): {'PASS' if ok else 'FAIL'}")
    return ok


def _report(r: dict[str, Any]) -> float:
    ms = [x * 1000 for x in r["samples"]]
    med = statistics.median(ms)
    print(f"{r['name']:<20} start: mounted {r['mounted'] * 1000:7.1f} ms, first frame "
          f"{r['frame'] * 1000:7.1f} ms")
    print(f"{'':<20} {len(ms)} steps ({r['restarts']} restarts; at the end {r['events']} "
          f"events, {r['nodes']} nodes): median {med:6.2f} ms, p90 "
          f"{statistics.quantiles(ms, n=10)[-1]:6.2f} ms, max {max(ms):7.2f} ms; process CPU "
          f"per step: median {statistics.median(r['cpu']) * 1000:6.2f} ms")
    return med



def main(argv: list[str] | None = None) -> int:
    ap = _cli.parser("python -m bench.bench_app", __doc__,
                     "a few minutes (the million-event recording opened at the end dominates)")
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--profile", action="store_true",
                    help="profile the large scenario's steps even if it passes")
    ap.add_argument("--recording-events", type=int, default=1_000_000,
                    help="events in the big recording opened at the end (0: skip it)")
    ap.add_argument("--wide", type=int, default=4_000,
                    help="width of the wide-queue recording stepped through (0: skip it)")
    ap.add_argument("--torch-layers", type=int, default=0,
                    help="also a real PyTorch graph: torch-attention with this many blocks "
                         "(48: about 3,000 nodes; needs torch)")
    ap.add_argument("--base", default=None,
                    help="the big recording's 'before': the sources at this commit "
                         "(default: bench_trace.BASE_COMMIT, with the cap raised)")
    ap.add_argument("--only-recording", action="store_true",
                    help="only the big recording (no scenarios, no wide queue)")
    args = ap.parse_args(argv if argv is not None else [])
    if args.only_recording:
        return 0 if _big_recording(args.recording_events, max(args.steps // 4, 1),
                                   args.base) else 1
    large, nodes = largest_scenario()
    print(f"app step latency, {args.steps} steps per scenario at {SIZE[0]}x{SIZE[1]} "
          f"(large scenario: {large}" + (f", {nodes} nodes" if nodes >= 0 else "") + "); "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    asyncio.run(_measure(SMALL, 5, None))  # warm up imports and caches, not reported
    _report(asyncio.run(_measure(SMALL, args.steps, None)))
    med = _report(asyncio.run(_measure(large, args.steps, None)))
    ok = med < GOAL_MS
    print(f"goal: median under {GOAL_MS:.0f} ms per step on {large}: "
          f"{'PASS' if ok else 'FAIL'} ({med:.2f} ms)")
    wide = _wide_recording(args.wide, max(args.steps // 4, 1)) if args.wide > 0 else 0.0
    if args.wide > 0:
        ok_wide = wide < GOAL_MS
        print(f"goal: median under {GOAL_MS:.0f} ms per step on the wide-queue recording: "
              f"{'PASS' if ok_wide else 'FAIL'} ({wide:.2f} ms)")
        ok = ok and ok_wide
    if args.torch_layers > 0:  # a PyTorch model's graph (autograd-tui torch), same goal
        tmed = _report(asyncio.run(_measure("torch-attention", args.steps, None,
                                            {"layers": str(args.torch_layers)})))
        print(f"goal: median under {GOAL_MS:.0f} ms per step on torch-attention "
              f"(layers={args.torch_layers}): {'PASS' if tmed < GOAL_MS else 'FAIL'} "
              f"({tmed:.2f} ms)")
        ok = ok and tmed < GOAL_MS
    if args.recording_events > 0:
        ok = _big_recording(args.recording_events, max(args.steps // 4, 1),
                            args.base) and ok
    if args.profile or not ok:
        prof = cProfile.Profile()
        asyncio.run(_measure(large, min(args.steps, 100), prof))
        print(f"profile of {large}'s steps (UI thread): the app's drawing and Textual's "
              f"layout and rendering, top {PROFILE_TOP} by cumulative time")
        pstats.Stats(prof).sort_stats("cumulative").print_stats(PROFILE_FILTER, PROFILE_TOP)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
