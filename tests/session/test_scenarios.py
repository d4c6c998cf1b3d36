"""The built-in scenarios under the controller, and scenario files a person writes.

Every built-in scenario runs serialized under three random schedules.  A
``complete`` scenario must finish without a program error and (when it has a
``torch_program``) give PyTorch's gradients; a ``deadlock`` scenario must end in a
real deadlock report, and complete once its fix is applied.
"""

from __future__ import annotations

import functools
import importlib.util
import textwrap
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autograd_tui import engine, scenarios
from autograd_tui.control import Controller
from autograd_tui.scenarios import Scenario, ScenarioError

try:
    import torch
except ImportError:  # the optional "torch" extra: comparisons are skipped
    torch = None

pytestmark = pytest.mark.timeout(300)

SEEDS = (0, 1, 2)
BUILTINS = scenarios.builtins()
COMPLETE = [s for s in BUILTINS if s.expect == "complete"]
DEADLOCK = [s for s in BUILTINS if s.expect == "deadlock"]

EXPECTED_NAMES = {
    "linear-relu", "diamond", "chain", "fan-in", "tied-leaves", "multi-root", "grad-inputs",
    "hooks", "retain-graph", "double-backward", "error-in-node", "anomaly-nan",
    "multi-device", "reentrant", "reentrant-priority", "reentrant-deep", "checkpoint", "mlp",
    "transformer-block", "deadlock-reentrant-block", "deadlock-no-wakeup",
    "deadlock-lock-steal", "deadlock-pool-exhausted", "deadlock-wait-on-device",
    "race-lock-order", "race-accumulation-order", "inplace-version", "training-loop",
}
# PyTorch's own graphs through the bridge: built in where torch is installed
TORCH_NAMES = {"torch-mlp", "torch-cnn", "torch-attention", "torch-checkpoint",
               "torch-checkpoint-nonreentrant"}
if importlib.util.find_spec("torch") is not None:
    EXPECTED_NAMES |= TORCH_NAMES

# The fix of each deadlock: engine options (over the scenario's ENGINE) and parameters
# under which the same program completes.
FIXES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "deadlock-reentrant-block": ({"reentrant": "nested"}, {}),
    "deadlock-no-wakeup": ({"wake_owner": True}, {}),
    "deadlock-lock-steal": ({"depth_priority": True}, {}),
    "deadlock-pool-exhausted": ({"reentrant_pool_size": None}, {}),
    "deadlock-wait-on-device": ({}, {"fixed": True}),
}


def _ids(items: list[Scenario]) -> list[str]:
    return [s.name for s in items]


def run_controlled(scenario: Scenario, seed: int, engine_opts: dict[str, Any] | None = None,
                   params: dict[str, Any] | None = None) -> tuple[Controller, Any]:
    """Run a scenario serialized under the seeded random policy; always tear down."""
    opts = scenario.engine if engine_opts is None else engine_opts
    ctl = Controller(engine.Engine(**opts), policy="random", seed=seed)
    try:
        ctl.start(lambda: scenario.run(params))
        result = ctl.run()
    finally:
        closed = ctl.close()
    assert closed, f"{scenario.name}: engine threads did not exit"
    return ctl, result


def as_array(t: Any) -> np.ndarray:
    if isinstance(t, engine.Tensor):
        return np.asarray(t.detach().to("cpu").numpy())
    return t.detach().cpu().numpy()


@functools.cache
def torch_result(name: str, params: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    scenario = scenarios.get(name)
    assert scenario.torch_program is not None
    resolved = scenario.resolve_params(dict(params))
    return scenario.torch_program(torch, **resolved)


def assert_matches_torch(scenario: Scenario, got: dict[str, Any],
                         params: dict[str, Any] | None = None) -> None:
    if scenario.torch_program is None or torch is None:
        return
    want = torch_result(scenario.name, tuple(sorted((params or {}).items())))
    assert set(got) == set(want), f"{scenario.name}: returned names differ from PyTorch's"
    for key in want:
        a, b = as_array(got[key]), as_array(want[key])
        assert a.shape == b.shape, f"{scenario.name}: {key}: shape {a.shape} != {b.shape}"
        # atol: entries that are 0 in exact arithmetic may come out as 0 on one side and
        # ~1e-17 on the other (a different summation order in NumPy and ATen).
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12,
                                   err_msg=f"{scenario.name}: {key}")


