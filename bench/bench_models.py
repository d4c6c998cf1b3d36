"""Big models: a real PyTorch model's forward under capture and backward on our engine.

A ``torch.nn.TransformerEncoder`` (d_model 16, 2 heads, feed-forward 32, sequence 4,
batch 2, dropout 0) of growing depth, so that its graph has about 1k / 5k / 20k / 100k
autograd nodes (counted by walking ``grad_fn.next_functions``, printed). PyTorch is
pinned to one thread. For each size, in one process, best of a few repetitions (each
repetition takes every figure in turn, so a passing load weighs on all alike):

- ``forward``: the plain forward (and the loss);
- ``backward``: plain ``loss.backward()``;
- ``capture``: the same forward as ``autograd-tui torch`` runs it (``forward_capture``:
  ``capture()``, the in-place log, the backward-call and compile watches), then
  ``from_torch`` (our graph): ``capture fwd`` and ``from_torch`` are its two parts;
- ``ours``: our engine's backward over that graph, unobserved; ``observed``: the same
  with a ``ListObserver`` on the engine (every event built and kept, each node's
  ``node_meta`` made);

and the ratios capture / forward (goal <= 10x) and ours / backward (goal <= 5x).
Then ``autograd-tui torch --headless --quiet --record FILE`` on a generated script of
that size, in a fresh process: completed or not, wall time, peak RSS, file size.

Alone: ``python -m bench.bench_models [--sizes 1000,5000,20000,100000] [--json]
[--no-cli] [--reps N] [--clock wall|cpu]`` (``cpu``: the in-process figures in this
process's CPU seconds, steadier than wall seconds on a machine others load);
``BENCH_MODELS_TIMEOUT`` (seconds, default 900) stops a CLI run that takes longer.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import _cli

SIZES = (1_000, 5_000, 20_000, 100_000)
CAPTURE_GOAL, BACKWARD_GOAL = 10.0, 5.0
SPEC = dict(d_model=16, nhead=2, dim_feedforward=32, seq=4, batch=2)

SCRIPT = '''"""A TransformerEncoder of {layers} layers (bench/bench_models.py)."""
import torch

torch.set_num_threads(1)


def main():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer({d_model}, {nhead}, {dim_feedforward},
                                             dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, {layers}, enable_nested_tensor=False)
    x = torch.randn({batch}, {seq}, {d_model})
    return model(x).pow(2).mean()
'''


def build(layers: int) -> tuple[Any, Any]:
    import torch

    torch.manual_seed(0)
    s = SPEC
    layer = torch.nn.TransformerEncoderLayer(s["d_model"], s["nhead"], s["dim_feedforward"],
                                             dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
    return model, torch.randn(s["batch"], s["seq"], s["d_model"])


def forward(model: Any, x: Any) -> Any:
    return model(x).pow(2).mean()


def count_nodes(loss: Any) -> int:
    seen: set[int] = set()
    todo = [loss.grad_fn]
    while todo:
        fn = todo.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        todo.extend(n for n, _ in fn.next_functions)
    return len(seen)


def layers_for(nodes: int) -> int:
    """The depth whose graph has about ``nodes`` nodes (nodes grow linearly with depth)."""
    m1, x = build(1)
    m2, _ = build(2)
    a, b = count_nodes(forward(m1, x)), count_nodes(forward(m2, x))
    return max(1, round((nodes - (a - (b - a))) / (b - a)))


def forward_capture() -> Any:
    """The context ``autograd-tui torch`` runs the forward pass under."""
    try:
        from autograd_tui.engine.torch_bridge.program import forward_capture as fc
    except ImportError:  # before it had a name: run_program's contexts, spelled out
        return _spelled_out()
    return fc()


@contextlib.contextmanager
def _spelled_out() -> Iterator[None]:
    from autograd_tui.engine.torch_bridge import capture
    from autograd_tui.engine.torch_bridge.compiled import watch_compile
    from autograd_tui.engine.torch_bridge.inplace import inplace_log
    from autograd_tui.engine.torch_bridge.program import backward_calls

    with watch_compile(eager=True), capture(), backward_calls(), inplace_log():
        yield


def in_process(layers: int, reps: int, clock: Any = time.perf_counter) -> dict[str, float]:
    """Every in-process figure for one depth (seconds of ``clock``; ``nodes``)."""
    import torch

    from autograd_tui import engine
    try:  # what run_program builds the graph with
        from autograd_tui.engine.torch_bridge.program import build_graph as from_torch
    except ImportError:  # before it had a name
        from autograd_tui.engine.torch_bridge import from_torch

    model, x = build(layers)
    res: dict[str, float] = {"layers": layers, "nodes": count_nodes(forward(model, x))}
    parts: dict[str, list[float]] = {k: [] for k in (
        "forward", "backward", "capture_fwd", "from_torch", "ours", "observed")}
    # each repetition takes every figure in turn, so that a load that comes and goes
    # (a shared machine) weighs on all of them alike
    for _ in range(reps):
        for observed in (False, True):
            gc.collect()
            t0 = clock()
            loss = forward(model, x)
            t1 = clock()
            loss.backward()
            t2 = clock()
            if not observed:
                parts["forward"].append(t1 - t0)
                parts["backward"].append(t2 - t1)
            model.zero_grad(set_to_none=True)
            del loss
            gc.collect()
            t0 = clock()
            with forward_capture():
                loss = forward(model, x)
            t1 = clock()
            g = from_torch(loss)
            t2 = clock()
            eng = engine.Engine()
            obs = engine.ListObserver()
            if observed:
                eng.add_observer(obs)
            try:
                with engine.use_engine(eng):
                    t3 = clock()
                    g.backward()
                    t4 = clock()
            finally:
                eng.close()
            if observed:
                parts["observed"].append(t4 - t3)
                res["events"] = len(obs.events)
            else:
                parts["capture_fwd"].append(t1 - t0)
                parts["from_torch"].append(t2 - t1)
                parts["ours"].append(t4 - t3)
            model.zero_grad(set_to_none=True)
            del g, loss, obs
    for k, v in parts.items():
        res[k] = min(v)
    res["capture"] = res["capture_fwd"] + res["from_torch"]
    torch.set_num_threads(1)
    return res


def on_big_stack(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` on a thread with a 1 GiB stack: PyTorch frees a graph of 100,000
    nodes that Python has touched (``next_functions``) by recursion, past the main
    thread's 8 MiB (a segfault in libc10)."""
    out: list[Any] = []
    err: list[BaseException] = []

    def run() -> None:
        try:
            out.append(fn(*args))
        except BaseException as e:  # noqa: BLE001 - raised again on the caller's thread
            err.append(e)

    old = threading.stack_size(1 << 30)
    try:
        t = threading.Thread(target=run, name="bench_models")
        t.start()
    finally:
        threading.stack_size(old)
    t.join()
    if err:
        raise err[0]
    return out[0]


