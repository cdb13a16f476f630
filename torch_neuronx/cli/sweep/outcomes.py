"""What one sample comes to on neuron, judged against the same sample on the CPU."""

import dataclasses

import torch

# A sample's outcome, in the order reports list them.
PASSED, FALLBACK, EXCLUDED, FAILED, CRASHED = "passed", "fallback", "excluded", "failed", "crashed"
OUTCOMES = (PASSED, FALLBACK, EXCLUDED, FAILED, CRASHED)
# How a sample that passed (or ran on the CPU-fallback tier) matched the CPU.
BIT_IDENTICAL, WITHIN_TOLERANCE, SAME_ERROR = "bit_identical", "within_tolerance", "same_error"
MATCHES = (BIT_IDENTICAL, WITHIN_TOLERANCE, SAME_ERROR)

# Deliberate exclusions (docs/limitations.md), by a part of the error each one raises.
EXCLUSIONS = {
    "channels_last": "only support contiguous or preserve memory format",
    "sparse": "Sparse tensors (COO, CSR, CSC, BSR, BSC) are not supported on neuron",
    "nested": "Nested tensors are not supported on neuron",
    "quantized": "Quantized tensors are not supported on neuron",
    "forward-mode AD": "Forward-mode automatic differentiation",
    "FP8 compute": "FP8 compute on Trainium needs NKI kernels",
    "int64 beyond int32": "does not fit in int32",
    "64-bit floating point": "64-bit floating point",
    "CPU fallback disabled": "the CPU fallback is disabled (NEURON_FALLBACK_ENABLED=0)",
}
# Entries whose results differ from the CPU's by a documented choice (docs/limitations.md): a
# failed sample of theirs says so.
DOCUMENTED_DIFFERENCES = {
    "nn.functional.linear_cross_entropy": "documented: off the CPU and CUDA, PyTorch's chunked "
    "linear_cross_entropy in bfloat16/float16 takes the compact accumulation policy "
    "(docs/limitations.md)",
}
# The device holds 64-bit floating values at 32-bit precision (TORCH_NEURONX_64BIT=narrow), so
# they are compared at the tolerance of the type they are held in.
_HELD_AS = {torch.float64: torch.float32, torch.complex128: torch.complex64}


@dataclasses.dataclass
class Ran:
    """What a sample produced on one device: results moved to the CPU, the Python types of the
    outputs, and the device types the results were on."""

    results: list
    types: list
    devices: set


@dataclasses.dataclass
class Verdict:
    outcome: str
    match: str = ""  # one of MATCHES, for passed and fallback samples
    detail: str = ""  # the exclusion's name, or why the sample failed


def exclusion(error):
    """The name of the deliberate exclusion that `error` reports, or None."""
    message = str(error)
    return next((name for name, text in EXCLUSIONS.items() if text in message), None)


def _first_line(error, limit=300):
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:limit] if lines else ''}"


def identical(x, y):
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


def close(x, y):
    """Within torch.testing's default tolerance for the dtype the device holds the values in."""
    held = _HELD_AS.get(x.dtype)
    if held is not None:
        x, y = x.to(held), y.to(held)
    try:
        torch.testing.assert_close(x, y, equal_nan=True)
    except AssertionError:
        return False
    return True


def judge(cpu, neuron, fallback_ops=(), narrowed=0, documented=""):
    """The Verdict on a sample: `cpu` and `neuron` are what it produced (Ran) or the exception
    it raised on each device; `fallback_ops` the ops that took the CPU-fallback tier on neuron,
    `narrowed` the number of 64-bit values held at 32-bit precision there, and `documented`
    the documented reason why the entry's results may differ."""
    tier = FALLBACK if fallback_ops else PASSED
    if isinstance(neuron, BaseException):
        excluded = exclusion(neuron)
        if excluded and not isinstance(cpu, BaseException):
            return Verdict(EXCLUDED, detail=excluded)
        if type(cpu) is type(neuron):
            return Verdict(tier, SAME_ERROR, _first_line(neuron))
        on_cpu = "ran" if not isinstance(cpu, BaseException) else _first_line(cpu, 100)
        return Verdict(FAILED, detail=f"neuron raised {_first_line(neuron)}; the CPU {on_cpu}")
    if isinstance(cpu, BaseException):
        return Verdict(FAILED, detail=f"the CPU raised {_first_line(cpu)}; neuron did not")
    if neuron.devices - {"neuron"}:
        return Verdict(FAILED, detail=f"results on {sorted(neuron.devices)}, not only neuron")
    if neuron.types != cpu.types or len(neuron.results) != len(cpu.results):
        return Verdict(FAILED, detail=f"outputs {neuron.types}, the CPU's {cpu.types}")
    pairs = list(zip(neuron.results, cpu.results))
    if all(identical(x, y) for x, y in pairs):
        return Verdict(tier, BIT_IDENTICAL)
    if all(x.dtype == y.dtype and x.shape == y.shape and close(x, y) for x, y in pairs):
        why = f"{narrowed} 64-bit values held at 32-bit precision" if narrowed else ""
        return Verdict(tier, WITHIN_TOLERANCE, why)
    return Verdict(
        FAILED, detail="; ".join(filter(None, ("results differ from the CPU's", documented)))
    )
