"""Where a bridged node was created, without anomaly mode: the program's own frame, each
code location resolved once; saved tensors with version and size (sites.py, saved.py)."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from autograd_tui.engine.torch_bridge import capture, from_torch  # noqa: E402
from autograd_tui.engine.torch_bridge.saved import nbytes  # noqa: E402
from autograd_tui.engine.torch_bridge.sites import STACK_MAX, file_kind  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LIB = '''
import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 4).double()

    def forward(self, x):
        return self.lin(x).tanh()
'''


@pytest.fixture
def library(tmp_path: Path) -> Iterator[Any]:
    """A model defined in a module under a ``site-packages`` folder, as a library's is."""
    site = tmp_path / "venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    (site / "capture_sites_lib.py").write_text(textwrap.dedent(LIB))
    sys.path.insert(0, str(site))
    try:
        import capture_sites_lib

        yield capture_sites_lib
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("capture_sites_lib", None)


def metas(loss: Any) -> dict[str, dict[str, Any]]:
    g = from_torch(loss)
    return {n.name(): n.meta for n in g.nodes.values()}


def test_created_is_the_programs_frame_not_the_librarys(library: Any) -> None:
    model = library.Block()
    x = torch.randn(2, 3, dtype=torch.float64)
    with capture():
        y = model(x)  # the user's line
        loss = y.sum()
    m = metas(loss)
    tanh = m["TanhBackward0"]
    line = next(i for i, t in enumerate(Path(__file__).read_text().splitlines(), 1)
                if "# the user's line" in t)
    name = test_created_is_the_programs_frame_not_the_librarys.__name__
    assert tanh["created"] == f"{__file__}:{line} in {name}"
    assert tanh["source"] == "y = model(x)  # the user's line"
    lib = library.__file__
    stack = tanh["stack"]
    assert file_kind(lib) == 1 and file_kind(__file__) == 0
    assert stack[0] == tanh["created"]  # the frame that entered capture() is the outermost
    mine = stack.index(tanh["created"])
    assert any(f.startswith(f"{lib}:") and f.endswith("in forward") for f in stack[mine + 1:])
    assert any("/torch/" in f for f in stack)  # torch's frames kept too
    ours = (str(ROOT / "engine") + "/", str(ROOT / "autograd_tui") + "/")
    assert not any(f.startswith(ours) for f in stack)  # not ours (the runner, the modes)
    assert len(stack) <= STACK_MAX
    addmm = m["AddmmBackward0"]
    assert addmm["created"] == tanh["created"] and addmm["module"] == "lin"
    assert m["SumBackward0"]["source"] == "loss = y.sum()"


def test_the_stack_ends_at_the_frame_that_entered_the_capture() -> None:
    """Through run_program's contexts (generators, suspended): nothing above the runner
    (pytest's frames, a thread's bootstrap) is in the stack, so a recording re-executes
    identically however the program was started."""
    from autograd_tui.engine.torch_bridge.program import forward_capture

    def entry() -> Any:
        x = torch.randn(3, dtype=torch.float64, requires_grad=True)
        return x.exp().sum()

    def runner() -> Any:
        with forward_capture():
            return entry()

    stack = metas(runner())["ExpBackward0"]["stack"]
    assert stack[0].endswith(" in runner") and stack[1].endswith(" in entry"), stack


def test_the_stack_has_no_frame_of_torchs_dispatch_to_our_mode() -> None:
    """``F.dropout`` and friends reach a TorchFunctionMode through ``handle_torch_function``:
    a frame there only because capture's mode is on, which the program's stack has not."""
    from autograd_tui.engine.torch_bridge.program import forward_capture

    def runner() -> Any:
        with forward_capture():
            x = torch.randn(3, dtype=torch.float64, requires_grad=True)
            return torch.nn.functional.dropout(x.exp(), p=0.5).sum()

    stack = metas(runner())["MulBackward0"]["stack"]
    assert any(f.endswith(" in dropout") for f in stack), stack
    assert not any("handle_torch_function" in f for f in stack), stack


