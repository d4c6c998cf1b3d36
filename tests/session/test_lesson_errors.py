"""A teacher's own lesson file going wrong: each mistake is one clear message that names
the file and the line, never silent, never a traceback (in-process ``main``: the exit code,
stdout and stderr as a shell would see them)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from autograd_tui.commands import main

pytestmark = pytest.mark.timeout(120)


def lesson(tmp_path: Path, body: str, name: str = "lesson.py") -> Path:
    f = tmp_path / name
    f.write_text("from autograd_tui import engine as torch\n\n" + textwrap.dedent(body))
    return f


def line_of(f: Path, text: str) -> int:
    """The number of the file's line that holds ``text``."""
    return next(i for i, line in enumerate(f.read_text().splitlines(), 1) if text in line)


def run(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["run", str(path), "--headless", "--quiet", *extra])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_an_error_in_the_program_names_its_file_line_and_source(tmp_path, capsys) -> None:
    f = lesson(tmp_path, """
        NAME = "typo"

        def program():
            x = torch.tensor([1.0, 2.0], requires_grad=True)
            y = x.tahn()
            y.sum().backward()
        """)
    code, out, err = run(f, capsys)
    assert code == 1  # docs/cli.md: an error in the scenario's program
    first, second = err.splitlines()[:2]
    n = line_of(f, "x.tahn()")
    assert first.endswith(f"{f.name}:{n}: AttributeError: 'Tensor' object has no attribute "
                          "'tahn'; did you mean 'tanh'?")
    assert second.strip() == "y = x.tahn()"
    assert f"{f.name}:{n})" in out  # the summary names the line too


def test_an_error_raised_inside_the_engine_points_at_the_user_s_line(tmp_path, capsys) -> None:
    f = lesson(tmp_path, """
        NAME = "shapes"

        def helper(a, b):
            return a @ b

        def program():
            a = torch.tensor([[1.0, 2.0]], requires_grad=True)
            b = torch.tensor([[1.0, 2.0]], requires_grad=True)
            helper(a, b).sum().backward()
        """)
    code, _, err = run(f, capsys)
    assert code == 1
    first, second = err.splitlines()[:2]
    # helper's line: the deepest frame in the file, not the engine's
    assert f"{f.name}:{line_of(f, 'return a @ b')}: RuntimeError" in first
    assert second.strip() == "return a @ b"
    assert "engine" not in first.split(":")[0]  # not the tool's frame


def test_a_name_error_gets_a_did_you_mean(tmp_path, capsys) -> None:
    f = lesson(tmp_path, """
        NAME = "names"

        def program():
            weight = torch.tensor([1.0], requires_grad=True)
            (wieght * 2).sum().backward()
        """)
    code, _, err = run(f, capsys)
    assert code == 1 and "NameError" in err and "did you mean 'weight'?" in err


@pytest.mark.parametrize("wrong,right", [("PARAM", "PARAMS"), ("SUMARY", "SUMMARY"),
                                         ("EXPCET", "EXPECT"), ("TILTE", "TITLE"),
                                         ("REQUIRE", "REQUIRES"), ("NOTE", "NOTES")])
def test_a_misspelled_constant_is_an_error_with_a_hint(tmp_path, capsys, wrong, right) -> None:
    f = lesson(tmp_path, f"""
        NAME = "spelled"
        {wrong} = {{}}

        def program():
            x = torch.tensor([1.0], requires_grad=True)
            (x * 2).sum().backward()
        """)
    code, out, err = run(f, capsys)
    assert code == 1 and out == ""
    assert f"{wrong} is not a name a scenario defines" in err
    assert f"did you mean {right}?" in err and f.name in err


def test_other_upper_case_names_are_the_author_s_own(tmp_path, capsys) -> None:
    f = lesson(tmp_path, """
        NAME = "own"
        SIZE = 3
        HEADS = 2  # two slips from THREADS: the author's own
        LEARNING_RATE = 0.1

        def program():
            x = torch.tensor([1.0] * SIZE, requires_grad=True)
            (x * LEARNING_RATE).sum().backward()
        """)
    code, out, _ = run(f, capsys)
    assert code == 0 and "completed" in out


def test_a_misnamed_program_gets_a_hint(tmp_path, capsys) -> None:
    f = lesson(tmp_path, """
        NAME = "prog"

        def programm():
            pass
        """)
    code, _, err = run(f, capsys)
    assert code == 1 and "defines no program" in err and "programm" in err


def test_a_program_whose_parameters_are_not_params(tmp_path, capsys) -> None:
    f = lesson(tmp_path, """
        NAME = "params"

        def program(params):
            pass
        """)
    code, _, err = run(f, capsys)
    assert code == 1
    assert "one keyword argument per PARAMS entry (none)" in err and "params" in err


