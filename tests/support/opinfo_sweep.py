"""Runs PyTorch's OpInfo samples (float32, forward and backward) on neuron and on the CPU and
compares them bit for bit. Usage: python opinfo_sweep.py [--ops a,b] [--json out.json].

Every sample either matches the CPU exactly, or is listed below with the reason it cannot:
a deliberate exclusion (it must raise the documented error) or a known inexact result (it must
still agree to float32 tolerance). The expected number of such samples is listed per op, so a
new difference fails the sweep, and so does one that went away."""

import argparse
import json
import sys
import time
import warnings
from collections import Counter

import torch
from torch.utils._pytree import tree_flatten, tree_map

SEED = 1234
# Factories whose outputs are uninitialised memory: only their metadata can be compared.
UNINITIALISED = (
    "empty",
    "empty_like",
    "empty_permuted",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
)
# Arguments that the op requires on the CPU whatever the device (as on CUDA).
HOST_ARGUMENTS = {"tensor_split"}
# Factories with samples that name no device: they are given one, or they would run on the CPU
# both times.
DEVICE_DEFAULTED = {"arange", "linspace", "logspace"}

# Deliberate exclusions (docs/limitations.md), by the start of the error each one raises.
EXCLUSION_ERRORS = {
    "channels_last": "Neuron tensors only support contiguous or preserve memory format, got "
    "ChannelsLast",
    "sparse": "Sparse tensors (COO, CSR, CSC, BSR, BSC) are not supported on neuron",
}
# op[variant]: (exclusion, number of its samples that must raise it).
EXCLUDED = {
    # Tensor.<dtype>(memory_format=torch.channels_last) and Tensor.to(..., channels_last).
    **{
        name: ("channels_last", 1)
        for name in (
            "bfloat16",
            "bool",
            "byte",
            "cdouble",
            "cfloat",
            "chalf",
            "char",
            "double",
            "float",
            "half",
            "int",
            "long",
            "short",
        )
    },
    "to": ("channels_last", 12),
    # The samples are channels_last-strided, and max_unpool2d's derivative asks for
    # grad.contiguous(indices.suggest_memory_format()).
    "nn.functional.max_unpool2d": ("channels_last", 144),
    "nn.functional.max_unpool2d[grad]": ("channels_last", 17),
    "sparse.mm[reduce]": ("sparse", 16),
    "sparse.sampled_addmm": ("sparse", 8),
    "to_sparse": ("sparse", 2),
}
# op[variant]: (why some samples cannot match the CPU bit for bit, how many; None where the
# number changes from run to run). They must still agree to float32 tolerance.
NARROWED = (
    "the op computes in float64 as asked; neuron holds float64 at float32 precision "
    "(TORCH_NEURONX_64BIT=narrow, docs/limitations.md)"
)
NARROWED_INSIDE = (
    "the op accumulates in float64, float32's accumulation type on the CPU and so "
    "on neuron, which holds it at float32 precision (docs/limitations.md)"
)
INEXACT = {
    "float_power": (NARROWED, 8),
    "full_like": (NARROWED, 2),
    "new_full": (NARROWED, 2),
    "rand_like": (NARROWED, 2),
    "randn_like": (NARROWED, 2),
    "log_softmax[with_dtype]": (NARROWED, 5),
    "softmax[with_dtype]": (NARROWED, 5),
    "nn.functional.softmin[with_dtype]": (NARROWED, 5),
    # renorm_backward's norms: at::toAccumulateType(Float, device) is Double off CUDA and MPS.
    "renorm": (NARROWED_INSIDE, 4),
    "linalg.lstsq": (
        "the CPU result itself depends on uninitialised memory (LAPACK gelsy on "
        "an underdetermined system; pytorch/pytorch#71222)",
        None,
    ),
    "linalg.lstsq[grad_oriented]": ("as linalg.lstsq", None),
}


def _name(op):
    return f"{op.name}[{op.variant_test_name}]" if op.variant_test_name else op.name


def _move(device):
    """Moves tensors with their whole storage, so views keep their offsets and strides, and
    points device arguments (factories' `device="cpu"`, `Tensor.to("cpu")`) at `device`."""

    def move(t):
        if isinstance(t, (str, torch.device)) and str(t) == "cpu":
            return device
        if not isinstance(t, torch.Tensor):
            return t
        with torch.no_grad():
            if t.layout == torch.strided and device != "cpu":
                storage = t.untyped_storage()
                moved = torch.empty(0, dtype=t.dtype, device=device)
                moved.set_(storage.to(device=device), t.storage_offset(), t.shape, t.stride())
            else:
                moved = t.detach().to(device)
        return moved.requires_grad_() if t.requires_grad else moved

    return move


def _run(op, sample, device):
    """Forward (and backward when differentiable) on `device`. Returns the results moved to
    the CPU, the output's element types, and the devices the results were on."""
    move = _move(device)
    if op.name in HOST_ARGUMENTS:
        inp, args, kwargs = move(sample.input), sample.args, sample.kwargs
    else:
        inp, args, kwargs = tree_map(move, (sample.input, sample.args, sample.kwargs))
    if op.name in DEVICE_DEFAULTED and "device" not in kwargs:
        kwargs = {**kwargs, "device": device}
    torch.manual_seed(SEED)
    out = op(inp, *args, **kwargs)
    out = sample.output_process_fn_grad(out)
    flat = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    inputs = [
        t
        for t in tree_flatten((inp, args, kwargs))[0]
        if isinstance(t, torch.Tensor) and t.requires_grad
    ]
    diff = [t for t in flat if t.requires_grad and t.grad_fn is not None]
    grads = []
    if inputs and diff:
        torch.manual_seed(SEED + 1)
        cotangents = [torch.randn(t.shape, dtype=t.dtype).to(t.device) for t in diff]
        grads = [
            g
            for g in torch.autograd.grad(diff, inputs, cotangents, allow_unused=True)
            if g is not None
        ]
    devices = {t.device.type for t in flat + grads}
    if op.name in UNINITIALISED:
        flat = [torch.zeros(t.shape, dtype=t.dtype) for t in flat]
    results = [t.detach().cpu() for t in flat + grads]
    return results, [type(t).__name__ for t in tree_flatten(out)[0]], devices


