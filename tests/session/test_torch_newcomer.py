"""What a model's author sees first: every leaf's gradient by its qualified name (nested
GraphTasks included), the parameters that got none and why, the script's folder on
``sys.path``, one plain message for a script that calls ``.backward()`` itself, and the
header's word on devices only where a scenario uses cuda."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from user_scripts import write_script as _script

pytest.importorskip("torch", reason="the torch bridge needs PyTorch (pip install torch)")

from autograd_tui import scenarios  # noqa: E402
from autograd_tui.engine.torch_bridge.program import ScriptCalledBackward  # noqa: E402
from autograd_tui.session.run import Run  # noqa: E402
from autograd_tui.session.session import Session  # noqa: E402
from autograd_tui.session.torch_script import script_scenario  # noqa: E402


def _run(path: Path) -> Run:
    run = Run(script_scenario(str(path)))
    run.run()
    return run


def test_nested_graph_task_leaves_are_listed_by_qualified_name() -> None:
    with Run(scenarios.get("torch-checkpoint")) as run:
        run.run()
        assert run.error is None
        grads = run.gradients()
        footer = run.footer()
    # block.0.* get their gradients inside GraphTask 2 (the reentrant checkpoint)
    assert sorted(grads) == ["block.0.bias", "block.0.weight", "lin1.bias", "lin1.weight",
                             "lin2.bias", "lin2.weight"]
    assert grads["block.0.weight"].shape == (6, 6)
    assert sorted(footer["gradients"]) == sorted(grads)
    assert "no_gradient" not in footer


def test_one_model_is_named_by_its_named_parameters(tmp_path: Path) -> None:
    p = _script(tmp_path, """
        import torch
        from torch import nn

        def main():
            torch.manual_seed(0)
            net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
            return net(torch.randn(2, 3)).sum()
        """)
    with _run(p) as run:
        assert sorted(run.gradients()) == ["0.bias", "0.weight", "2.bias", "2.weight"]


def test_parameters_without_a_gradient_are_listed_with_why(tmp_path: Path) -> None:
    p = _script(tmp_path, """
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.used = nn.Linear(3, 1)
                self.unused = nn.Linear(3, 1)
                self.frozen = nn.Linear(3, 3)
                self.frozen.requires_grad_(False)

            def forward(self, x):
                return self.used(self.frozen(x))

        def main():
            torch.manual_seed(0)
            return Net()(torch.randn(2, 3)).sum()
        """)
    with _run(p) as run:
        assert run.error is None
        assert sorted(run.gradients()) == ["used.bias", "used.weight"]
        assert run.no_grad == {"unused.weight": "not reached by the backward",
                               "unused.bias": "not reached by the backward",
                               "frozen.weight": "requires_grad is False",
                               "frozen.bias": "requires_grad is False"}
        assert run.footer()["no_gradient"] == run.no_grad
        run.save(tmp_path / "run.jsonl")
    from autograd_tui.history import recordings

    assert recordings.load(tmp_path / "run.jsonl").footer["no_gradient"] == {
        "unused.weight": "not reached by the backward", "unused.bias": "not reached by the "
        "backward", "frozen.weight": "requires_grad is False",
        "frozen.bias": "requires_grad is False"}


def test_the_scripts_folder_is_importable_and_restored(tmp_path: Path) -> None:
    _script(tmp_path, """
        from torch import nn

        def make():
            return nn.Linear(3, 1)
        """, name="newcomer_sibling.py")
    p = _script(tmp_path, """
        import torch
        from newcomer_sibling import make

        def main():
            import newcomer_sibling  # at run time too
            torch.manual_seed(0)
            return newcomer_sibling.make()(torch.randn(2, 3)).sum()
        """)
    before = list(sys.path)
    try:
        with _run(p) as run:
            assert run.error is None
            assert sorted(run.gradients()) == ["bias", "weight"]
        assert sys.path == before
    finally:
        sys.modules.pop("newcomer_sibling", None)


def test_a_script_that_calls_backward_gets_one_plain_message(tmp_path: Path) -> None:
    p = _script(tmp_path, """
        import torch
        from torch import nn

        def main():
            loss = nn.Linear(3, 1)(torch.randn(2, 3)).sum()
            loss.backward()
            return loss
        """)
    with _run(p) as run:
        err = run.error
    assert isinstance(err, ScriptCalledBackward)
    assert str(err) == (f"{p}:7: the program calls .backward() itself: main() should return "
                        "the loss; autograd-tui runs the backward (to step a second "
                        "backward of it, keep its graph: .backward(retain_graph=True))")


def test_a_training_loop_before_the_returned_loss_is_fine(tmp_path: Path) -> None:
    p = _script(tmp_path, """
        import torch
        from torch import nn

        def main():
            torch.manual_seed(0)
            net = nn.Linear(3, 1)
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            for _ in range(2):
                opt.zero_grad()
                net(torch.randn(2, 3)).sum().backward()
                opt.step()
            opt.zero_grad()
            return net(torch.randn(2, 3)).sum()
        """)
    with _run(p) as run:
        assert run.error is None
        assert sorted(run.gradients()) == ["bias", "weight"]


@pytest.mark.parametrize(("name", "cuda"), [("linear-relu", False), ("multi-device", True),
                                            ("torch-mlp", False)])
def test_the_header_names_simulated_devices_only_with_cuda(name: str, cuda: bool) -> None:
    s: Any = Session.open(name)
    try:
        assert bool(s.devices) == cuda  # "cuda:N simulated ..." or the real GPUs
    finally:
        s.close()


def test_the_inplace_error_names_the_op_and_both_versions(tmp_path: Path) -> None:
    from autograd_tui.session.program_errors import locate_in_scenario

    p = _script(tmp_path, """
        import torch

        def main():
            x = torch.randn(3, requires_grad=True)
            y = torch.sigmoid(x)
            y.mul_(2)
            return y.sum()
        """)
    with _run(p) as run:
        err = run.error
        located = locate_in_scenario(err, run.scenario)
    assert isinstance(err, RuntimeError)
    first = str(err).splitlines()[0]  # PyTorch's own message, unchanged
    assert first.startswith("one of the variables needed for gradient computation has been "
                            "modified by an inplace operation: [torch.FloatTensor [3]], which "
                            "is output 0 of ")
    assert "is at version 1; expected version 0 instead" in first
    assert f"hint: modified in place by mul_ at {p}:7 (version 0 -> 1)" in located.notes
    assert "\\x0a" not in located.text()  # notes are lines of their own
    assert located.error.startswith("RuntimeError: one of the variables")


def test_the_programs_output_is_kept_and_shown_in_the_app(tmp_path: Path) -> None:
    import logging

    from app.pilot import run_app, settle, until  # tests/app/pilot.py

    from autograd_tui.app import AutogradApp
    from autograd_tui.app.screens import OutputScreen

    p = _script(tmp_path, """
        import logging
        import sys

        import torch
        from torch import nn

        # a library's logger, made at import with the terminal's own stderr (transformers')
        log = logging.getLogger("newcomer_lib")
        log.addHandler(logging.StreamHandler(sys.__stderr__))

        def main():
            print("hello from main")
            log.warning("a library's warning")
            sys.stderr.write("raw stderr line\\n")
            torch.manual_seed(0)
            return nn.Linear(3, 1)(torch.randn(2, 3)).sum()
        """)
    app = AutogradApp(script_scenario(str(p)))
    seen: dict[str, Any] = {}

    async def script(pilot: Any) -> None:
        await pilot.press("n")  # the forward pass runs on the first step
        await until(pilot, lambda: len(app.output.lines()) >= 3)
        app.debugger.update_title()
        seen["title"] = str(app.debugger.sub_title)
        await pilot.press("o")
        await settle(pilot)
        seen["screen"] = app.screen
        seen["shown"] = str(app.screen.query_one("#output").render())

    try:
        run_app(app, script)
        lines = app.output.lines()
        assert ("stdout", "hello from main") in lines
        assert ("stderr", "a library's warning") in lines
        assert ("stderr", "raw stderr line") in lines
        assert "output: 3 lines (o)" in seen["title"]
        assert isinstance(seen["screen"], OutputScreen)
        assert "a library's warning" in seen["shown"] and "hello from main" in seen["shown"]
        handler = logging.getLogger("newcomer_lib").handlers[0]
        assert isinstance(handler, logging.StreamHandler)
        assert handler.stream is sys.__stderr__  # given back when the app ended
    finally:
        logging.getLogger("newcomer_lib").handlers.clear()