def test_expect_deadlock_on_a_run_that_completes_is_reported(tmp_path, capsys) -> None:
    f = lesson(tmp_path, """
        NAME = "expects"
        EXPECT = "deadlock"

        def program():
            x = torch.tensor([1.0], requires_grad=True)
            (x * 2).sum().backward()
        """)
    code, out, err = run(f, capsys)
    assert code == 1
    assert "EXPECT = 'deadlock', but the run completed" in err
    assert "completed" in out and "not what the scenario says" in out


def test_a_program_that_never_calls_backward_is_reported(tmp_path, capsys) -> None:
    f = lesson(tmp_path, """
        NAME = "forward-only"

        def program():
            x = torch.tensor([1.0], requires_grad=True)
            y = (x * 2).sum()
        """)
    code, _, err = run(f, capsys)
    assert code == 1 and "never started a backward pass" in err


def test_an_error_while_importing_names_the_line(tmp_path, capsys) -> None:
    f = lesson(tmp_path, """
        import math
        NAME = "imports"
        SCALE = math.sqr(2)

        def program():
            pass
        """)
    code, _, err = run(f, capsys)
    assert code == 1
    n = line_of(f, "math.sqr")
    assert f"{f.name}:{n}: importing it raised AttributeError" in err
    assert "did you mean 'sqrt'?" in err and "SCALE = math.sqr(2)" in err


def test_non_finite_gradients_print_as_such(tmp_path, capsys) -> None:
    f = lesson(tmp_path, """
        NAME = "non-finite"

        def program():
            x = torch.tensor([0.0, 1.0, -1.0], requires_grad=True)
            w = torch.tensor([1.0, 1.0, 1.0], requires_grad=True)
            ((x * w) / torch.tensor([0.0, 0.0, 0.0])).sum().backward()
            return {"x.grad": x.grad, "w.grad": w.grad}
        """)
    code, out, _ = run(f, capsys)
    assert code == 0
    grads = {line.split(" = ")[0]: line.split(" = ")[1] for line in out.splitlines()
             if line.startswith("grad ")}
    assert grads["grad x.grad"] == "[inf, inf, inf]"
    assert grads["grad w.grad"] == "[ nan,  inf, -inf]" or \
        grads["grad w.grad"].replace(" ", "") == "[nan,inf,-inf]"


def test_an_error_in_a_pytorch_script_names_its_line(tmp_path, capsys) -> None:
    pytest.importorskip("torch", reason="PyTorch is not installed (CI installs it)")
    f = tmp_path / "model.py"
    f.write_text("import torch\n\ndef main():\n    x = torch.ones(2, requires_grad=True)\n"
                 "    return x.sigmiod().sum()\n")
    code = main(["torch", str(f), "--headless", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in out + err
    first, second = err.splitlines()[:2]
    assert first.endswith("model.py:5: AttributeError: 'Tensor' object has no attribute "
                          "'sigmiod'; did you mean 'sigmoid'?")
    assert second.strip() == "return x.sigmiod().sum()"


def test_every_command_that_runs_a_scenario_takes_the_scenario_options() -> None:
    """run, export, chrome-trace, serve and explore take --param, --engine, --seed and
    (but explore, which tries every schedule) --policy, the same way."""
    from autograd_tui.commands.parser import build_parser

    parser = build_parser()
    subs = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name in ("run", "export", "chrome-trace", "serve", "explore"):
        options = {o for a in subs.choices[name]._actions for o in a.option_strings}
        wanted = {"--param", "--engine", "--seed"} | ({"--policy"} if name != "explore" else set())
        assert wanted <= options, (name, wanted - options)


def test_inplace_version_prints_pytorch_s_message_and_the_versions(capsys) -> None:
    code = main(["run", "inplace-version", "--headless"])
    out = capsys.readouterr().out
    assert code == 0  # the lesson catches the error, as error-in-node does
    assert ("error RuntimeError: one of the variables needed for gradient computation has "
            "been modified by an inplace operation: [torch.DoubleTensor [3]], which is output "
            "0 of Exp, is at version 1; expected version 0 instead.") in out
    assert "meta ExpBackward0#3 saved result: Tensor[3] float64, saved at version 0, now " \
        "version 1: modified in place" in out


def test_the_step_by_step_lesson_in_the_docs_runs(tmp_path, capsys) -> None:
    import re

    docs = (Path(__file__).resolve().parents[2] / "docs" / "scenarios.md").read_text()
    step = docs[docs.index("### Step by step"):]
    code = textwrap.dedent(re.search(r"```python\n(.*?)```", step, re.S).group(1))
    f = tmp_path / "shared-weight.py"
    f.write_text(code)
    assert main(["run", str(f), "--headless", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "completed" in out and "grad weight = " in out
