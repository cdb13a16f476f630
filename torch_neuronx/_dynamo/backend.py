"""The ``neuron`` Dynamo backend: ``torch.compile(model, backend="neuron")``.

Dynamo finds it through the ``torch_dynamo_backends`` entry point, so ``backend="neuron"``
needs no import. The pipeline is Dynamo, then AOTAutograd (forward and backward compiled
separately), then the code generator in ``compiler.py``.
"""

import functools
import time
import warnings

import torch
from torch._dynamo import config as dynamo_config
from torch._guards import CompileContext

from torch_neuronx import _exclusions as exclusions
from torch_neuronx._dynamo import artifacts, compiler, config, device_interface, metrics

# TorchNeuron compiles static shapes only: a new input shape must be a new static graph, not
# a symbolic one, so Dynamo must not turn a changed size into a dynamic dimension.
dynamo_config.automatic_dynamic_shapes = False
device_interface.register()


class StaticShapeError(RuntimeError):
    """A graph with symbolic shapes reached the neuron backend."""


def neuron_backend(gm, example_inputs, *, mode=None, options=None):
    """Compiles one Dynamo graph for the emulated NeuronCore."""
    opts = config.Options.parse(mode, options)
    _require_static_shapes(example_inputs)
    compile_id = CompileContext.current_compile_id()
    name = f"{opts.model_name}_{str(compile_id).replace('/', '_')}"
    record = metrics.add_graph(
        metrics.GraphMetrics(
            name=name,
            compile_id=str(compile_id),
            recompile=bool(compile_id is not None and compile_id.frame_compile_id),
        )
    )
    record.job = artifacts.job(name)
    artifacts.save_args(record.job, opts)
    artifacts.save_graph(record.job, "dynamo", gm)
    start = time.perf_counter()
    try:
        compiled = compiler.compile_graph(gm, example_inputs, opts, record)
    except Exception as e:
        if not opts.fallback_execution:
            e.add_note(
                f"The neuron backend could not compile graph {name}. To run such graphs "
                "eagerly instead, set TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0 or pass "
                "options={'fallback_execution': True}."
            )
            raise
        warnings.warn(
            f"The neuron backend could not compile graph {name} and runs it "
            f"eagerly (fallback execution): {type(e).__name__}: {e}",
            stacklevel=2,
        )
        record.fallback = True
        compiled = gm.forward
    finally:
        record.compile_time_s = time.perf_counter() - start
    return _check_cpu_inputs(compiled, example_inputs)


def _require_static_shapes(example_inputs):
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.SymInt) or (
            isinstance(x, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in x.shape)
        ):
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else x
            row = exclusions.get("dynamic_shapes")
            raise StaticShapeError(
                f"{row.message}, but graph input {i} has the symbolic shape {shape} (from "
                f"dynamic=True or torch._dynamo.mark_dynamic). {row.way_out}."
            )


def _check_cpu_inputs(compiled, example_inputs):
    """Enforces TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY on a graph that takes CPU tensors."""
    # By default CPU inputs count as copied to the device: device memory is host memory, so
    # the compiled code reads them in place (and writes to them, as eager would). CPU scalars
    # (0-dim) are exempt, as for every device op in PyTorch. Dynamo guards on input devices,
    # so which inputs are on the CPU is known here, once per graph.
    cpu = [
        i
        for i, x in enumerate(example_inputs)
        if isinstance(x, torch.Tensor) and x.device.type == "cpu" and x.dim() > 0
    ]
    if not cpu:
        return compiled

    @functools.wraps(compiled)
    def run(*args):
        if config.cpu_autocopy_disabled():
            raise RuntimeError(
                f"Input tensor at index {cpu[0]} is on cpu device, expected neuron. Move "
                "tensor to Neuron device first with tensor.to('neuron')"
            )
        return compiled(*args)

    return run
