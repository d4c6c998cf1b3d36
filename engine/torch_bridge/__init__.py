"""The PyTorch bridge: a real PyTorch backward graph, scheduled by our engine.

Our engine schedules (``compute_dependencies``, the ReadyQueue, ``not_ready``,
``InputBuffer``) and PyTorch computes: one ``TorchNode`` per PyTorch node, whose
``apply`` calls the real node; an ``AccumulateGrad`` writes the real ``.grad``.
Names, sequence numbers (``_sequence_nr()``; AccumulateGrad's is UINT64_MAX in
both), input metadata and devices are PyTorch's, so the order is PyTorch's.

Layers (each imports only those below it, lazily or not; no cycle):

=============  =================================================================
``program``    ``run_program``, ``split_result``, ``leaf_names`` (the one naming rule);
               a program that runs the backward itself refused (``ScriptCalledBackward``)
``script_run`` a plain training script run as it is, stopped at its Nth backward call,
               whose arguments ``run_program`` steps (``ScriptEntry``)
``inplace``    which in-place op changed a saved tensor (a hint for PyTorch's error)
``bridge``     ``TorchNode``, ``TorchAccumulateGrad``, ``from_torch``, ``TorchGraph``,
               the reentrant entry points (``reentrant_calls``)
``capture``    ``capture()`` and its ``Registry``: what the forward pass leaves
``naming``     the program's names for its models and leaves (its variables)
``sites``      where each node was created (the program's frame, the stack)
``hooks``      the program's hooks as hooks of our nodes; an ``AccumulateGrad`` run by
               PyTorch's engine (``accumulate``)
``ddp``        DistributedDataParallel watched: buckets, all-reduces, finalize as events
``compiled``   ``torch.compile``: what was compiled; its eager graph is what runs
``nested``     for check-order: the orders of nested (reentrant) backward passes, both
               engines'
``stepped``    for check-order: the parameters and optimizer states before a backward
               whose post-accumulate-grad hooks step them, put back for PyTorch's run
``queries``    PyTorch's graph-task queries answered by our engine
``recompute``  the modules of a nested graph's nodes (a backward's recompute)
``saved``      saved tensors under hooks read when PyTorch reads them; recompute events
``convert``    tensors, dtypes, devices between PyTorch and us; ``TorchBridgeError``
=============  =================================================================

What each part mirrors:

==================================  ==============================================
ours                                PyTorch
==================================  ==============================================
``TorchNode.apply``                 a C++ node's ``operator()``, as ``call_function``
                                    (``engine.cpp``) calls it
``TorchNode._apply_python``         ``PyNode::apply`` (``python_function.cpp``)
``TorchAccumulateGrad``             ``AccumulateGrad`` (``accumulate_grad.cpp``), run
                                    as ``call_function`` runs it: by PyTorch's engine
                                    (``hooks.accumulate``), C++ post hooks included
``ddp``                             DDP's ``Reducer`` (``reducer.cpp``): its hooks and
                                    final callback, watched through a comm hook
``from_torch``, ``TorchGraph``      ``THPEngine_run_backward`` (``python_engine.cpp``):
                                    roots from ``gradient_edge``, ``inputs=`` as
                                    output edges, ``retain_grad`` on non-leaf inputs
``TorchGraph.backward``             ``torch.autograd.backward`` -> ``Engine::execute``;
                                    PyTorch's ``AnomalyMode`` (the program's
                                    ``set_detect_anomaly``, its NaN check) is our
                                    engine's for the backward; a node's forward stack
                                    is its ``metadata["traceback_"]``
``reentrant_calls``                 ``torch.autograd.backward``/``grad`` called by a
                                    node (``CheckpointFunction.backward``,
                                    ``torch/utils/checkpoint.py``): a reentrant
                                    ``Engine::execute``
``TensorHook``, ``NodeHook``        ``PyFunctionTensorPreHook``, ``PyFunctionPreHook``,
                                    ``PyFunctionPostHook`` (``python_hook.cpp``)
``RetainGrad``                      ``VariableHooks::retain_grad`` (``variable.cpp``)
``node_hook_dicts``                 ``registerFunctionHook`` (``python_hook.cpp``)
``Registry.var_inputs``             ``is_variable_input`` (``python_function.cpp``)
``sites.Sites``                     ``AnomalyMetadata``'s traceback (anomaly mode),
                                    kept per torch call by a ``TorchFunctionMode``
``queries``                         ``get_current_graph_task_id`` and friends
                                    (``engine.cpp``), ``THPModule_willEngineExecuteNode``
``saved``                           (new): ``SavedVariable::unpack`` runs the hook
``capture``, ``convert``,           (new)
``program``
==================================  ==============================================

Departures, and why:
- A gradient a PyTorch node made travels to the next one as the torch tensor
  itself (``TorchGrad``, no NumPy round trip), with a NumPy view of it that our
  engine's checks and every view read (a float32 copy for bfloat16, which NumPy
  cannot hold); one of our own gradients reaches a PyTorch node as
  ``torch.from_numpy`` (moved to its device).
  ``validate_outputs``' sum to a broadcast shape and dtype cast are done by torch
  in ``TorchNode.apply`` (ATen's summation order, so the same bits as PyTorch).
  An ``AccumulateGrad`` gets a copy: PyTorch may steal
  its input into ``.grad`` and add to it in place later, and our buffers may
  share that tensor.
- While a bridged backward runs, ``torch._C._current_graph_task_id``,
  ``_will_engine_execute_node``, ``_current_autograd_node`` and
  ``_autograd._get_current_graph_task_keep_graph`` are replaced by ``queries``'
  (restored after): non-reentrant checkpoint and multi-grad hooks need them.
- An ``AccumulateGrad`` runs as a one-node GraphTask of PyTorch's engine
  (``run_backward`` rooted at the leaf), so that the hooks PyTorch keeps in C++ (DDP's
  reducer's ``autograd_hook``, FSDP-style hooks) and ``register_post_accumulate_grad_hook``
  fire where PyTorch fires them; its Python hooks (the leaf's tensor hooks, the node's pre-
  and post-hooks) are held off meanwhile and run by our engine, with their events, so a
  Python post hook runs after the C++ ones whatever their registration order.  A final
  callback that C++ queues there (DDP's ``finalize_backward``) lands on that one-node
  GraphTask and runs when the node ends, not when our backward ends (see ``ddp``); one
  queued from Python (``Variable._execution_engine.queue_callback``: DDP's ``_DDPSink``)
  lands on our GraphTask.  The cost: a GraphTask of PyTorch's per leaf.
- A ``torch.compile``d model runs eagerly (``compiled``): its compiled backward is
  one ``CompiledFunctionBackward`` node, with nothing inside to step.
- A C++ node's ``release_variables`` is not reachable from Python: saved tensors
  are kept after the node runs (a second backward succeeds where PyTorch's fails).
- Hooks PyTorch keeps in C++ are found through Python: a node's pre- and
  post-hook dicts by registering (and removing) a probe hook, a leaf's tensor
  hooks in ``variable._backward_hooks``; a non-leaf tensor's hooks and
  ``retain_grad`` only when they were registered under ``capture()``
  (``autograd-tui torch`` runs the forward pass under it).
- A custom ``Function``'s node (a Python ``BackwardCFunction``) is not callable:
  ``PyNode::apply`` is re-done here (zeros for undefined gradients when
  ``materialize_grads``, the count check, dropping non-tensor inputs' gradients).
- ``torch.autograd.backward``/``grad`` called inside a node (a reentrant
  checkpoint) run on our engine, as a reentrant backward, while a bridged
  backward runs on that thread; with ``create_graph`` (or batched or
  materialized grads), or on tensor subclasses (``torch.cond`` tracing its
  backward with functional tensors), they stay PyTorch's.
- A higher-order op's own compile (``torch.cond``) runs compiled, not forced eager,
  with the forward capture's mode and module hooks stepping aside (``convert.HOP``).
- Only dense floating and complex tensors on cpu and cuda: anything else is a
  ``TorchBridgeError`` naming the node; a DTensor gradient whole on this rank (FSDP2
  or ``distribute_tensor`` on one rank) travels as itself, read as its local tensor.
- A warning ATen raises in a forward op is shown at the program's frame, not at the
  capture mode's (``sites.warnings_at_callers``).

torch is imported lazily: ``import autograd_tui`` never needs it.
"""

from __future__ import annotations

from .bridge import TorchAccumulateGrad, TorchGraph, TorchNode, from_torch, is_active
from .capture import Registry, capture, current_registry
from .convert import TorchBridgeError, torch_module
from .program import leaf_names, run_program, split_result

__all__ = [
    "Registry", "TorchAccumulateGrad", "TorchBridgeError", "TorchGraph", "TorchNode",
    "capture", "current_registry", "from_torch", "is_active", "leaf_names", "run_program",
    "split_result", "torch_module",
]
