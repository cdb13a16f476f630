"""What one sample comes to on neuron, judged against the same sample on the CPU."""

import dataclasses

import torch

from torch_neuronx import _exclusions as exclusions

# A sample's outcome, in the order reports list them.
PASSED, FALLBACK, EXCLUDED, FAILED, CRASHED = "passed", "fallback", "excluded", "failed", "crashed"
OUTCOMES = (PASSED, FALLBACK, EXCLUDED, FAILED, CRASHED)
# How a sample that passed (or ran on the CPU-fallback tier) matched the CPU.
BIT_IDENTICAL, WITHIN_TOLERANCE, SAME_ERROR = "bit_identical", "within_tolerance", "same_error"
MATCHES = (BIT_IDENTICAL, WITHIN_TOLERANCE, SAME_ERROR)
# Why an entry that the database would sweep made no samples. Nothing of it was examined, so a
# sweep with such an entry cannot pass.
GENERATOR_FAILED = "its sample generator failed on the CPU"

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
    """What a sample produced on one device: results moved to the CPU, what each result is
    ("output 0", "input 1 after the call", ...), the layout each had on its device (strides,
    storage offset, and the position of the input whose storage it shares), the Python types of
    the outputs, and the device types of the results that must be on the sample's device."""

    results: list
    types: list
    devices: set
    names: list = dataclasses.field(default_factory=list)
    layouts: list = dataclasses.field(default_factory=list)


def layout(t, inputs=()):
    """(strides, storage offset, index of the first of `inputs` whose storage `t` shares) of a
    strided tensor; None for other layouts."""
    if t.layout != torch.strided:
        return None
    storage = t.untyped_storage()
    # An empty storage has no address to share: a null pointer on one device, not the other.
    ptr = storage.data_ptr() if storage.nbytes() else None
    shares = next(
        (
            i
            for i, x in enumerate(inputs)
            if ptr is not None
            and x.layout == torch.strided
            and x.untyped_storage().data_ptr() == ptr
        ),
        None,
    )
    return (tuple(t.stride()), t.storage_offset(), shares)


@dataclasses.dataclass
class Verdict:
    outcome: str
    match: str = ""  # one of MATCHES, for passed and fallback samples
    detail: str = ""  # the exclusion's name, or why the sample failed


def exclusion(error):
    """The id of the deliberate exclusion (docs/limitations.md) that `error` reports, or None."""
    row = exclusions.raised_by(error)
    return row.id if row else None


def _first_line(error, limit=300):
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:limit] if lines else ''}"


# How the device is named in an error that is otherwise the CPU's, longest first: tensor
# reprs in the message name it (the CPU's name no device), as do device checks.
_DEVICE_NAMES = (
    (", device='neuron:0'", ""),
    ("device='neuron:0', ", ""),
    ("neuron:0", "cpu"),
    ("neuron", "cpu"),
    ("PrivateUse1", "CPU"),
)


def same_error(cpu, neuron):
    """Whether neuron raised the CPU's error: the same type and message, up to the device's
    name. Only the CPU's own checks qualify; a different error of the same type does not."""
    if type(cpu) is not type(neuron):
        return False
    message = str(neuron)
    for name, cpu_name in _DEVICE_NAMES:
        message = message.replace(name, cpu_name)
    return message == str(cpu)


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
        if same_error(cpu, neuron):
            return Verdict(tier, SAME_ERROR, _first_line(neuron))
        # A documented refusal, where the CPU ran or raised an error of its own.
        excluded = exclusion(neuron)
        if excluded:
            return Verdict(EXCLUDED, detail=excluded)
        on_cpu = "ran" if not isinstance(cpu, BaseException) else f"raised {_first_line(cpu)}"
        return Verdict(FAILED, detail=f"neuron raised {_first_line(neuron)}; the CPU {on_cpu}")
    if isinstance(cpu, BaseException):
        return Verdict(FAILED, detail=f"the CPU raised {_first_line(cpu)}; neuron did not")
    if neuron.devices - {"neuron"}:
        return Verdict(FAILED, detail=f"results on {sorted(neuron.devices)}, not only neuron")
    if neuron.types != cpu.types or len(neuron.results) != len(cpu.results):
        return Verdict(FAILED, detail=f"outputs {neuron.types}, the CPU's {cpu.types}")
    names = neuron.names or [f"result {i}" for i in range(len(neuron.results))]
    layouts = [
        f"{name}: {_layout_text(x)} on neuron, {_layout_text(y)} on the CPU"
        for name, x, y in zip(names, neuron.layouts, cpu.layouts)
        if x != y
    ]
    if layouts:
        return Verdict(FAILED, detail="layouts differ: " + "; ".join(layouts))
    pairs = list(zip(neuron.results, cpu.results))
    if all(identical(x, y) for x, y in pairs):
        return Verdict(tier, BIT_IDENTICAL)
    if all(x.dtype == y.dtype and x.shape == y.shape and close(x, y) for x, y in pairs):
        why = f"{narrowed} 64-bit values held at 32-bit precision" if narrowed else ""
        return Verdict(tier, WITHIN_TOLERANCE, why)
    differ = [name for name, (x, y) in zip(names, pairs) if not identical(x, y)]
    what = f"results differ from the CPU's ({', '.join(differ)})"
    return Verdict(FAILED, detail="; ".join(filter(None, (what, documented))))


def _layout_text(layout):
    if layout is None:
        return "not strided"
    strides, offset, shares = layout
    shared = "its own storage" if shares is None else f"the storage of input {shares}"
    return f"strides {strides}, storage offset {offset}, {shared}"