# --- the catalogue -----------------------------------------------------------------------
def test_every_builtin_scenario_is_there_once():
    names = [s.name for s in BUILTINS]
    assert len(names) == len(set(names))
    assert set(names) == EXPECTED_NAMES
    assert names[0] == scenarios.DEFAULT


@pytest.mark.parametrize("scenario", BUILTINS, ids=_ids(BUILTINS))
def test_builtin_scenario_metadata(scenario: Scenario):
    assert scenario.source == "scenarios." + scenario.name.replace("-", "_")
    assert scenarios.get(scenario.name).source == scenario.source
    assert scenario.title and scenario.summary and "\n" not in scenario.summary
    notes = scenario.notes
    for part in ("**What to watch", "**Ask a student:**", "**Source:**"):
        assert part in notes, f"{scenario.name}: NOTES lack {part!r}"
    assert "engine.cpp" in notes or "engine.h" in notes
    assert scenario.threads and scenario.threads[0] == "cpu (owner)"
    for name, param in scenario.params.items():
        assert param.help, f"{scenario.name}: parameter {name!r} has no help"
        assert param.type in (int, float, bool, str)
    assert scenario.resolve_params() == {k: p.default for k, p in scenario.params.items()}
    with engine.Engine(**scenario.engine):
        pass  # the ENGINE options are valid
    if scenario.expect == "deadlock":
        assert scenario.name in FIXES
        assert "fix" in notes.lower()


# --- running them ------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("scenario", COMPLETE, ids=_ids(COMPLETE))
def test_complete_scenario_finishes_with_pytorchs_gradients(scenario: Scenario, seed: int):
    ctl, r = run_controlled(scenario, seed)
    assert r.status == "finished", (r.status, r.report)
    assert ctl.program_error is None, repr(ctl.program_error)
    assert not any(e.kind == "deadlock" for e in ctl.events)
    got = ctl.program_result
    assert isinstance(got, dict) and got
    assert all(isinstance(t, engine.Tensor) for t in got.values()), got
    # THREADS lists exactly the engine threads the scenario involves.
    assert set(ctl.thread_states()) == set(scenario.threads)
    assert not engine.is_anomaly_enabled()
    assert_matches_torch(scenario, got)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("scenario", DEADLOCK, ids=_ids(DEADLOCK))
def test_deadlock_scenario_deadlocks(scenario: Scenario, seed: int):
    ctl, r = run_controlled(scenario, seed)
    assert r.status == "deadlock", r.status
    rep = r.report
    assert rep.real and rep.kind in ("cycle", "lost-wakeup")
    assert rep.explanation.startswith("Deadlock: ")
    assert rep.cycle and rep.cycle[0] == "thread cpu (owner)"
    if rep.kind == "cycle":
        for u, v in zip(rep.cycle, rep.cycle[1:] + rep.cycle[:1]):
            assert rep.graph.has_edge(u, v), (u, v)
    assert ctl.events[-1].kind == "deadlock"
    assert ctl.events[-1].data["cycle"] == rep.cycle
    assert ctl.program_result is None  # close() aborted the blocked program thread
    assert set(ctl.thread_states()) == set(scenario.threads)
    for node in rep.cycle:
        if node.startswith("thread "):
            assert node[len("thread "):] in scenario.threads


@pytest.mark.parametrize("scenario", DEADLOCK, ids=_ids(DEADLOCK))
def test_deadlock_scenario_completes_with_its_fix(scenario: Scenario):
    engine_fix, params = FIXES[scenario.name]
    ctl, r = run_controlled(scenario, 0, {**scenario.engine, **engine_fix}, params)
    assert r.status == "finished", (r.status, r.report)
    assert ctl.program_error is None, repr(ctl.program_error)
    assert_matches_torch(scenario, ctl.program_result, params)


def test_deadlock_wait_on_device_has_no_pytorch_run_without_its_fix():
    scenario = scenarios.get("deadlock-wait-on-device")
    with pytest.raises(ScenarioError, match="fixed=true"):
        scenario.torch_program(torch, fixed=False)


