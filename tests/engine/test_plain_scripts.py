"""A user's training script as it is (no ``main()`` returning the loss): run as
``python SCRIPT ARGS`` up to its Nth backward call, which is the one stepped
(``engine/torch_bridge/script_run.py``, ``session/plain_script.py``).  Each script is
plain PyTorch, small, seeded; the CLI runs in this process (``user_scripts.run_cli``)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path
from typing import Any

import pytest
from user_scripts import run_cli, write_script

torch = pytest.importorskip("torch", reason="the torch bridge needs PyTorch")

from autograd_tui.session.plain_script import is_plain  # noqa: E402
from autograd_tui.session.run import Run  # noqa: E402
from autograd_tui.session.torch_script import script_scenario  # noqa: E402

pytestmark = pytest.mark.timeout(120)

# a top-level loop: saves each step's gradients when run by plain python (SAVE set)
LOOP = """\
    import os
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    try:
        for step in range(3):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            if os.environ.get("SAVE"):
                torch.save([p.grad for p in model.parameters()], f"{os.environ['SAVE']}{step}")
            opt.step()
        open(__file__ + ".end", "w").close()
    finally:
        open(__file__ + ".finally", "w").close()
"""


def test_a_top_level_loop_is_stopped_at_its_first_backward(tmp_path: Path, capsys) -> None:
    p = write_script(tmp_path, LOOP)
    code, out = run_cli(["torch", str(p), "--headless", "--quiet"], capsys)
    assert code == 0, out
    assert f"note: stepped the script's 1st backward call ({p}:13); the script was stopped " \
           "there, the rest of it did not run" in out
    assert "completed" in out and "grad 0.weight: shape [4, 3]" in out
    assert not Path(f"{p}.end").exists()  # the rest did not run
    assert Path(f"{p}.finally").exists()  # its finally block did


def test_the_nth_call_has_pytorchs_gradients_at_that_call(tmp_path: Path, monkeypatch) -> None:
    p = write_script(tmp_path, LOOP)
    monkeypatch.setenv("SAVE", str(tmp_path / "grads"))
    monkeypatch.setattr(sys, "argv", [str(p)])
    runpy.run_path(str(p), run_name="__main__")  # plain PyTorch: each step's .grad saved
    want = torch.load(tmp_path / "grads1")
    monkeypatch.delenv("SAVE")
    with Run(script_scenario(str(p), backward=2)) as run:
        run.run()
        assert run.error is None and run.finished
        got = run.gradients()
        assert "stepped the script's 2nd backward call" in run.scenario.banner
        assert "the one before it ran on PyTorch's engine" in run.scenario.banner
    names = ["0.weight", "0.bias", "2.weight", "2.bias"]
    for name, w in zip(names, want):
        assert torch.equal(torch.from_numpy(got[name]), w), name  # bitwise


def test_main_under_if_name_is_run_as_the_script(tmp_path: Path, capsys) -> None:
    p = write_script(tmp_path, """\
        import torch

        def train(w):
            for _ in range(2):
                (w * w).sum().backward()

        def main():
            w = torch.ones(3, requires_grad=True)
            train(w)
            print("trained")
            return None

        if __name__ == "__main__":
            main()
        """)
    assert is_plain(str(p), None, None)
    code, out = run_cli(["torch", str(p), "--headless", "--quiet", "--backward", "2"], capsys)
    assert code == 0, out
    assert f"2nd backward call ({p}:5)" in out and "trained" not in out
    assert "grad w: shape [3], norm 6.9282" in out  # 2w added to the 1st call's 2w: 4 each


def test_which_scripts_run_as_they_are(tmp_path: Path) -> None:
    def plain(body: str, entry: str | None = None, backward: int | None = None) -> bool:
        return is_plain(str(write_script(tmp_path, body, "s.py")), entry, backward)

    assert not plain("def main():\n    return loss\n")
    assert plain("def main():\n    train()\n    return 0\n\nsys.exit(main())\n")
    assert plain("def main():\n    def f():\n        return x\n    f()\n\n"
                 "if __name__ == '__main__':\n    main()\n")  # f's return is not main's
    assert not plain("def main():\n    train()\n")  # never called: the entry, as before
    assert plain("for i in range(3):\n    pass\n")
    assert not plain("from lib import main\n")
    assert not plain("if True:\n    def main():\n        return net(x).sum()\n")
    assert not plain("for i in range(3):\n    pass\n", entry="build")
    assert plain("def main():\n    return loss\n", backward=2)
    assert not plain("def main(:\n")  # importing it says where the syntax error is


def test_script_arguments_after_dashes_reach_argparse(tmp_path: Path, capsys) -> None:
    p = write_script(tmp_path, """\
        import argparse
        import torch
        parser = argparse.ArgumentParser()
        parser.add_argument("--steps", type=int, default=5)
        args = parser.parse_args()
        w = torch.ones(2, requires_grad=True)
        for _ in range(args.steps):
            (w * 3).sum().backward()
        """)
    code, out = run_cli(["torch", str(p), "--headless", "--quiet", "--backward", "3",
                         "--", "--steps", "2"], capsys)
    assert code == 1
    assert f"{p} ran to its end after 2 backward calls; --backward 3 asks for a 3rd" in out
    assert "Traceback" not in out
    code, out = run_cli(["torch", str(p), "--headless", "--quiet", "--backward", "3",
                         "--", "--steps", "3"], capsys)
    assert code == 0 and "3rd backward call" in out, out
    assert sys.argv[1:] != ["--steps", "3"]  # put back


def test_except_exception_in_the_script_does_not_swallow_the_stop(tmp_path: Path,
                                                                  capsys) -> None:
    p = write_script(tmp_path, """\
        import torch
        w = torch.ones(2, requires_grad=True)
        for _ in range(3):
            try:
                (w * 2).sum().backward(create_graph=True)
            except Exception:
                print("swallowed")
        """)
    code, out = run_cli(["torch", str(p), "--headless", "--quiet"], capsys)
    assert code == 0, out
    assert "swallowed" not in out and "1st backward call" in out
    assert "create_graph=True: the stepped backward does not build" in out


def test_no_backward_call_and_an_exit_before_the_nth(tmp_path: Path, capsys) -> None:
    none = write_script(tmp_path, """\
        import torch
        w = torch.ones(2, requires_grad=True)
        torch.autograd.grad((w * 2).sum(), w)
        """, "none.py")
    code, out = run_cli(["torch", str(none), "--headless", "--quiet"], capsys)
    assert code == 1
    assert f"{none} ran to its end and called no backward (loss.backward(), " \
           "torch.autograd.backward): nothing to step; its 1 torch.autograd.grad call ran " \
           "on PyTorch's engine" in out
    exits = write_script(tmp_path, """\
        import sys
        import torch
        w = torch.ones(2, requires_grad=True)
        (w * 2).sum().backward()
        sys.exit(3)
        """, "exits.py")
    code, out = run_cli(["torch", str(exits), "--headless", "--quiet", "--backward", "2"],
                        capsys)
    assert code == 1 and "Traceback" not in out
    assert f"{exits} called sys.exit(3) after 1 backward call, before its 2nd " \
           "(--backward 2)" in out
    code, out = run_cli(["check-order", str(exits), "--backward", "2"], capsys)
    assert code == 1 and "called sys.exit(3) after 1 backward call" in out


def test_an_error_in_the_script_is_at_its_line(tmp_path: Path, capsys) -> None:
    p = write_script(tmp_path, """\
        import torch
        w = torch.ones(3, requires_grad=True)
        for i in range(3):
            loss = (w * 2).sum()
            if i == 1:
                loss = loss + torch.ones(2) @ w
            loss.backward()
        """)
    for cmd in (["torch", str(p), "--headless", "--quiet", "--backward", "3"],
                ["check-order", str(p), "--backward", "3"]):
        code, out = run_cli(cmd, capsys)
        assert code == 1 and "Traceback" not in out
        assert f"{p}:6: RuntimeError: inconsistent tensor size" in out
    assert "loss = loss + torch.ones(2) @ w" in run_cli(  # the torch command shows the line
        ["torch", str(p), "--headless", "--backward", "3"], capsys)[1]


def test_check_order_on_a_plain_script_agrees_bitwise(tmp_path: Path, capsys) -> None:
    p = write_script(tmp_path, LOOP)
    code, out = run_cli(["check-order", str(p), "--exact", "--backward", "2"], capsys)
    assert code == 0, out
    assert "note: stepped the script's 2nd backward call" in out
    assert "node order: agrees" in out and "gradients: 4 leaves agree (bitwise)" in out


def test_a_wrapper_and_a_grad_scaler_reach_the_counted_backward(tmp_path: Path,
                                                                capsys) -> None:
    p = write_script(tmp_path, """\
        import torch

        class Accelerator:  # accelerate's backward: loss.backward(**kwargs)
            def backward(self, loss, **kwargs):
                loss.backward(**kwargs)

        torch.manual_seed(0)
        lin = torch.nn.Linear(3, 1)
        scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
        x = torch.randn(2, 3)
        Accelerator().backward(lin(x).sum())
        scaler.scale(lin(x).sum()).backward()
        """)
    code, out = run_cli(["torch", str(p), "--headless", "--quiet"], capsys)
    assert code == 0 and "1st backward call" in out, out
    code, out = run_cli(["torch", str(p), "--headless", "--quiet", "--backward", "2"], capsys)
    assert code == 0 and f"2nd backward call ({p}:12)" in out, out
    assert "grad bias: shape [1], norm 10" in out  # 2 from the 1st, 4 * 2 from the scaled


def test_main_that_trains_before_returning_the_loss_is_noted(tmp_path: Path, capsys) -> None:
    p = write_script(tmp_path, """\
        import torch

        def main():
            w = torch.ones(3, requires_grad=True)
            for i in range(3):
                (w * i).sum().backward()
            return (w * w).sum()
        """)
    code, out = run_cli(["torch", str(p), "--headless", "--quiet"], capsys)
    assert code == 0, out
    assert f"note: main() ran 3 backward passes of its own on PyTorch's engine ({p}:6) " \
           "before the one stepped" in out


def test_entry_naming_no_function_and_entry_with_backward(tmp_path: Path, capsys) -> None:
    p = write_script(tmp_path, LOOP)
    code, out = run_cli(["torch", str(p), "--headless", "--entry", "build"], capsys)
    assert code == 2 and f"{p}: defines no function 'build'" in out
    code, out = run_cli(["check-order", str(p), "--entry", "build", "--backward", "1"], capsys)
    assert code == 2 and "give one of them" in out
    code, out = run_cli(["torch", str(p), "--headless", "--backward", "0"], capsys)
    assert code == 2 and "from 1, not 0" in out


def test_the_app_steps_a_plain_scripts_backward(tmp_path: Path) -> None:
    from app.pilot import run_app, settle  # tests/app/pilot.py

    from autograd_tui.app import AutogradApp

    p = write_script(tmp_path, LOOP)
    app = AutogradApp(script_scenario(str(p)))
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("n")  # the script runs to its 1st backward on the first step
        await settle(pilot)
        await pilot.press("c")  # on to the end
        await settle(pilot)
        app.debugger.update_title()
        seen["title"] = str(app.debugger.sub_title)
        seen["status"] = app.debugger.session.status

    run_app(app, script)
    assert "stepped the script's 1st backward call" in seen["title"]
    assert seen["status"] == "completed", seen
    assert not Path(f"{p}.end").exists() and Path(f"{p}.finally").exists()


def test_a_compiled_model_is_said_only_when_the_script_compiles(tmp_path: Path,
                                                                capsys) -> None:
    body = """\
        import sys
        import torch
        net = torch.nn.Linear(3, 2)
        if sys.argv[1:] == ["--compile"]:
            net = torch.compile(net)
        net(torch.ones(4, 3)).sum().backward()
        """
    p = write_script(tmp_path, body)
    code, out = run_cli(["torch", str(p), "--headless", "--quiet"], capsys)
    assert code == 0 and "torch.compile'd" not in out, out
    code, out = run_cli(["torch", str(p), "--headless", "--quiet", "--", "--compile"], capsys)
    assert code == 0, out
    assert "stepped the eager graph of a torch.compile'd model: Linear (nn.Module)" in out


def test_ranks_pass_the_backward_and_the_script_args_on(tmp_path: Path) -> None:
    from autograd_tui.session.ranks import rank_command

    cmd = rank_command("train.py", tmp_path, None, ["--backward", "2", "--", "--steps", "3"])
    assert "--entry" not in cmd  # a plain script: no main() named for it
    assert cmd[-5:] == ["--backward", "2", "--", "--steps", "3"]
    assert rank_command("m.py", tmp_path, "build")[3:5] == ["--entry", "build"]
