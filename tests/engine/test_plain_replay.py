"""``replay --reexecute`` of a recording made from a plain script (``torch SCRIPT
--backward N -- ARGS``): the header keeps the Nth call and the script's arguments
(``Scenario.script``), so the re-execution runs the same backward of the same run; a
damaged value there is refused with one message (``plain_script.recorded_script``).
And two names of parameters: FSDP2's unsharded ones (``naming.unsharded_params``) and a
``torch.export``'d module's (``capture._is_param``: export's fake ones are not)."""

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


# FSDP2 on one rank: fully_shard registers sharded DTensor parameters and swaps in
# unsharded plain ones for the forward; the graph's leaves are the unsharded ones
FSDP2 = """\
    import torch
    from torch import nn
    from torch.distributed.fsdp import fully_shard


    def main():
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
        fully_shard(net[0])
        fully_shard(net[2])
        fully_shard(net)
        return nn.functional.cross_entropy(net(torch.randn(4, 6)), torch.tensor([0, 1, 2, 0]))
"""


@pytest.fixture
def one_rank() -> object:
    """A gloo process group of one rank, in this process (no port: a HashStore)."""
    dist = pytest.importorskip("torch.distributed")
    assert dist.is_available() and not dist.is_initialized()
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield dist
    finally:
        dist.destroy_process_group()


def test_fsdp2_unsharded_parameters_are_named_by_the_parameter(one_rank, tmp_path) -> None:
    from autograd_tui.session.run import Run
    from autograd_tui.session.torch_script import script_scenario

    script = write_script(tmp_path, FSDP2, "fsdp2.py")
    with Run(script_scenario(str(script))) as run:
        run.run()
        assert run.error is None and run.finished
        metas = [e.tensor for e in run.events if e.kind == "node_meta" and e.tensor]
        grads, why = set(run.gradients()), dict(run.no_grad)
    params = {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert grads == params  # the sharded DTensors', reduce-scattered
    assert set(why) == {f"{p} (unsharded)" for p in params}, why  # was: leaf [12, 6]...
    assert sorted(metas) == sorted(f"{p} (unsharded)" for p in params)
    # FSDP moved the gradient to the sharded parameter: not "set to None by the program"
    for p in params:
        assert why[f"{p} (unsharded)"] == (
            f"FSDP2's unsharded copy of {p}: its gradient was accumulated, then "
            "reduce-scattered into the sharded parameter's .grad (fully_shard sets this "
            "copy's .grad to None)"), why


EXPORTED = """\
    import torch
    from torch import nn
    from torch.export import export


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x).tanh()


    def main():
        torch.manual_seed(0)
        gm = export(Net(), (torch.randn(3, 4),)).module()
        return gm(torch.randn(3, 4)).pow(2).sum()
"""


def test_an_exported_modules_parameters_are_its_own(tmp_path: Path) -> None:
    """export traces its Wrapper with FakeTensor parameters: they were listed beside the
    exported module's (``fn._orig_mod._export_root.fc.weight``, not reached), which then
    took a prefix (``gm.fc.weight``)."""
    from autograd_tui.session.run import Run
    from autograd_tui.session.torch_script import script_scenario

    script = write_script(tmp_path, EXPORTED, "exported.py")
    with Run(script_scenario(str(script))) as run:
        run.run()
        assert run.error is None and run.finished
        grads, no_grad = set(run.gradients()), dict(run.no_grad)
    assert grads == {"fc.weight", "fc.bias"} and not no_grad, (grads, no_grad)
