"""Student programs and training algorithms users bring (round 3), each reproduced with plain
torch: the bridge must do what PyTorch does, or say plainly where it cannot.

- Two threads, two backward passes at once (PyTorch allows it): while a bridged backward ran
  on one thread, ``torch.autograd.backward``/``grad`` were replaced process-wide, so the
  program's other thread, running a backward of its own on PyTorch's engine, was sent to
  ours (and, at the instant the patch was undone, could find the original gone).
- A thread of the program calling a module while the forward pass runs (a second model
  trained in the background): ``capture()``'s module hooks are global, so that thread's
  module calls were taken as this forward's (sequence numbers are per thread): the
  program's model lost its parameters' names (``leaf [32, 4]``) and the thread's model
  was listed as "not reached by the backward".
- Hooks ran with torch's grad mode on: PyTorch runs every hook under the GraphTask's grad
  mode (``create_graph``, off for a plain backward), so a hook's own ops build no graph (a
  hook that scales by a parameter returned a gradient with a ``grad_fn``; one that calls
  ``torch.autograd.grad`` on a fresh computation raised in PyTorch, not in ours).  So do
  final callbacks (``Variable._execution_engine.queue_callback``).
- A custom ``Function``'s backward returning what PyTorch refuses: a float or a NumPy array
  (ours: ``AttributeError: 'float' object has no attribute 'layout'``), a gradient for a
  non-tensor input, or a list (PyTorch's ``ensure_tuple`` makes it one result); ours ran
  the last two.  Now PyTorch's own messages (``PyNode::apply``).
- A hook returning what PyTorch refuses: a float from a tensor hook (ours: the same
  ``AttributeError``), a list from a node pre-hook (ours ran it); and the messages named
  every hook ``'<unknown>'`` (the wrapper had no ``__name__``), PyTorch ``'<lambda>'``.
- A custom ``Function`` returning None for a parameter's gradient: the parameter was
  "not reached by the backward"; PyTorch's ``AccumulateGrad`` runs, with no gradient.
- The commonest mistake in a hand-written checkpoint ``Function``: recomputing in its
  backward without ``torch.enable_grad()`` and calling ``autograd.grad``/``backward`` on
  it.  PyTorch says ``element 0 of tensors does not require grad and does not have a
  grad_fn``; ours said ``from_torch: output 0 does not require grad ...`` (and, for a
  non-scalar without grad_outputs, its own words for PyTorch's).
- A student's plain script (no ``main``, training at the top level with its own
  ``.backward()``): "defines no function 'main'" said nothing of why, after the script's
  whole training had run on import; now the script runs as it is, up to its first
  backward call, which is stepped (``test_plain_scripts.py``).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from user_scripts import write_script

torch = pytest.importorskip("torch", reason="the torch bridge needs PyTorch (pip install torch)")

from autograd_tui.commands import main as cli  # noqa: E402
from autograd_tui.engine.torch_bridge import capture, from_torch, run_program  # noqa: E402
from autograd_tui.engine.torch_bridge.program import NONE_GRAD  # noqa: E402

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("no_thread_left")]

OURS = 1 << 52  # our GraphTask ids are offset by 2**52 (queries.py)


def test_another_threads_backward_stays_pytorchs_while_ours_runs() -> None:
    """Thread A steps a bridged backward and waits in a hook; meanwhile thread B runs
    ``backward()`` and ``autograd.grad`` on a graph of its own: PyTorch's engine runs them
    (its own graph-task id, below ours), and both threads' gradients are PyTorch's."""
    torch.manual_seed(0)
    na, nb = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    ref_b = torch.autograd.grad(nb(x).pow(2).sum(), list(nb.parameters()))
    ref_a = torch.autograd.grad(na(x).tanh().sum(), list(na.parameters()))
    inside, b_done = threading.Event(), threading.Event()
    ids: list[int] = []
    a_hook_ran: list[bool] = []
    errors: list[BaseException] = []

    with capture():  # as autograd-tui torch runs the forward: the non-leaf hook is seen
        ha = na(x)
        ha.register_hook(lambda g: (inside.set(), b_done.wait(10)) and None)
        loss_a = ha.tanh().sum()

    def run_a() -> None:
        try:
            from_torch(loss_a).backward()
            a_hook_ran.append(b_done.is_set())
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
        finally:
            inside.set()

    def run_b() -> None:
        try:
            inside.wait(10)
            hb = nb(x)
            hb.register_hook(lambda g: ids.append(torch._C._current_graph_task_id()))
            grads = torch.autograd.grad(hb.pow(2).sum(), list(nb.parameters()),
                                        retain_graph=True)
            assert all(torch.equal(g, r) for g, r in zip(grads, ref_b))
            hb.pow(2).sum().backward()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
        finally:
            b_done.set()

    ts = [threading.Thread(target=run_a), threading.Thread(target=run_b)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert not errors, errors
    assert a_hook_ran == [True]  # B ran while A's backward waited in its hook
    assert len(ids) == 2 and all(0 <= i < OURS for i in ids), ids  # PyTorch's GraphTasks
    assert all(torch.equal(p.grad, r) for p, r in zip(nb.parameters(), ref_b))
    assert all(torch.equal(p.grad, r) for p, r in zip(na.parameters(), ref_a))


def test_a_module_another_thread_calls_meanwhile_is_not_this_forwards() -> None:
    """Thread T enters a module call and waits; the program's forward pass then calls its
    model, and T ends its call inside it: the program's parameters keep their names, and
    T's model is not among the forward pass's."""
    torch.manual_seed(0)
    started, go = threading.Event(), threading.Event()

    class Wait(torch.nn.Module):
        def forward(self, x):
            started.set()
            go.wait(10)
            return x

    class Handoff(torch.nn.Module):
        def forward(self, x):
            go.set()  # T leaves its module calls now, inside this one
            t.join(10)
            return x

    other = torch.nn.Sequential(torch.nn.Linear(3, 3), Wait())
    t = threading.Thread(target=lambda: other(torch.randn(2, 3)))
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), Handoff(), torch.nn.Tanh(),
                                torch.nn.Linear(4, 1))
    x = torch.randn(5, 3)

    def entry():
        t.start()
        started.wait(10)  # T is inside other's call
        return model(x).sum()

    grads = run_program(entry)
    assert sorted(grads) == ["0.bias", "0.weight", "3.bias", "3.weight"]
    assert grads.no_grad == {}
    ref = torch.autograd.grad(model(x).sum(), [model[0].weight, model[3].weight])
    assert torch.equal(model[0].weight.grad, ref[0])
    assert torch.equal(model[3].weight.grad, ref[1])


def _hook_grad_modes(bridged: bool) -> tuple[list[tuple[str, bool]], bool]:
    torch.manual_seed(0)
    seen: list[tuple[str, bool]] = []
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    scale = torch.nn.Parameter(torch.tensor(2.0))

    def note(kind: str):
        return lambda *a: seen.append((kind, torch.is_grad_enabled())) and None

    def callback_hook(g):
        torch.autograd.Variable._execution_engine.queue_callback(note("callback"))

    with capture():
        h = net[0](torch.randn(2, 3))
        h.register_hook(lambda g: (seen.append(("tensor", torch.is_grad_enabled())), g * scale)[1])
        h.register_hook(callback_hook)
        h.grad_fn.register_prehook(note("pre"))
        h.grad_fn.register_hook(note("post"))
        net[1].register_full_backward_hook(note("module"))
        net[0].weight.register_hook(note("leaf"))
        loss = net[2](net[1](h)).sum()
    if bridged:
        from_torch(loss).backward()
    else:
        loss.backward()
    return seen, net[0].weight.grad.requires_grad


def test_hooks_run_under_the_backwards_grad_mode() -> None:
    """Each kind of hook and a final callback see grad mode off in a plain backward, as in
    PyTorch's, and a hook's result built from a parameter leaves ``.grad`` without a graph."""
    theirs, ours = _hook_grad_modes(False), _hook_grad_modes(True)
    assert len(theirs[0]) == 6 and all(not on for _, on in theirs[0])
    assert sorted(ours[0]) == sorted(theirs[0])
    assert ours[1] is theirs[1] is False


class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        return x * k

    @staticmethod
    def backward(ctx, g):
        return _Scale.result(g)


@pytest.mark.parametrize("result", [
    lambda g: (1.5, None),                       # a float
    lambda g: (g.numpy(), None),                 # a NumPy array
    lambda g: (g, 1.0),                          # a gradient for the float k
    lambda g: [g * 2, None],                     # a list: one result, not two
])
def test_a_functions_bad_backward_result_gets_pytorchs_error(result) -> None:
    _Scale.result = staticmethod(result)
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError) as theirs:
        _Scale.apply(x, 2.0).sum().backward()
    with capture():
        loss = _Scale.apply(x, 2.0).sum()
    with pytest.raises(RuntimeError) as ours:
        from_torch(loss).backward()
    assert str(ours.value) == str(theirs.value)
    assert x.grad is None


@pytest.mark.parametrize("register", [
    lambda h, net: h.register_hook(lambda g: 2.0),
    lambda h, net: h.register_hook(lambda g: [g]),
    lambda h, net: h.register_hook(lambda g: g[:1]),
    lambda h, net: net[0].weight.register_hook(lambda g: g.double()),
    lambda h, net: h.grad_fn.register_prehook(lambda go: [go[0]]),
    lambda h, net: h.grad_fn.register_prehook(lambda go: go[0]),
    lambda h, net: h.grad_fn.register_hook(lambda gi, go: gi + gi),
], ids=["tensor-float", "tensor-list", "tensor-size", "leaf-dtype", "pre-list", "pre-tensor",
        "post-count"])
def test_a_hooks_bad_result_gets_pytorchs_error(register) -> None:
    def run(bridged: bool) -> str:
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
        with capture():
            h = net[0](torch.randn(2, 3))
            register(h, net)
            loss = net[2](net[1](h)).sum()
        with pytest.raises((RuntimeError, TypeError)) as e:
            from_torch(loss).backward() if bridged else loss.backward()
        return f"{type(e.value).__name__}: {str(e.value).splitlines()[0]}"

    assert run(True) == run(False)


def test_a_parameter_given_none_by_a_function_is_reached_with_no_gradient() -> None:
    class Half(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            return x * w

        @staticmethod
        def backward(ctx, g):
            return g, None  # the student forgot w's gradient

    torch.manual_seed(0)
    lin, w = torch.nn.Linear(3, 3), torch.nn.Parameter(torch.randn(3))
    grads = run_program(lambda: Half.apply(lin(torch.randn(2, 3)), w).sum())
    assert sorted(grads) == ["lin.bias", "lin.weight"] and w.grad is None
    assert grads.no_grad == {"w": NONE_GRAD}


PLAIN = """
    import torch
    net = torch.nn.Linear(3, 1)
    for _ in range(2):
        net.zero_grad()
        net(torch.randn(4, 3)).pow(2).mean().backward()