def test_each_code_location_is_resolved_once() -> None:
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    with capture() as reg:
        h = x
        for _ in range(50):
            h = h.sin()
        for _ in range(30):
            h = h * 2
        loss = h.sum()
    m = [n.meta for n in from_torch(loss).nodes.values()]
    created = {mm["created"] for mm in m if mm["created"] is not None}
    assert len(created) == 3  # sin, mul, sum: three lines
    assert len([mm for mm in m if mm["source"] == "h = h.sin()"]) == 50
    assert reg.sites.resolves == 3  # 81 nodes, three code locations, each resolved once
    assert len(reg.sites.seqs) == 81
    sins = [mm for mm in m if mm["source"] == "h = h.sin()"]
    assert all(mm["stack"] is sins[0]["stack"] for mm in sins)  # one list, shared


def test_saved_tensors_show_version_and_size() -> None:
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    with capture():
        b = a * 2
        c = b.sin()  # saves b
        d = b.exp()  # saves its result
        loss = c.sum() + d.sum()
    m = metas(loss)
    saved = m["SinBackward0"]["saved"]
    assert len(saved) == 1 and saved[0].startswith("self: Tensor[3, 4] float64, version ")
    assert ", 96 B, |x|=" in saved[0]
    assert m["ExpBackward0"]["saved"][0].startswith("result: Tensor[3, 4] float64, version 0")
    assert (nbytes(48), nbytes(1536), nbytes(3 << 20)) == ("48 B", "1.5 KiB", "3 MiB")


def test_the_version_is_the_tensors_own_and_a_changed_one_says_so() -> None:
    a = torch.randn(3, dtype=torch.float64, requires_grad=True)
    with capture():
        b = a * 2
        b.add_(1)  # version 1 before it is saved
        c = b.sin()
        e = a * 3
        f = e.cos()
        e.mul_(2)  # f's saved e changed after it was saved: PyTorch refuses to unpack it
        loss = c.sum() + f.sum()
    m = metas(loss)
    assert m["SinBackward0"]["saved"][0].startswith("self: Tensor[3] float64, version 1, 24 B")
    cos = m["CosBackward0"]["saved"][0]
    assert cos.startswith("self: (modified in place: saved at version 0, now version 1;")


def test_capture_leaves_anomaly_mode_as_the_program_sets_it() -> None:
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    assert not torch.is_anomaly_enabled()
    with capture():
        assert not torch.is_anomaly_enabled()  # no stack formatted per op any more
        with torch.autograd.detect_anomaly(check_nan=False):
            y = x.exp()
        loss = y.sum()
    assert not torch.is_anomaly_enabled()
    assert "traceback_" in y.grad_fn.metadata  # the program's own anomaly mode works
    assert metas(loss)["ExpBackward0"]["source"] == "y = x.exp()"


def test_a_view_changed_in_place_under_no_grad_is_no_error() -> None:
    """nn.Embedding(padding_idx=) zeroes a row of its weight under no_grad: a view whose
    .grad_fn PyTorch refuses to read afterwards (BERT builds one)."""
    with capture():
        emb = torch.nn.Embedding(4, 2, padding_idx=0)
        loss = emb(torch.tensor([0, 1])).sum()
    assert "EmbeddingBackward0" in metas(loss)


def test_a_node_belongs_to_the_innermost_module_running_when_it_was_made() -> None:
    """Module calls are ranges of sequence numbers: a node made inside a call is that
    call's (the innermost one), also one its outputs do not reach; one made after the
    call returned is its caller's, or no module's at the top."""

    class Inner(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            self.side = x.exp()  # not reached from the output
            return x.sin()

    class Outer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = Inner()

        def forward(self, x: Any) -> Any:
            a = x.cos()
            return self.inner(a) * 2

    model = Outer()
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    with capture() as reg:
        y = model(x)
        loss = y.sum()
    m = metas(loss)
    assert (m["CosBackward0"]["module"], m["CosBackward0"]["module_type"]) == ("Outer", "Outer")
    assert (m["SinBackward0"]["module"], m["SinBackward0"]["module_type"]) == ("inner", "Inner")
    assert m["MulBackward0"]["module"] == "Outer"
    assert m["SumBackward0"]["module"] is None
    assert reg.meta(model.inner.side.grad_fn)["module"] == "inner"