def _identical(x, y):
    """Same dtype, shape and bits, except that any NaN equals any NaN."""
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    x, y = x.resolve_conj().resolve_neg(), y.resolve_conj().resolve_neg()
    if x.is_complex():
        x, y = torch.view_as_real(x), torch.view_as_real(y)
    if not x.is_floating_point():
        return torch.equal(x, y)
    nan = x.isnan()
    if not torch.equal(nan, y.isnan()):
        return False
    x, y = x.masked_fill(nan, 0), y.masked_fill(nan, 0)
    # equal() takes -0.0 for 0.0; the sign bit tells them apart.
    return torch.equal(x, y) and torch.equal(x.signbit(), y.signbit())


def _close(x, y):
    try:
        torch.testing.assert_close(x, y, equal_nan=True, atol=1e-5, rtol=1.3e-6)
    except AssertionError:
        return False
    return True


# What a sample may come to; anything else _compare returns says why it fails.
OUTCOMES = ("exact", "inexact", "excluded", "both_error")


def _compare(name, cpu, dev):
    """One of OUTCOMES, or why the sample fails. `cpu` and `dev` are what _run returned, or the
    exception it raised."""
    if isinstance(dev, Exception):
        message = str(dev).split("\n")[0][:300]
        exclusion = EXCLUDED.get(name, (None,))[0]
        if (
            exclusion
            and not isinstance(cpu, Exception)
            and message.startswith(EXCLUSION_ERRORS[exclusion])
        ):
            return "excluded"
        if type(cpu) is type(dev):
            return "both_error"
        on_cpu = type(cpu).__name__ if isinstance(cpu, Exception) else "ok"
        return f"neuron raised {type(dev).__name__}: {message}; cpu: {on_cpu}"
    if isinstance(cpu, Exception):
        return f"cpu raised {type(cpu).__name__}: {cpu!s:.200}; neuron did not"
    (a, a_types, _), (b, b_types, devices) = cpu, dev
    if devices - {"neuron"}:
        return f"results on {sorted(devices)}, not neuron"
    if a_types != b_types or len(a) != len(b):
        return f"outputs {b_types} (cpu {a_types})"
    if all(_identical(x, y) for x, y in zip(b, a)):
        return "exact"
    if name in INEXACT and all(_close(x, y) for x, y in zip(b, a)):
        return "inexact"
    return "results differ"


def sweep(names=None):
    # Imported here: it is slow, and its test utilities change global state.
    from torch.testing._internal.common_methods_invocations import op_db

    stats = {"ops": 0, "samples": 0, **dict.fromkeys(OUTCOMES, 0), "failures": []}
    counts = {"excluded": Counter(), "inexact": Counter()}
    start = time.time()
    swept = set()
    for op in op_db:
        if names and op.name not in names:
            continue
        if op.name.startswith("jiterator") or torch.float32 not in op.supported_dtypes("cpu"):
            continue
        stats["ops"] += 1
        name = _name(op)
        swept.add(name)
        grad = op.supports_autograd and torch.float32 in op.supported_backward_dtypes("cpu")
        try:
            samples = list(op.sample_inputs("cpu", torch.float32, requires_grad=grad))
        except Exception:  # noqa: BLE001 - generators that fail on CPU are not our samples
            continue
        for i, sample in enumerate(samples):
            stats["samples"] += 1
            outcome = []
            for device in ("cpu", "neuron"):
                try:
                    outcome.append(_run(op, sample, device))
                except Exception as e:  # noqa: BLE001
                    outcome.append(e)
            verdict = _compare(name, *outcome)
            if verdict in OUTCOMES:
                stats[verdict] += 1
                if verdict in counts:
                    counts[verdict][name] += 1
            else:
                stats["failures"].append(f"{name}#{i}: {verdict}")
    for kind, listed in (("excluded", EXCLUDED), ("inexact", INEXACT)):
        for name, (reason, expected) in listed.items():
            got = counts[kind][name]
            if name in swept and expected is not None and got != expected:
                stats["failures"].append(
                    f"{name}: {got} {kind} samples, {expected} listed ({reason})"
                )
    stats["seconds"] = round(time.time() - start, 1)
    return stats


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops")
    parser.add_argument("--json")
    a = parser.parse_args()
    warnings.filterwarnings("ignore")
    stats = sweep(set(a.ops.split(",")) if a.ops else None)
    text = json.dumps(stats, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text)
    print(
        f"{stats['samples']} samples over {stats['ops']} ops in {stats['seconds']} s: "
        f"{stats['exact']} bit-identical, {stats['both_error']} raise on both devices, "
        f"{stats['inexact']} listed as inexact, {stats['excluded']} excluded "
        f"(docs/limitations.md); {len(stats['failures'])} unexplained"
    )
    for line in stats["failures"][:50]:
        print("  ", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
