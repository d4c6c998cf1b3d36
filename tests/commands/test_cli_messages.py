"""The messages a new user reads, each in words: a lesson named by its name (never a module
path), the bridge's errors without a class path, ``[torch]`` shown (not eaten as Rich
markup), plurals right, ``show`` plain in a pipe, a progress line while torch imports, the
frames page's buttons in common characters, and ``show --nodes`` for writing ``FORWARD``."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest

from autograd_tui import scenarios
from autograd_tui.commands import main
from autograd_tui.commands.explore import coverage
from autograd_tui.control.explore import Report

pytestmark = pytest.mark.timeout(120)


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_refused_parameter_names_the_lesson_not_a_module(capsys) -> None:
    assert main(["run", "chain", "--param", "n=-5", "--headless", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err == "autograd-tui: chain: parameter 'n' must be at least 1, not -5\n"
    assert main(["run", "chain", "--param", "nope=1", "--headless"]) == 2
    assert capsys.readouterr().err.startswith("autograd-tui: chain: unknown parameter 'nope'")


def test_a_scenario_file_is_named_by_its_path(tmp_path: Path, capsys) -> None:
    f = tmp_path / "lesson.py"
    f.write_text("from autograd_tui.scenarios import Param\nNAME = 'lesson'\n"
                 "PARAMS = {'n': Param(1)}\n\ndef program(n):\n    pass\n")
    assert main(["run", str(f), "--param", "n=x", "--headless"]) == 2
    assert capsys.readouterr().err.startswith(f"autograd-tui: {f}: parameter 'n' must be")


def test_no_builtin_scenario_message_names_its_module() -> None:
    for path in Path(scenarios.__file__).parent.glob("*.py"):
        assert 'f"{__name__}: ' not in path.read_text(), path


def test_a_loss_that_needs_no_grad_is_one_plain_message(tmp_path: Path, capsys) -> None:
    script = tmp_path / "nograd.py"
    script.write_text("import torch\n\ndef main():\n    return (torch.ones(3) * 2).sum()\n")
    assert main(["torch", str(script), "--headless", "--quiet"]) == 1
    out, err = capsys.readouterr()
    assert "TorchBridgeError" not in out + err and "autograd_tui." not in out + err
    # it failed before its backward pass: said once, on stderr, with no run summary
    assert "autograd-tui: error in the script from_torch: output 0 does not require grad" in err
    assert out == "", out


def test_our_own_errors_are_located_without_a_module_path() -> None:
    from autograd_tui.engine.torch_bridge import TorchBridgeError
    from autograd_tui.session.program_errors import locate

    try:
        raise TorchBridgeError("nothing to differentiate")
    except TorchBridgeError as e:
        located = locate(e)
    assert located.error == "TorchBridgeError: nothing to differentiate"


def test_list_without_torch_shows_the_extra_in_brackets(monkeypatch, capsys) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "skipped torch-mlp: needs torch: pip install 'autograd-tui[torch]'" in out


def test_explore_plurals() -> None:
    one = Report("race-lock-order", "dfs", explored=1, runs=1, bound=1, complete=True)
    assert "explored 1 schedule (0 pruned by the reduction, 1 run)" in coverage(one)
    assert "every schedule up to 1 preemption covered" in coverage(one)
    two = Report("race-lock-order", "dfs", explored=2, runs=3, bound=2, complete=True)
    assert "explored 2 schedules (0 pruned by the reduction, 3 runs)" in coverage(two)
    assert "up to 2 preemptions covered" in coverage(two)
    zero = Report("race-lock-order", "dfs", explored=0, runs=0, bound=0, complete=True)
    assert "(0 pruned by the reduction, 0 runs)" in coverage(zero)
    assert "up to 0 preemptions covered" in coverage(zero)


def test_show_in_a_pipe_is_plain_text(capsys) -> None:
    assert main(["show", "chain"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "chain: A long chain: one ready task at a time"
    assert lines[1].startswith("parameters: n=30 (") and lines[1].endswith("multiplies by)")
    assert [ln for ln in lines if ln != ln.rstrip()] == []  # no trailing spaces
    assert "# A long chain: one ready task at a time" in lines  # the Markdown itself
    assert "\x1b" not in out


def test_show_on_a_terminal_renders_the_markdown(monkeypatch) -> None:
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert main(["show", "chain"]) == 0
    assert "# A long chain" not in terminal.getvalue()  # rendered: no '#'
    assert "A long chain: one ready task at a time" in terminal.getvalue()


def test_torch_says_what_it_does_while_torch_imports(tmp_path: Path, monkeypatch,
                                                     capsys) -> None:
    script = tmp_path / "tiny.py"
    script.write_text("import torch\n\ndef main():\n"
                      "    w = torch.ones(2, requires_grad=True)\n    return (w * 3).sum()\n")
    assert main(["torch", str(script), "--headless", "--quiet"]) == 0
    assert capsys.readouterr().err == ""  # in a pipe: nothing extra
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["torch", str(script), "--headless", "--quiet"]) == 0
    assert "importing torch" in terminal.getvalue()


def test_frames_page_buttons_are_common_characters(tmp_path: Path, capsys) -> None:
    out = tmp_path / "frames"
    assert main(["export", "chain", "--param", "n=1", "--every", "1", "-o", str(out)]) == 0
    html = (out / "index.html").read_text()
    buttons = dict(re.findall(r'<button id="(\w+)"[^>]*>([^<]*)</button>', html))
    assert set(buttons) == {"first", "prev", "next", "last"}
    assert buttons["first"] == "|&lt;" and buttons["last"] == "&gt;|"
    for label in buttons.values():  # ASCII or the Geometric Shapes every font has
        assert label and all(c.isascii() or c in "◀▶" for c in label), label


def test_show_nodes_is_a_table_for_forward(capsys) -> None:
    assert main(["show", "linear-relu", "--nodes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["sequence_nr", "node", "forward", "op", "(FORWARD)"]
    rows = [ln.split(None, 2) for ln in lines[1:-1]]
    assert rows[0] == ["0", "LinearBackward0", "Linear1, input, linear1.weight, linear1.bias"]
    assert rows[1] == ["1", "ReluBackward0", "ReLU"]
    assert ["3", "AddBackward0", "-"] in rows
    assert [ln for ln in lines if ln != ln.rstrip()] == []
    # 11 nodes (linear-relu's 5 AccumulateGrads in one row, sequence_nr max)
    assert rows[-1] == ["max", "AccumulateGrad", "-"]
    assert lines[-1].startswith(f"11 nodes in {len(rows)} rows (AccumulateGrads share one)")


def test_show_nodes_takes_params_and_scenario_files(tmp_path: Path, capsys) -> None:
    assert main(["show", "chain", "--nodes", "--param", "n=2"]) == 0
    rows = [ln.split() for ln in capsys.readouterr().out.splitlines()[1:-1]]
    assert [r[:2] for r in rows[:4]] == [["0", "MulBackward0"], ["1", "TanhBackward0"],
                                         ["2", "MulBackward0"], ["3", "TanhBackward0"]]
    assert main(["show", "chain", "--nodes", "--param", "n=0"]) == 2
    assert "chain: parameter 'n' must be at least 1" in capsys.readouterr().err