"""


@pytest.mark.parametrize("command", ["check-order", "torch"])
def test_a_plain_script_that_trains_at_import_is_stepped_at_its_first_backward(
        command: str, tmp_path: Path, capsys) -> None:
    args = [command, str(write_script(tmp_path, PLAIN))] + (
        ["--headless", "--quiet"] if command == "torch" else [])
    code = cli(args)
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0, out
    assert "stepped the script's 1st backward call" in out and "Traceback" not in out


class _Recompute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.tanh(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_(True)
        with torch.set_grad_enabled(_Recompute.enable_grad):
            out = torch.tanh(x)
        return _Recompute.call(out, x, g)


@pytest.mark.parametrize("enable_grad,call", [
    (False, lambda out, x, g: torch.autograd.grad(out, x, g)[0]),     # no graph recomputed
    (False, lambda out, x, g: (out.backward(g), x.grad)[1]),
    (True, lambda out, x, g: torch.autograd.grad(out, x)[0]),         # non-scalar, no g
    (True, lambda out, x, g: torch.autograd.grad(out, [x, torch.ones(3)], g)[0]),
], ids=["grad-no-graph", "backward-no-graph", "grad-non-scalar", "grad-input-no-grad"])
def test_a_reentrant_calls_bad_arguments_get_pytorchs_error(enable_grad, call) -> None:
    _Recompute.call = staticmethod(lambda out, x, g: call(out, x, g))
    _Recompute.enable_grad = enable_grad

    def run(bridged: bool) -> str:
        x = torch.randn(3, requires_grad=True)
        with capture():
            loss = _Recompute.apply(x).sum()
        with pytest.raises(RuntimeError) as e:
            from_torch(loss).backward() if bridged else loss.backward()
        return f"{type(e.value).__name__}: {str(e.value).splitlines()[0]}"

    theirs = run(False)
    assert run(True) == theirs
    assert ("element 0 of tensors" in theirs) is not enable_grad, theirs
