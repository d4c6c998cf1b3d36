"""``replay --reexecute`` of a recording made from a plain script (``torch SCRIPT
--backward N -- ARGS``): the header keeps the Nth call and the script's arguments
(``Scenario.script``), so the re-execution runs the same backward of the same run; a
damaged value there is refused with one message (``plain_script.recorded_script``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from user_scripts import run_cli, write_script

torch = pytest.importorskip("torch", reason="the torch bridge needs PyTorch")

from autograd_tui.history import recordings as trace  # noqa: E402

pytestmark = pytest.mark.timeout(120)

# each step's input depends on the step and on --scale: another call or another scale
# gives other gradients, so other events
ARGS = """\
    import argparse
    import torch
    from torch import nn

    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        opt.zero_grad()
        x = torch.randn(5, 3) * a.scale * (step + 1)
        model(x).pow(2).mean().backward()
        opt.step()
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(script, recording of its 2nd backward call with --scale 3)."""
    from autograd_tui.session.run import Run
    from autograd_tui.session.torch_script import script_scenario

    tmp = tmp_path_factory.mktemp("plain_replay")
    script, rec = write_script(tmp, ARGS, "scaled.py"), tmp / "run.jsonl"
    with Run(script_scenario(str(script), backward=2, argv=["--scale", "3"])) as run:
        run.run()
        assert run.error is None and run.finished
        run.save(rec)
    return script, rec


def test_reexecute_runs_the_recorded_call_with_the_recorded_arguments(recorded, capsys) -> None:
    script, rec = recorded
    assert trace.load(rec).header["scenario"]["script"] == {"backward": 2,
                                                            "args": ["--scale", "3"]}
    code, out = run_cli(["replay", str(rec), "--headless", "--reexecute",
                         "--scenario", str(script)], capsys)
    assert code == 0 and "identical to the recording" in out, out


@pytest.mark.parametrize(("script_field", "says"), [
    ({"backward": 0, "args": []}, "its backward is not a call number"),
    ({"backward": True, "args": []}, "its backward is not a call number"),
    ({"backward": 2, "args": ["--scale", 3]}, "its args are not a list"),
    ({"backward": 2, "args": ["x" * 20_000]}, "its args are not a list"),
    ({"entry": "os.system", "args": []}, "its entry is not a function name"),
    ("--backward 2", "not an object"),
])
def test_a_damaged_script_field_is_refused_plainly(recorded, tmp_path: Path, capsys,
                                                   script_field, says) -> None:
    script, rec = recorded
    old = trace.load(rec)
    header = dict(old.header)
    header["scenario"] = {**header["scenario"], "script": script_field}
    bad = tmp_path / "bad.jsonl"
    trace.save(bad, header, list(old.events), old.footer)  # a fresh checksum: proves nothing
    code, out = run_cli(["replay", str(bad), "--headless", "--reexecute",
                         "--scenario", str(script)], capsys)
    assert code != 0 and "Traceback" not in out, out
    assert f"the recording's scenario.script is damaged: {says}" in out, out
