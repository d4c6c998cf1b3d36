"""DDP's parameters named as PyTorch names them in its own error ("Parameters which did
not receive grad for rank 1: b.bias, b.weight"): ``param_names`` against PyTorch's
``DistributedDataParallel._build_debug_param_to_name_mapping`` itself, on a module whose
names are not simply ``named_parameters()`` (a parameter of the wrapped module itself, one
shared by two modules, a frozen one, an ignored one).  No process group is needed: the
mapping only reads the wrapped module."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch", reason="the bridge needs PyTorch (pip install torch)")
if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

from autograd_tui.engine.torch_bridge.ddp import param_names  # noqa: E402

DDP = torch.nn.parallel.DistributedDataParallel


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(3))  # the wrapped module's own
        self.enc = torch.nn.Linear(3, 3)
        self.dec = torch.nn.Linear(3, 3)
        self.dec.weight = self.enc.weight  # tied: named by its last module in PyTorch
        self.frozen = torch.nn.Linear(3, 3)
        self.frozen.requires_grad_(False)
        self.skip = torch.nn.Linear(3, 3)


def test_names_are_pytorchs_own() -> None:
    net = Net()
    fake = SimpleNamespace(module=net, parameters_to_ignore={"skip.weight", "skip.bias"})
    # DDP's parameters: trainable, not ignored, each once (as _build_params_for_reducer)
    params = [p for n, p in net.named_parameters()
              if p.requires_grad and n not in fake.parameters_to_ignore]
    want = {id(params[i]): n for i, n in
            DDP._build_debug_param_to_name_mapping(fake, params).items()}
    got = param_names(fake)
    assert got == want
    # what differs from named_parameters(): the root's ".scale", the tied ".weight"
    assert got[id(net.scale)] == ".scale"
    assert got[id(net.enc.weight)] == "dec.weight"
    assert id(net.frozen.weight) not in got and id(net.skip.weight) not in got
