"""The real console script, in a subprocess: output and exit codes of every command (each
command's --help through the same main in this process: the top level's runs the script)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograd_tui import scenarios
from autograd_tui.commands import main

pytestmark = pytest.mark.timeout(300)

EXE = str(Path(sys.executable).parent / "autograd-tui")
ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120"}


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=240, env=ENV,
                          cwd=cwd)


def test_help_on_every_command_has_examples(capsys):
    p = cli("--help")  # the real script once; each command's help through the same main
    assert p.returncode == 0, p.stderr
    assert "usage: autograd-tui" in p.stdout
    assert "examples:" in p.stdout
    for cmd in (["list"], ["show"], ["run"], ["replay"], ["chrome-trace"], ["export"],
                ["serve"]):
        with pytest.raises(SystemExit) as done:
            main([*cmd, "--help"])
        out = capsys.readouterr()
        assert done.value.code == 0, out.err
        assert "usage: autograd-tui" in out.out
        assert "examples:" in out.out


def test_list_and_list_names():
    p = cli("list", "--names")
    assert p.returncode == 0
    assert p.stdout.split() == scenarios.names()
    assert p.stdout.splitlines()[0] == "linear-relu"
    p = cli("list")
    assert p.returncode == 0
    for name in scenarios.names():
        assert name in p.stdout
    assert "deadlocks" in p.stdout


def test_show_renders_the_notes():
    p = cli("show", "linear-relu")
    assert p.returncode == 0
    assert "not_ready" in p.stdout and "evaluate_function" in p.stdout


def test_unknown_scenario_suggests_the_closest():
    p = cli("run", "linear-rlu", "--headless")
    assert p.returncode == 2
    assert "did you mean linear-relu" in p.stderr
    assert "Traceback" not in p.stderr


def test_run_headless_completes_with_gradients_and_schedule():
    p = cli("run", "linear-relu", "--headless")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "not_ready += LinearBackward0" in out
    assert "completed" in out
    assert "grad input = [[0.35]]" in out
    sched = [line for line in out.splitlines() if line.startswith("schedule: ")]
    assert len(sched) == 1


def test_headless_output_is_deterministic_and_schedules_replay():
    a = cli("run", "multi-device", "--policy", "random", "--seed", "4", "--headless")
    b = cli("run", "multi-device", "--policy", "random", "--seed", "4", "--headless")
    assert a.returncode == 0 and a.stdout == b.stdout
    schedule = next(line for line in a.stdout.splitlines()
                    if line.startswith("schedule: "))[len("schedule: "):]
    c = cli("run", "multi-device", "--policy", f"schedule:{schedule}", "--headless")
    assert c.returncode == 0
    # same events and gradients; only the header words about the policy may differ
    assert c.stdout == a.stdout


def test_timings_only_when_asked():
    p = cli("run", "linear-relu", "--headless", "--quiet", "--timings")
    assert "time: " in p.stdout
    assert "time: " not in cli("run", "linear-relu", "--headless", "--quiet").stdout


def test_deadlock_exit_code_and_explanation():
    names = [n for n in scenarios.names() if n.startswith("deadlock-")]
    if not names:
        pytest.skip("no deadlock scenario is installed")
    p = cli("run", names[0], "--headless", "--quiet")
    assert p.returncode == 3, p.stdout + p.stderr
    assert "deadlock detected" in p.stdout and "Deadlock: " in p.stdout
    assert "cycle: " in p.stdout


def test_engine_option_turns_a_scenario_into_a_deadlock(tmp_path):
    p = cli("run", "linear-relu", "--headless", "--engine", "reentrant=block", "--quiet")
    assert p.returncode == 0  # no reentrant backward: the option changes nothing here
    p = cli("run", "linear-relu", "--headless", "--engine", "bogus=1")
    assert p.returncode == 2 and "unknown engine option 'bogus'" in p.stderr


@pytest.mark.parametrize("args,message", [
    (["--param", "x=abc"], "parameter 'x' must be float, not 'abc'"),
    (["--param", "nope=1"], "unknown parameter 'nope'"),
    (["--param", "x"], "must look like KEY=VALUE"),
    (["--policy", "fifo"], "unknown policy 'fifo'"),
    (["--policy", "schedule:0:x"], "bad schedule"),
])
def test_bad_usage_exits_2_without_traceback(args, message):
    p = cli("run", "linear-relu", "--headless", *args)
    assert p.returncode == 2, p.stdout + p.stderr
    assert message in p.stderr
    assert "Traceback" not in p.stderr


USER_SCENARIO = '''
from autograd_tui import engine
from autograd_tui.scenarios import Param
NAME = "my-square"
SUMMARY = "x squared"
PARAMS = {"x": Param(3.0, "the input")}
def program(x):
    t = engine.tensor(x, requires_grad=True)
    (t * t).backward()
    return {"x": t.grad}
'''

BROKEN = {
    "syntax.py": ("def program(:\n", "syntax error", 1),
    "noprogram.py": ("NAME = 'x'\n", "defines no program", 1),
    "raises.py": ("NAME = 'x'\ndef program():\n    raise ValueError('boom in my program')\n",
                  "ValueError: boom in my program", 1),
}


def test_user_scenario_file_runs(tmp_path):
    f = tmp_path / "my_square.py"
    f.write_text(USER_SCENARIO)
    p = cli("run", str(f), "--headless", "--param", "x=4")
    assert p.returncode == 0, p.stderr
    assert "grad x = 8." in p.stdout
    p = cli("show", str(f))
    assert p.returncode == 0


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_user_scenarios_give_one_clear_message(name, tmp_path):
    text, message, code = BROKEN[name]
    f = tmp_path / name
    f.write_text(text)
    p = cli("run", str(f), "--headless")
    assert p.returncode == code, p.stdout + p.stderr
    assert message in p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    assert str(f) in p.stdout + p.stderr


def test_wrong_type_parameter_in_a_user_scenario(tmp_path):
    f = tmp_path / "my_square.py"
    f.write_text(USER_SCENARIO)
    p = cli("run", str(f), "--headless", "--param", "x=three")
    assert p.returncode == 2 and "parameter 'x' must be float" in p.stderr
    assert str(f) in p.stderr


def test_record_replay_reexecute_and_chrome_trace(tmp_path):
    rec = tmp_path / "run.jsonl.gz"
    p = cli("run", "multi-device", "--policy", "random", "--seed", "2", "--headless",
            "--quiet", "--record", str(rec))
    assert p.returncode == 0 and rec.exists()
    p = cli("replay", str(rec), "--headless")
    assert p.returncode == 0 and "status: completed" in p.stdout
    p = cli("replay", str(rec), "--reexecute")
    assert p.returncode == 0 and "identical to the recording" in p.stdout
    out = tmp_path / "trace.json"
    p = cli("chrome-trace", str(rec), "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text())["traceEvents"]
    p = cli("chrome-trace", "linear-relu", "-o", str(tmp_path / "t2.json"))
    assert p.returncode == 0


def test_replay_of_a_bad_file_is_one_message(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    p = cli("replay", str(bad), "--headless")
    assert p.returncode == 1
    assert p.stderr.strip() == f"autograd-tui: {bad}, line 1: not JSON (Expecting value at " \
                               "column 1)"
    p = cli("replay", str(tmp_path / "missing.jsonl"))
    assert p.returncode == 1 and "no such file" in p.stderr


def test_record_to_an_unwritable_place(tmp_path):
    p = cli("run", "linear-relu", "--headless", "--quiet", "--record",
            str(tmp_path / "no" / "dir" / "x.jsonl"))
    assert p.returncode == 1
    assert "does not exist" in p.stderr and "Traceback" not in p.stderr
