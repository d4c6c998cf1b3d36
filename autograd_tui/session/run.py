"""A run: a scenario on a fresh engine under a controller, recorded as it goes.

The one place where scenarios, the engine, the controller, the history and the
recording meet; the app and the command line both drive a ``Run``.  Also the
re-execution replay: run a recording's scenario again under its recorded
schedule and compare event for event.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from autograd_tui import engine, scenarios
from autograd_tui.control import Controller, StepResult
from autograd_tui.engine.events import Event, summary, summary_raw
from autograd_tui.history import History
from autograd_tui.history import recordings as trace
from autograd_tui.scenarios import Scenario, ScenarioError
from autograd_tui.words import format_event, plain

ENGINE_OPTIONS = {
    "max_recursion_depth": int, "reentrant": str, "wake_owner": bool,
    "depth_priority": bool, "reentrant_pool_size": int,
}


def engine_options(scenario: Scenario, overrides: dict[str, Any] | None = None
                   ) -> dict[str, Any]:
    opts = dict(scenario.engine)
    for k, v in (overrides or {}).items():
        if k not in ENGINE_OPTIONS:
            raise ScenarioError(f"unknown engine option {k!r} (options: "
                                f"{', '.join(ENGINE_OPTIONS)})", usage=True)
        if k == "reentrant_pool_size" and (v is None or (isinstance(v, str) and v.lower()
                                                         in ("none", "null", ""))):
            opts[k] = None
        else:
            opts[k] = scenarios.convert(v, ENGINE_OPTIONS[k], f"engine option {k!r}")
    return opts


#: the cyclic collector's first threshold during a run to the end (CPython's is 700)
RUN_GC_THRESHOLD = 100_000


@contextmanager
def _collector_aside(to_the_end: bool) -> Iterator[None]:
    """A run to its end (``autograd-tui run --headless``) keeps every event, long-lived and
    acyclic: the cyclic collector would rescan them and everything imported before, about
    1 us an event.  For the run, what exists before it is frozen (``gc.freeze``) and a
    young collection waits for ``RUN_GC_THRESHOLD`` new objects, not 700; both undone
    after, so that cyclic garbage made meanwhile is still collected."""
    if not to_the_end or not gc.isenabled():
        yield
        return
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(old[0], RUN_GC_THRESHOLD), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


class Run:
    """One scenario run.  ``events`` and ``history`` grow as the engine moves."""

    def __init__(self, scenario: Scenario, params: dict[str, Any] | None = None, *,
                 policy: str = "round-robin", seed: int = 0, serialized: bool = True,
                 engine_overrides: dict[str, Any] | None = None,
                 full_tensors: bool = False) -> None:
        self.scenario = scenario
        self.params = scenario.resolve_params(params)
        self.policy, self.seed, self.serialized = policy, seed, serialized
        self.options = engine_options(scenario, engine_overrides)
        try:
            self.engine = engine.Engine(**self.options)
        except (TypeError, ValueError) as e:
            raise ScenarioError(f"bad engine options for {scenario.name}: {e}",
                                usage=True) from None
        self.engine.record_values = full_tensors
        self.full_tensors = full_tensors
        self.history = History(every=128)  # the run's one store of events: the controller appends
        try:
            self.controller = Controller(self.engine, serialized=serialized, policy=policy,
                                         seed=seed, history=self.history)
        except ValueError as e:
            raise ScenarioError(str(e)) from None
        self.result: dict[str, Any] | None = None
        self.no_grad: dict[str, str] = {}  # parameters that got no gradient, and why
        self._started = False

    # --- driving ---------------------------------------------------------------------
    def start(self) -> None:
        if not self._started:
            self._started = True
            self.controller.start(self._program)

    def _program(self) -> Any:
        out = self.scenario.program(**self.params)
        self.result = dict(out) if isinstance(out, dict) else {"result": out}
        self.no_grad = dict(getattr(out, "no_grad", None) or {})  # a torch program's
        return self.result

    def run(self, max_steps: int | None = None) -> StepResult:
        self.start()
        with _collector_aside(max_steps is None):
            if self.serialized:
                return self.controller.run(max_steps)
            return self.controller.wait()

    @property
    def events(self) -> list[Event]:
        return self.history.events

    @property
    def error(self) -> BaseException | None:
        return self.controller.program_error

    @property
    def finished(self) -> bool:
        return self.controller.finished

    def gradients(self) -> dict[str, np.ndarray]:
        out = {}
        for k, v in (self.result or {}).items():
            if isinstance(v, engine.Tensor):
                out[k] = v.detach().to("cpu").numpy()
        return out

    def gradient_summaries(self) -> dict[str, dict[str, Any]]:
        """Each gradient's summary as the events make it (``summary_raw``): a sparse one
        too big to densify (``torch_bridge.convert.SparseGrad``) from its values."""
        return {k: summary(summary_raw(v)) for k, v in (self.result or {}).items()
                if isinstance(v, engine.Tensor)}

    def header(self) -> dict[str, Any]:
        """The recording's header; a scenario file's ``FORWARD`` goes in it (a built-in
        lesson's is looked up by name), so its recording keeps the forward-op labels."""
        header = trace.make_header(
            scenario=self.scenario.name if self.scenario.source.startswith("scenarios.")
            else self.scenario.source,
            params=self.params, engine_options=self.engine.options(), policy=self.policy,
            seed=self.seed, serialized=self.serialized, events=self.events,
            full_tensors=self.full_tensors)
        if self.scenario.script:  # a PyTorch script's entry or Nth backward, its arguments
            header["scenario"]["script"] = dict(self.scenario.script)
        if self.scenario.forward and not self.scenario.source.startswith("scenarios."):
            header["scenario"]["forward"] = {str(k): list(v)
                                             for k, v in self.scenario.forward.items()}
        return header

    def footer(self) -> dict[str, Any]:
        grads = self.gradient_summaries()
        status = "deadlock" if self.controller.report is not None else (
            "error" if self.error is not None else "completed" if self.finished else "running")
        return {"schedule": self.controller.schedule_string(), "gradients": grads,
                "status": status, "error": str(self.error) if self.error else None,
                **({"no_gradient": self.no_grad} if self.no_grad else {})}

    def save(self, path: str | Path) -> int:
        return trace.save(path, self.header(), self.events, self.footer())

    def close(self) -> bool:
        return self.controller.close()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class RunSpec:
    """A run as a recipe: calling it gives a fresh ``Run``.  The explorer takes one as
    its ``make_run`` and, reading the fields, may run the same program on its cooperative
    substrate (``control/fastrun.py``) instead."""

    scenario: Scenario
    params: dict[str, Any] | None = None
    engine_overrides: dict[str, Any] | None = None

    def __call__(self) -> Run:
        return Run(self.scenario, self.params, engine_overrides=self.engine_overrides)


class ScenarioRun:
    """A picklable ``make_run``: the scenario (a built-in name, a ``.py`` path, or a
    ``Scenario`` whose program is importable), its parameters and engine options.  Each
    process loads the scenario once (``loaded``: the parent's, already loaded)."""

    def __init__(self, source: Any, params: dict[str, Any] | None = None,
                 engine: dict[str, Any] | None = None, loaded: Any = None) -> None:
        self.source, self.params, self.engine = source, dict(params or {}), dict(engine or {})
        self._loaded = loaded if loaded is not None or isinstance(source, str) else source

    def __reduce__(self) -> tuple[Any, ...]:  # pickled without the loaded scenario
        return ScenarioRun, (self.source, self.params, self.engine)

    def load(self) -> Any:
        """The scenario, loaded once (a forked worker inherits it instead of loading it
        at its first run)."""
        if self._loaded is None:
            from autograd_tui.session.program_errors import load_scenario

            self._loaded = load_scenario(self.source)
        return self._loaded

    def spec(self) -> RunSpec:
        return RunSpec(self.load(), self.params, self.engine)

    def __call__(self) -> Run:
        return self.spec()()


def _field(d: dict[str, Any], key: str) -> dict[str, Any]:
    """``d[key]`` if it is an object, else {}: the loader does not check the header's
    keys, and a missing or mistyped one is as good as empty."""
    v = d.get(key)
    return dict(v) if isinstance(v, dict) else {}


def builtin_scenario_of(rec: trace.Recording) -> Scenario:
    """The built-in scenario the recording names (``scenarios.get``: never a file)."""
    name = rec.scenario
    if not name:
        raise ScenarioError("the recording names no scenario: it can only be viewed, or "
                            "re-executed with --scenario NAME|PATH", usage=True)
    if not isinstance(name, str) or name not in scenarios.names():
        raise ScenarioError(
            f"the recording names the scenario {str(name)!r}, which is not a built-in one; "
            "a recording never chooses a file to run: pass --scenario PATH (the scenario "
            "file, if you trust it) to re-execute it", usage=True)
    return scenarios.get(name)


@dataclass
class Divergence:
    index: int  # k: the first event (1-based) that differs
    expected: Event | None
    got: Event | None

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def lines(self, names: dict[int, str] | None = None) -> list[str]:
        """What differs, in words: event k, each field that differs, the recorded and the
        re-executed value as text (JSON for a summary: every digit, as the file has it;
        the events keep summaries as raw JSON, whose repr says nothing).  ``names``: node
        number -> name, for the events' words (``words.node_names``)."""
        k, a, b = self.index, self.expected, self.got
        head = f"diverged at event {k}:"
        if a is None or b is None:
            ended, other, e = ("recording", "re-execution", b) if a is None else \
                ("re-execution", "recording", a)
            return [head, f"  the {ended} ends at event {k - 1}; the {other} goes on:",
                    f"  {format_event(e, names)}"]
        out = [head, f"  recorded:    {format_event(a, names)}",
               f"  re-executed: {format_event(b, names)}"]
        da, db = _fields(a), _fields(b)
        for key in (*da, *(x for x in db if x not in da)):
            if da.get(key, _ABSENT) != db.get(key, _ABSENT):
                out += [f"  {key} differs:", f"    recorded:    {_text(da.get(key, _ABSENT))}",
                        f"    re-executed: {_text(db.get(key, _ABSENT))}"]
        return out


_ABSENT = object()
_TEXT_MAX = 400  # a value's text in a divergence line; longer is cut, said with "..."


def _fields(e: Event) -> dict[str, Any]:
    """An event's fields by name, as plain values (summaries decoded), the kind first."""
    d = e.to_dict()
    return {"kind": d["kind"], **{k: d[k] for k in ("thread", "graph_task", "node", "queue")},
            **d["data"]}


def _text(v: Any) -> str:
    if v is _ABSENT:
        return "(no such field)"
    try:
        t = msgspec.json.encode(v).decode()
    except (TypeError, ValueError, OverflowError):  # not JSON-able: repr says it in text
        t = repr(v)
    return plain(t if len(t) <= _TEXT_MAX else t[:_TEXT_MAX] + "...")


#: steps run between two calls of ``reexecute``'s ``on_events``
WATCH_STEPS = 256


def reexecute(rec: trace.Recording, scenario: Scenario | None = None, *,
              on_events: Callable[[int], None] | None = None
              ) -> tuple[Run, Divergence | None]:
    """Run the recording's scenario again under its recorded schedule; compare events.

    A recording is untrusted data and never chooses what code runs: the scenario is
    ``scenario`` (one the person named: ``replay --reexecute --scenario PATH``) or the
    built-in scenario the recording names; a name that is not built in (a path a
    recording of a scenario file gives) is an error that says what to pass.
    ``on_events(n)`` is told the number of events so far as the run goes (a progress
    bar): the run then goes in slices of ``WATCH_STEPS`` steps, the same steps."""
    if scenario is None:
        scenario = builtin_scenario_of(rec)
    sched = _field(rec.header, "schedule")
    serialized = sched.get("serialized", True)
    if not serialized:
        raise ScenarioError("the recording was made free-running: its schedule cannot be "
                            "replayed exactly; view it instead")
    schedule = rec.footer.get("schedule", "")
    if not isinstance(schedule, str):
        raise ScenarioError("the recording's footer has no schedule string: it cannot be "
                            "re-executed")
    run = Run(scenario, _field(_field(rec.header, "scenario"), "params"),
              policy=f"schedule:{schedule}", engine_overrides=_field(rec.header, "engine"),
              full_tensors=rec.header.get("tensors") == "full")
    try:
        if on_events is None:
            run.run()
        else:
            while run.run(WATCH_STEPS).status == "limit":
                on_events(len(run.events))
            on_events(len(run.events))
    except Exception:
        run.close()
        raise
    got = run.events
    for i, (a, b) in enumerate(zip(rec.events, got)):
        if a != b:
            return run, Divergence(i + 1, a, b)
    if len(got) != len(rec.events):
        i = min(len(got), len(rec.events))
        return run, Divergence(i + 1, rec.events[i] if i < len(rec.events) else None,
                               got[i] if i < len(got) else None)
    return run, None