@pytest.mark.parametrize("name, given, message", [
    ("chain", {"n": "0"}, "'n' must be at least 1"),
    ("anomaly-nan", {"op": "sqrt"}, "'op' must be one of pow, log, div"),
])
def test_builtin_program_rejects_a_bad_value(name: str, given: dict[str, str], message: str):
    scenario = scenarios.get(name)
    with pytest.raises(ScenarioError, match=message):
        scenario.run(given)


# --- scenario files a person writes ------------------------------------------------------
GOOD = """\
from autograd_tui.scenarios import Param
from autograd_tui import engine

NAME = "my-square"
TITLE = "x squared, n times"
SUMMARY = "a user scenario"
PARAMS = {"n": Param(3, "how many times x * x is added")}
EXPECT = "complete"
NOTES = "# Mine"


def program(n):
    x = engine.tensor([1.0, -2.0], requires_grad=True)
    total = x * x
    for _ in range(n - 1):
        total = total + x * x
    total.sum().backward()
    return {"x": x.grad}
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _one_line_naming(err: pytest.ExceptionInfo[ScenarioError], path: Path) -> str:
    msg = str(err.value)
    assert "\n" not in msg and "Traceback" not in msg, msg
    assert str(path) in msg, msg
    return msg


def test_user_scenario_file_loads_and_runs(tmp_path: Path):
    path = _write(tmp_path, "mine.py", GOOD)
    scenario = scenarios.load(str(path))
    assert scenario.name == "my-square" and scenario.source == str(path)
    assert scenario.resolve_params({"n": "4"}) == {"n": 4}
    assert scenario.engine == {} and scenario.threads == ("cpu (owner)",)
    ctl, r = run_controlled(scenario, 0, params={"n": "4"})
    assert r.status == "finished" and ctl.program_error is None
    np.testing.assert_allclose(as_array(ctl.program_result["x"]), [8.0, -16.0])


def test_user_scenario_with_a_syntax_error(tmp_path: Path):
    path = _write(tmp_path, "broken.py", "NAME = 'x'\ndef program(:\n    pass\n")
    with pytest.raises(ScenarioError) as err:
        scenarios.load_path(path)
    msg = _one_line_naming(err, path)
    assert f"{path}:2: syntax error" in msg


def test_user_scenario_without_a_program(tmp_path: Path):
    path = _write(tmp_path, "noprog.py", "NAME = 'nothing'\nTITLE = 'no program here'\n")
    with pytest.raises(ScenarioError) as err:
        scenarios.load_path(path)
    assert "defines no program" in _one_line_naming(err, path)


def test_user_scenario_whose_import_raises(tmp_path: Path):
    path = _write(tmp_path, "badimport.py", "import no_such_module_here\nNAME = 'x'\n")
    with pytest.raises(ScenarioError) as err:
        scenarios.load_path(path)
    msg = _one_line_naming(err, path)
    assert "importing it raised ModuleNotFoundError" in msg and "no_such_module_here" in msg


def test_user_scenario_whose_program_raises(tmp_path: Path):
    path = _write(tmp_path, "raises.py", GOOD.replace(
        "    total.sum().backward()\n",
        "    total.sum().backward()\n    raise ValueError(f'my program gave up after {n}')\n"))
    scenario = scenarios.load_path(path)  # loading is fine: the error comes when it runs
    ctl, r = run_controlled(scenario, 0)
    assert r.status == "finished"  # the program ended (by raising), nothing hangs
    err = ctl.program_error
    assert isinstance(err, ValueError) and str(err) == "my program gave up after 3"
    # The error points into the person's file.
    frames = traceback.extract_tb(err.__traceback__)
    assert any(f.filename == str(path) for f in frames)


def test_user_scenario_parameter_of_the_wrong_type(tmp_path: Path):
    path = _write(tmp_path, "mine.py", GOOD)
    scenario = scenarios.load_path(path)
    with pytest.raises(ScenarioError) as err:
        scenario.resolve_params({"n": "abc"})
    assert "parameter 'n' must be int, not 'abc'" in _one_line_naming(err, path)


def test_user_scenario_unknown_parameter(tmp_path: Path):
    path = _write(tmp_path, "mine.py", GOOD)
    scenario = scenarios.load_path(path)
    with pytest.raises(ScenarioError) as err:
        scenario.resolve_params({"m": "2"})
    assert "unknown parameter 'm' (parameters: n)" in _one_line_naming(err, path)