def _vm_hwm(pid: int) -> float:
    """The process's peak RSS so far, in bytes (Linux's VmHWM; 0 where unreadable).  Not
    wait4's ``ru_maxrss``: on Linux a child's starts at its parent's peak (kept across
    fork and exec), so under ``make bench`` every run read as this process's peak."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        pass
    return 0.0


def run_cli(layers: int, timeout: float) -> dict[str, Any]:
    """``autograd-tui torch --headless --quiet --record`` on a script of ``layers`` layers,
    in a fresh process: status, seconds, peak RSS (bytes), file size, its last line."""
    with tempfile.TemporaryDirectory() as tmp:
        script, rec = Path(tmp) / "encoder.py", Path(tmp) / "run.jsonl.gz"
        script.write_text(SCRIPT.format(layers=layers, **SPEC))
        args = [sys.executable, "-m", "autograd_tui", "torch", str(script), "--headless",
                "--quiet", "--record", str(rec)]
        env = {**os.environ, "AUTOGRAD_TUI_MAX_RECORDING_MB": "4096"}
        with open(Path(tmp) / "out", "w+b") as out:
            t0 = time.perf_counter()
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
            status, hwm = None, 0.0
            while status is None:
                hwm = max(hwm, _vm_hwm(proc.pid))
                pid, code, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    status = os.waitstatus_to_exitcode(code)
                    break
                if time.perf_counter() - t0 > timeout:
                    proc.kill()
                    _, code, usage = os.wait4(proc.pid, 0)
                    status = f"timeout {timeout:.0f} s"
                    break
                time.sleep(0.05)
            seconds = time.perf_counter() - t0
            proc.returncode = status if isinstance(status, int) else -9  # reaped: no 2nd wait
            out.seek(0)
            lines = out.read().decode(errors="replace").strip().splitlines()
        last = next((ln for ln in reversed(lines) if ln.startswith(("completed", "stopped",
                                                                     "error"))),
                    lines[-1] if lines else "")
        ok = status == 0 and any(ln.startswith("completed") for ln in lines)
        return {"status": "completed" if ok else f"failed ({status}): {last[:120]}",
                "seconds": seconds, "rss": hwm or usage.ru_maxrss * 1024.0,
                "bytes": rec.stat().st_size if rec.exists() else 0}


def main(argv: list[str] | None = None) -> None:
    p = _cli.parser("python -m bench.bench_models", __doc__,
                    "several minutes to half an hour (the 100k-node model dominates; "
                    "BENCH_MODELS_TIMEOUT caps each CLI run)")
    p.add_argument("--sizes", default=",".join(str(s) for s in SIZES),
                   help="node counts, comma-separated (default: %(default)s)")
    p.add_argument("--reps", type=int, default=3, help="repetitions (best taken)")
    p.add_argument("--no-cli", action="store_true", help="skip the autograd-tui torch runs")
    p.add_argument("--json", action="store_true", help="also one JSON line per size")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="in-process figures in wall seconds, or in this process's CPU "
                        "seconds (steadier on a machine others load; default: %(default)s)")
    a = p.parse_args(sys.argv[1:] if argv is None else argv)
    import torch

    torch.set_num_threads(1)
    timeout = float(os.environ.get("BENCH_MODELS_TIMEOUT", "900"))
    clock = time.process_time if a.clock == "cpu" else time.perf_counter
    print(f"TransformerEncoder {SPEC}, torch {torch.__version__}, 1 thread; goals: capture "
          f"<= {CAPTURE_GOAL:.0f}x forward, our backward <= {BACKWARD_GOAL:.0f}x torch's; "
          f"{a.clock} seconds")
    print(f"{'nodes':>7} {'layers':>6} {'forward':>8} {'backward':>8} {'capt fwd':>8} "
          f"{'from_trc':>8} {'ours':>8} {'observed':>8} {'events':>8} {'capture/fwd':>12} "
          f"{'ours/bwd':>9} {'obs/bwd':>8}", flush=True)
    in_process(1, 1)  # first-time costs (imports, the modes' set-up) out of the figures
    for size in (int(s) for s in a.sizes.split(",") if s.strip()):
        layers = layers_for(size)
        reps = a.reps if size <= 20_000 else 1
        r = on_big_stack(in_process, layers, reps, clock)
        cap, bwd = r["capture"] / r["forward"], r["ours"] / r["backward"]
        obs = r["observed"] / r["backward"]
        print(f"{r['nodes']:>7,} {layers:>6} {r['forward']:>8.3f} {r['backward']:>8.3f} "
              f"{r['capture_fwd']:>8.3f} {r['from_torch']:>8.3f} {r['ours']:>8.3f} "
              f"{r['observed']:>8.3f} {r['events']:>8,} "
              f"{cap:>8.1f}x {'ok' if cap <= CAPTURE_GOAL else '!!':>2} "
              f"{bwd:>6.1f}x {'ok' if bwd <= BACKWARD_GOAL else '!!':>2} {obs:>7.1f}x",
              flush=True)
        r["rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0
        print(f"        this process's peak RSS so far: {r['rss'] / 2**20:.0f} MB", flush=True)
        if not a.no_cli:
            c = run_cli(layers, timeout)
            r["cli"] = c
            print(f"        autograd-tui torch --headless --quiet --record: {c['status']}, "
                  f"{c['seconds']:.1f} s, peak RSS {c['rss'] / 2**20:.0f} MB, "
                  f"file {c['bytes'] / 2**20:.1f} MB", flush=True)
        if a.json:
            print(json.dumps({"size": size, **r}), flush=True)
        gc.collect()


if __name__ == "__main__":
    main()
