"""Graphviz export: time to draw a large graph's end state.

The scenario is ``transformer-block`` when it exists; otherwise a generated
scenario file with a few hundred backward nodes (a residual stack: per layer
``h = relu(linear(h, W, b)) * s + h``, plus a weight-decay term per layer, so
the AccumulateGrads have two dependencies and fan-in is real).  The scenario
is run once (not timed), then, on its end state:

1. DOT generation (``autograd_tui.export.to_dot``), best of several repetitions;
2. rendering that DOT to SVG with Graphviz ``dot`` (one run; skipped without
   ``dot``), also with ``--collapse-leaves`` for comparison.

The two are printed separately.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from autograd_tui import export as gx
from autograd_tui import scenarios
from autograd_tui.session.run import Run
from bench import _cli

PREFERRED = "transformer-block"
LAYERS = 60  # about 6 nodes per layer
DOT_REPS = 7

GENERATED = '''\
"""Generated for bench/bench_export.py: a deep residual stack."""
from __future__ import annotations

from autograd_tui import engine

NAME = "generated-residual-stack"


def program():
    F = engine.functional
    h = engine.tensor([[0.5, -0.25, 1.0, 0.75]], requires_grad=True)
    penalty = None
    for i in range({layers}):
        w = engine.tensor([[0.01 * ((i + r + c) % 7 - 3) for c in range(4)]
                           for r in range(4)], requires_grad=True)
        b = engine.tensor([0.01 * (i % 5)] * 4, requires_grad=True)
        h = F.linear(h, w, b).relu() * 0.5 + h
        term = (w * w).sum()
        penalty = term if penalty is None else penalty + term
    (h.sum() + penalty * 1e-3).backward()
    return {{"h": h}}
'''


def _scenario(tmp: Path) -> scenarios.Scenario:
    if PREFERRED in scenarios.names():
        return scenarios.get(PREFERRED)
    path = tmp / "generated_residual_stack.py"
    path.write_text(GENERATED.format(layers=LAYERS))
    return scenarios.load(str(path))


def main(argv: list[str] | None = None) -> None:
    _cli.parser("python -m bench.bench_export", __doc__,
                "under a minute (longer when Graphviz's dot is installed)").parse_args(
        sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="bench_export_") as d:
        tmp = Path(d)
        scenario = _scenario(tmp)
        t0 = time.perf_counter()
        run = Run(scenario)
        try:
            run.run()
        finally:
            run.close()
        run_s = time.perf_counter() - t0
        state = run.history.state_at(len(run.history))
        print(f"scenario: {scenario.name}"
              + ("" if scenario.name == PREFERRED else f" ({PREFERRED} does not exist yet)"))
        print(f"end state: {len(state.nodes)} nodes, {len(run.history)} events "
              f"(run, not timed below: {run_s:.2f} s)")

        times = []
        text = ""
        for _ in range(DOT_REPS):
            t0 = time.perf_counter()
            text = gx.to_dot(state, title=scenario.name)
            times.append(time.perf_counter() - t0)
        print(f"DOT generation: {min(times):.4f} s (best of {DOT_REPS}; median "
              f"{statistics.median(times):.4f} s), {len(text.encode()) / 1024:.0f} KiB")

        if gx.find_dot() is None:
            print(f"dot rendering: skipped (Graphviz `dot` not on PATH; {gx.INSTALL_HINT})")
            return
        for label, source in (("", text),
                              (" --collapse-leaves",
                               gx.to_dot(state, title=scenario.name, collapse_leaves=True))):
            t0 = time.perf_counter()
            svg = gx.render(source, "svg", timeout=600)
            elapsed = time.perf_counter() - t0
            print(f"dot -Tsvg{label}: {elapsed:.3f} s, {len(svg) / 1024:.0f} KiB of SVG")


if __name__ == "__main__":
    main()
