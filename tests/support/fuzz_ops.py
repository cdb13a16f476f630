"""Differential fuzzing: random chains of ATen ops on a neuron tensor and on its CPU original.

A chain is Python source. Each line binds a new name ``t<k>`` to an expression over earlier
names, so the same text runs on both devices (``dev`` is "cpu" or "neuron"), and a divergent
chain is reported as the script that reproduces it. The catalogue ``OPS`` is data: a template
per op whose ``{fields}`` name the argument generators of ``Chain`` (``Chain.f_<field>``).
"""

import contextlib
import math
import os
import string
import warnings
from dataclasses import dataclass

import torch
from hypothesis import strategies as st

# Read once per process by the device too (csrc/aten/Policy.cpp).
NATIVE_64BIT = os.environ.get("TORCH_NEURONX_64BIT", "narrow") == "native"

FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
INTS = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
# Under the narrow policy float64 is rounded after every ATen op the device runs, and a composite
# op (logsumexp, norm, ...) runs several, so no CPU-side model reproduces it: leave it out.
DTYPES = tuple(d for d in FLOATS + INTS + (torch.bool,) if NATIVE_64BIT or d != torch.float64)
HALF = (torch.float16, torch.bfloat16)
INT32_RANGE = (-(2**31), 2**31 - 1)
BITS = {
    torch.float64: torch.int64,
    torch.float32: torch.int32,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.bool: torch.uint8,
}

# How Inductor's result compares with eager (the compiled fuzz only):
#   same:    data movement, comparisons, selection: bit-identical in every dtype;
#   rounded: one correctly rounded operation: bit-identical, except that a float16/bfloat16
#            result is kept in float32 inside a fused kernel, so its consumers see more bits;
#   approx:  Inductor reorders the float math (reductions, matmul) or uses other
#            approximations (transcendentals), so floats agree only to within rounding.
SAME, ROUNDED, APPROX = "same", "rounded", "approx"


@dataclass(frozen=True)
class Op:
    template: str
    group: str
    inductor: str = SAME
    compiles: bool = True  # traceable with fullgraph=True: no data-dependent output shapes


def _ops(group, inductor, *templates, compiles=True):
    return [Op(t, group, inductor, compiles) for t in templates]


UNARY_EXACT = (
    "abs neg sign sgn floor ceil round trunc frac relu bitwise_not logical_not isnan isinf "
    "isfinite isposinf isneginf signbit positive nan_to_num square sqrt reciprocal"
).split()
UNARY_APPROX = (
    "rsqrt exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh "
    "acosh atanh sigmoid erf erfc erfinv lgamma digamma i0 sinc deg2rad rad2deg"
).split()
# No Scalar overload: their second operand is always a tensor.
BINARY_TENSOR = "maximum minimum fmax fmin logical_and logical_or logical_xor".split()
BINARY_SAME = "eq ne lt le gt ge bitwise_and bitwise_or bitwise_xor copysign".split()
BINARY_ROUNDED = (
    "add sub mul remainder fmod floor_divide bitwise_left_shift bitwise_right_shift".split()
)
BINARY_APPROX = "div pow atan2 hypot xlogy nextafter".split()

OPS = (
    _ops(
        "unary",
        SAME,
        *[f"torch.{n}({{x}})" for n in UNARY_EXACT],
        "torch.clamp({x}, {lo}, {hi})",
        "torch.round({x}, decimals={decimals})",
        "torch.nan_to_num({x}, nan={scalar}, posinf={scalar2})",
        "torch.nn.functional.hardtanh({x})",
    )
    + _ops(
        "unary",
        APPROX,
        *[f"torch.{n}({{x}})" for n in UNARY_APPROX],
        "torch.nn.functional.gelu({x})",
        "torch.nn.functional.silu({x})",
        "torch.nn.functional.softplus({x})",
        "torch.softmax({x}, {dim})",
        "torch.log_softmax({x}, {dim})",
    )
    + _ops(
        "binary",
        SAME,
        *[f"torch.{n}({{x}}, {{operand}})" for n in BINARY_SAME],
        *[f"torch.{n}({{x}}, {{other}})" for n in BINARY_TENSOR],
        "torch.where({mask}, {x}, {operand})",
        "{x} == {operand}",
        "{x} < {operand}",
        "{x} & {operand}",
        "{x} | {operand}",
    )
    + _ops(
        "binary",
        ROUNDED,
        *[f"torch.{n}({{x}}, {{operand}})" for n in BINARY_ROUNDED],
        "{x} + {operand}",
        "{operand} - {x}",
        "{x} * {operand}",
        "{x} // {operand}",
        "{x} % {operand}",
        "torch.div({x}, {operand}, rounding_mode={rounding})",
        "torch.addcmul({x}, {operand}, {operand2})",
        "torch.add({x}, {operand}, alpha={scalar})",
    )
    + _ops(
        "binary",
        APPROX,
        *[f"torch.{n}({{x}}, {{operand}})" for n in BINARY_APPROX],
        "{x} / {operand}",
        "{x} ** {operand}",
        "{operand} ** {x}",
        "torch.lerp({x}, {operand}, {operand2})",
    )
    + _ops(
        "reduce",
        APPROX,
        "{x}.sum()",
        "{x}.sum({dims}, keepdim={keepdim})",
        "{x}.sum({dim}, dtype={dtype})",
        "{x}.mean()",
        "{x}.mean({dims}, keepdim={keepdim})",
        "{x}.prod()",
        "{x}.prod({dim}, keepdim={keepdim})",
        "{x}.cumsum({dim})",
        "{x}.cumprod({dim})",
        "{x}.logcumsumexp({dim})",
        "{x}.nansum({dims})",
        "{x}.nanmean({dim})",
        "{x}.std({dims}, correction={correction})",
        "{x}.var({dim}, keepdim={keepdim})",
        "torch.logsumexp({x}, {dims})",
        "torch.linalg.vector_norm({x}, {ord}, {dims})",
        "torch.matmul({x}, {mat})",
    )
    + _ops(
        "reduce",
        SAME,
        "{x}.amax({dims}, keepdim={keepdim})",
        "{x}.amin({dims})",
        "{x}.max()",
        "{x}.min()",
        "torch.max({x}, {dim}, keepdim={keepdim}).values",
        "torch.min({x}, {dim}).indices",
        "{x}.argmax()",
        "{x}.argmin({dim}, {keepdim})",
        "{x}.cummax({dim}).indices",
        "{x}.cummin({dim}).values",
        "{x}.all()",
        "{x}.any({dim}, keepdim={keepdim})",
        "torch.count_nonzero({x}, {dims})",
        "torch.sort({x}, dim={dim}, descending={flag}, stable=True).values",
        "torch.sort({x}, dim={dim}, stable=True).indices",
        "torch.argsort({x}, dim={dim})",
        "torch.topk({x}, {k}, {dim}, largest={flag}).values",
        "torch.topk({x}, {k}, {dim}).indices",
        "torch.kthvalue({x}, {k}, {dim}).values",
        "{x}.median()",
        "torch.median({x}, {dim}).indices",
        "{x}.nanmedian({dim}).values",
        "torch.aminmax({x}, dim={dim}).max",
    )
    + _ops(
        "view",
        SAME,
        "{x}.transpose({dim}, {dim2})",
        "{x}.permute({perm})",
        "{x}.narrow({dim}, {start}, {length})",
        "{x}[{slices}]",
        "{x}.expand({expand})",
        "{x}.unsqueeze({newdim})",
        "{x}.squeeze()",
        "{x}.squeeze({dim})",
        "{x}.view({shape})",
        "{x}.reshape({shape})",
        "{x}.flatten()",
        "{x}.flatten({dim})",
        "{x}.diagonal({offset}, {dim}, {dim2})",
        "{x}.as_strided({strided})",
        "{x}.unfold({dim}, {size}, {step})",
        "{x}.movedim({dim}, {dim2})",
        "{x}.t()",
        "{x}.mT",
        "{x}.select({dim}, {i})",
        "{x}.unbind({dim})[{i}]",
        "{x}.chunk({chunks}, {dim})[-1]",
        "{x}.split({size}, {dim})[0]",
        "{x}.view({view_dtype})",
        "{x}.detach()",
        "{x}[..., None]",
        "torch.broadcast_tensors({x}, {other})[0]",
    )
    + _ops(
        "copy",
        SAME,
        "{x}.clone()",
        "{x}.contiguous()",
        "torch.empty_like({x}).fill_({scalar})",
        "torch.zeros_like({x})",
        "torch.ones_like({x}, dtype={dtype})",
        "torch.full_like({x}, {scalar})",
        "{x}.new_zeros({shape})",
        "{x}.new_full({shape}, {scalar})",
        "torch.empty_like({x}).copy_({x})",
        "torch.empty_strided({x}.shape, {x}.stride(), dtype={x}.dtype, device={x}.device)"
        ".copy_({x})",
        "{x}.to({dtype})",
        "{x}.to({dtype}, copy=True)",
        "{x}.type({dtype})",
        "{x}.flip({dims})",
        "{x}.roll({shifts}, {dim})",
        "{x}.repeat({repeats})",
        "{x}.tile({repeats})",
        "{x}.repeat_interleave({chunks}, {dim})",
        "{x}.tril({offset})",
        "{x}.triu({offset})",
        "torch.cat([{x}, {same}], {dim})",
        "torch.stack([{x}, {same}], {dim})",
        "torch.nn.functional.pad({x}, {pad}, value={scalar})",
    )
    + _ops("copy", SAME, "{x}.to('cpu', copy=True).to(dev, copy=True)", compiles=False)
    + _ops(
        "inplace",
        ROUNDED,
        "{x}.add_({operand})",
        "{x}.sub_({operand}, alpha={scalar})",
        "{x}.mul_({operand})",
        "{x}.floor_divide_({operand})",
    )
    + _ops(
        "inplace",
        APPROX,
        "{x}.div_({operand})",
        "{x}.exp_()",
        "{x}.pow_({scalar})",
        # Accumulation sums repeated indices in an order Inductor may change.
        "{x}.index_add_({dim}, {index1d}, {isrc})",
        "{x}.scatter_add_({dim}, {gindex}, {gsrc})",
        "{x}.index_put_(({index},), {src}, accumulate=True)",
    )
    + _ops(
        "inplace",
        SAME,
        "{x}.clamp_({lo}, {hi})",
        "{x}.clamp_min_({scalar})",
        "{x}.copy_({src})",
        "{x}.fill_({scalar})",
        "{x}.zero_()",
        "{x}.neg_()",
        "{x}.abs_()",
        "torch.relu_({x})",
        "{x}.floor_()",
        "{x}.masked_fill_({mask}, {scalar})",
        "{x}.index_copy_({dim}, {index1d}, {isrc})",
        "{x}.index_fill_({dim}, {index1d}, {scalar})",
        "{x}.scatter_({dim}, {gindex}, {gsrc})",
        "{x}.scatter_({dim}, {gindex}, {scalar})",
        "{x}.index_put_(({index},), {src})",
        "{x}[{slices}].copy_({src})",
        "{x}[{slices}].fill_({scalar})",
    )
    # Dynamo refuses in-place view ops on graph inputs.
    + _ops(
        "inplace",
        SAME,
        "{x}.transpose_({dim}, {dim2})",
        "{x}.unsqueeze_({newdim})",
        "{x}.squeeze_()",
        "{x}.t_()",
        "{x}.resize_({shape_le})",
        "{x}.as_strided_({strided})",
        compiles=False,
    )
    + _ops(
        "setitem",
        SAME,
        "{x}[{slices}] = {src}",
        "{x}[{index}] = {src}",
        "{x}[{slices}] = {scalar}",
        "{x}[{index}, {index2}] = {scalar}",
    )
    + _ops("setitem", SAME, "{x}[{mask_prefix}] = {scalar}", compiles=False)
    + _ops(
        "index",
        SAME,
        "{x}[{index}]",
        "{x}[:, {index2}]",
        "{x}[{index}, {index2}]",
        "{x}[{slices}][{index}]",
        "{x}.index_select({dim}, {index1d})",
        "torch.gather({x}, {dim}, {gindex})",
        "torch.take({x}, {flat_index})",
        "torch.take_along_dim({x}, {gindex}, {dim})",
        "{x}.masked_fill({mask}, {scalar})",
        "{x}.index_put(({index},), {src})",
        "{x}.scatter({dim}, {gindex}, {scalar})",
    )
    # Compiling masked_scatter for neuron fails (Inductor's decomposition asks about the
    # device; docs/limitations.md): eager only until that is fixed.
    + _ops("index", SAME, "{x}.masked_scatter({mask}, {same})", compiles=False)
    + _ops("index", APPROX, "{x}.index_put(({index},), {src}, accumulate=True)")
    + _ops(
        "index",
        SAME,
        "{x}[{mask_prefix}]",
        "{x}[{x} > 0]",
        "torch.masked_select({x}, {mask})",
        "torch.nonzero({x})",
        "torch.argwhere({x})",
        "torch.unique({x})",
        "torch.unique({x}, dim={dim}, return_counts=True)[1]",
        "{x}.index_put(({mask_prefix},), {src})",
        compiles=False,
    )
)

# Layouts are where a device most easily departs from CPU, so views, copies and in-place ops
# come up twice as often as the other groups.
GROUPS = sorted({op.group for op in OPS}) + ["view", "copy", "inplace"]


def _fields(template):
    return [f for _, f, _, _ in string.Formatter().parse(template) if f]


def _tensor_source(values, shape, dtype):
    body = f"torch.tensor([{', '.join(map(repr, values))}], dtype={dtype})"
    return body if tuple(shape) == (len(values),) else f"{body}.reshape({tuple(shape)})"


def _broadcasts(a, b):
    return all(p == q or p == 1 or q == 1 for p, q in zip(reversed(a), reversed(b)))


def _storage(t):
    s = t.untyped_storage()
    return s.data_ptr() if s.nbytes() else None


def describe(t):
    contiguous = "" if t.is_contiguous() else " non-contiguous"
    return (
        f"{str(t.dtype)[6:]} {tuple(t.shape)} stride {t.stride()} "
        f"offset {t.storage_offset()}{contiguous}"
    )


def bits(t):
    """The tensor's bits on the host, so NaN payloads, -0.0 and every value compare exactly."""
    t = t.detach().cpu().contiguous()
    return t.view(BITS[t.dtype]) if t.dtype in BITS else t


# A few units in the last place: what one reordered reduction or approximated function of
# exactly representable inputs can change.
TOLERANCE = {
    torch.float32: dict(rtol=1e-5, atol=1e-6),
    torch.float64: dict(rtol=1e-12, atol=1e-14),
    torch.float16: dict(rtol=4e-3, atol=1e-5),
    torch.bfloat16: dict(rtol=3e-2, atol=1e-5),
}


def difference(cpu, dev, exact=True):
    """What differs between a CPU result and its neuron counterpart, or None."""
    if dev.device.type != "neuron":
        return f"the neuron result is on {dev.device}"
    for what in ("dtype", "shape"):
        if getattr(cpu, what) != getattr(dev, what):
            return f"{what} {getattr(cpu, what)} on CPU, {getattr(dev, what)} on neuron"
    if cpu.stride() != dev.stride() or cpu.is_contiguous() != dev.is_contiguous():
        return f"strides {cpu.stride()} on CPU, {dev.stride()} on neuron"
    if cpu.storage_offset() != dev.storage_offset():
        return f"storage offset {cpu.storage_offset()} on CPU, {dev.storage_offset()} on neuron"
    if exact:
        same = torch.equal(bits(cpu), bits(dev))
    else:
        same = torch.allclose(
            dev.detach().cpu().double(),
            cpu.detach().double(),
            equal_nan=True,
            **TOLERANCE[cpu.dtype],
        )
    if not same:
        return f"values\n  CPU:    {cpu.detach().tolist()}\n  neuron: {dev.detach().cpu().tolist()}"
    return None


def aliasing(tensors):
    """For each tensor, the first of ``tensors`` sharing its storage (empty storages share none)."""
    ptrs = [_storage(t) for t in tensors]
    return [ptrs.index(p) if p is not None else i for i, p in enumerate(ptrs)]


class Divergence(AssertionError):
    pass


@dataclass
class Line:
    source: str
    is_input: bool
    raises: str = ""  # the exception both devices raised, which the chain then ignores
    note: str = ""  # the CPU result's layout right after the line ran

    def render(self):
        if self.raises:
            return f"try: {self.source}\nexcept {self.raises}: pass"
        return f"{self.source}  # {self.note}" if self.note else self.source


def _same_error(reference, got):
    """Whether ``reference`` is the error ``got`` is: its type and the name its message starts
    with (Dynamo's wrapped errors name the inner one), whatever device the message names."""
    head = lambda e: str(e).split(":")[0]  # noqa: E731
    return type(reference) is type(got) and head(reference) == head(got)


class Chain:
    """Draws a chain step by step and runs it on CPU, and eagerly on neuron as it goes."""

    def __init__(self, draw, compiled):
        self.draw, self.compiled = draw, compiled
        self.lines = []
        self.cpu = {}  # every live name -> its CPU tensor, the reference
        self.results = []  # names bound by op lines, which a compiled function returns
        self.settled = set()  # names whose in-graph value Inductor reproduces exactly
        self.narrowed = False  # the last line made an int64 beyond int32: the graph must raise
        self.ns = {dev: self._namespace(dev) for dev in ("cpu", "neuron")}

    @staticmethod
    def _namespace(dev):
        # Float literals print as nan and inf.
        return {"torch": torch, "nan": math.nan, "inf": math.inf, "dev": dev}

    def inputs(self):
        return [line.source.split(" = ")[0] for line in self.lines if line.is_input]

    def _run(self, source, dev):
        try:
            with _quiet():
                exec(compile(source, "<chain>", "exec"), self.ns[dev])
            return None
        except Exception as e:  # noqa: BLE001 - which exception is part of the result
            return e

    def fresh(self, shape, dtype, device="neuron", elements=None, layout=""):
        """A new input tensor of drawn values: its name, or its source when it stays on CPU.

        ``layout`` is source applied to it before (``.permute(1, 0)``) or after
        (``.to(dev).permute(1, 0)``) the move to the device.
        """
        n = math.prod(shape)
        values = self.draw(
            st.lists(self._element(dtype) if elements is None else elements, min_size=n, max_size=n)
        )
        source = _tensor_source(values, shape, dtype)
        if device == "cpu":
            return source
        name = f"t{len(self.lines)}"
        moved = layout if ".to(dev)" in layout else f"{layout}.to(dev)"
        line = Line(f"{name} = {source}{moved}", True)
        self.lines.append(line)
        # The compiled fuzz makes its neuron inputs when it calls the compiled function.
        devs = ["cpu"] if self.compiled else ["cpu", "neuron"]
        errors = [self._run(line.source, dev) for dev in devs]
        if any(errors):
            self.fail(", ".join(f"{dev} {_outcome(e)}" for dev, e in zip(devs, errors)))
        self.cpu[name] = self.ns["cpu"][name]
        line.note = describe(self.cpu[name])
        self.settled.add(name)
        if not self.compiled:
            self.check()  # the move must keep the layout
        return name

    def _element(self, dtype):
        if dtype == torch.bool:
            return st.booleans()
        small = st.integers(-8, 8)
        if dtype.is_floating_point:
            # Quarters make ties, exact sums and exact products; the compiled fuzz keeps to them
            # so that reordered float math still gives the same bits.
            special = st.sampled_from([math.nan, math.inf, -math.inf, -0.0])
            wide = (
                small.map(float)
                if self.compiled
                else st.floats(width=64 if dtype == torch.float64 else 32)
            )
            return st.one_of(small.map(lambda k: k / 4), wide, special)
        info = torch.iinfo(dtype)
        lo, hi = (info.min, info.max) if dtype != torch.int64 or NATIVE_64BIT else INT32_RANGE
        small = st.integers(max(lo, -8), min(hi, 8))
        # Inductor's C++ may treat signed overflow as undefined; eager wraps.
        return small if self.compiled else st.one_of(small, st.integers(lo, hi))

    def _operands(self):
        return [n for n in self.cpu if n in self.settled or not self.compiled]

    def step(self):
        """Draws one op line and runs it; False when the chain must end."""
        group = self.draw(st.sampled_from(GROUPS))
        op = self.draw(
            st.sampled_from(
                [o for o in OPS if o.group == group and (o.compiles or not self.compiled)]
            )
        )
        operands = self._operands()
        if not operands:
            return False
        # By position from the first input: deleting a later step keeps the choice.
        x = self.draw(st.sampled_from(operands))
        fields = {"x": x}
        for field in _fields(op.template):
            if field not in fields:
                fields[field] = getattr(self, f"f_{field}")(self.cpu[x], fields)
        source = op.template.format(**fields)
        name = x if op.group == "setitem" else f"t{len(self.lines)}"
        line = Line(source if op.group == "setitem" else f"{name} = {source}", False)
        self.lines.append(line)
        error = self._run(line.source, "cpu")
        if error is None:
            self.cpu[name] = self.ns["cpu"][name]
            line.note = describe(self.cpu[name])
            if op.group != "setitem":
                self.results.append(name)
        if self.compiled:
            if error is not None:
                self.lines.pop()
                return True
            self._settle(op, fields, name)
            self.narrowed = _narrowed(op, self.cpu[name])
            return not self.narrowed
        return self._compare_step(line, error, op, name, fields)

    def _settle(self, op, fields, name):
        args = [v for k, v in fields.items() if isinstance(v, str) and v in self.cpu]
        out = self.cpu[name]
        if all(a in self.settled for a in args) and (
            not out.is_floating_point()
            or op.inductor == SAME
            or (op.inductor == ROUNDED and out.dtype not in HALF)
        ):
            self.settled.add(name)
            return
        self.settled.discard(name)
        if op.group in ("inplace", "setitem"):
            ptr = _storage(out)  # the write shows through every alias
            if ptr is not None:
                self.settled -= {n for n, t in self.cpu.items() if _storage(t) == ptr}

    def _compare_step(self, line, cpu_error, op, name, fields):
        dev_error = self._run(line.source, "neuron")
        # The chain ends at the device's int32 check: the device has run the op by then.
        if cpu_error is None and _narrowed(op, self.cpu[name]):
            if not _int32_error(dev_error):
                self.fail(f"{NARROW_RULE}; neuron {_outcome(dev_error)}")
            return False
        if cpu_error is None and _refused_channels_last(op, self.cpu[name], dev_error):
            return False
        if cpu_error is None and _overlap_off_the_cpu(op, fields, self.cpu, dev_error):
            return False
        # Indexing assignment first makes a Python scalar a device tensor of x's dtype, which
        # the device checks even when no element is written, or the indices are wrong.
        if (
            op.group == "setitem"
            and _int32_error(dev_error)
            and _beyond_int32(fields.get("_scalar"))
        ):
            return False
        if type(cpu_error) is not type(dev_error):
            self.fail(f"CPU {_outcome(cpu_error)}, neuron {_outcome(dev_error)}")
        if cpu_error is not None:
            line.raises = type(cpu_error).__name__
        self.check()
        return True

    def check(self):
        why = self.mismatch(self.cpu, {n: self.ns["neuron"][n] for n in self.cpu})
        if why:
            self.fail(why)

    @staticmethod
    def mismatch(reference, got, settled=None):
        """How tensors ``got`` on neuron differ from CPU ``reference`` tensors, by name, or None.

        Values compare exactly, except those of names left out of ``settled`` when it is given.
        """
        names = list(reference)
        for n in names:
            why = difference(reference[n], got[n], settled is None or n in settled)
            if why:
                return f"{n}: {why}"
        ref_alias = aliasing([reference[n] for n in names])
        got_alias = aliasing([got[n] for n in names])
        if ref_alias != got_alias:
            return "storage sharing differs: " + ", ".join(
                f"{n} shares with {names[a]} on CPU, with {names[b]} on neuron"
                for n, a, b in zip(names, ref_alias, got_alias)
                if a != b
            )
        return None

    def fail(self, why):
        raise Divergence(f"neuron differs from CPU: {why}\n\n{self.script()}")

    def function_source(self):
        body = [line.source for line in self.lines if not line.is_input] or ["pass"]
        return "\n".join(
            [
                f"def f({', '.join(self.inputs())}):",
                *("    " + b for b in body),
                f"    return ({''.join(r + ', ' for r in self.results)})",
            ]
        )

    def run_compiled(self):
        """Compares the chain compiled on neuron with the chain run eagerly on CPU.

        Where they differ, Inductor compiling the chain for the CPU must not differ the same way
        (or fail to compile it too): the neuron backend is Inductor's CPU code generator, so that
        is upstream behaviour. So is an error that Dynamo raises for the chain on the meta device
        too: Dynamo traces 0-dim CPU tensors as scalars, which on every other device (CUDA's
        too) are tensors, and the meta device stands in for those.
        """
        if not self.results:
            return
        got = self._call("neuron", compiled=True)
        why = self._judge(self._call("cpu", compiled=False), got, self.settled)
        if not why:
            return
        inductor = self._call("cpu", compiled=True)
        if isinstance(inductor, Exception) and isinstance(got, Exception):
            return  # torch.compile fails for the CPU too, if elsewhere in the stack
        if isinstance(got, Exception) and _same_error(self._call("meta", compiled=True), got):
            return
        upstream = self._judge(inductor, got)
        if upstream:
            self.fail(f"{why}\n(against Inductor compiling it for the CPU: {upstream})")

    def _call(self, dev, compiled):
        """The chain's function on fresh inputs: its inputs and results by name, or the error."""
        ns = self._namespace(dev)
        for line in self.lines:
            if line.is_input:
                exec(line.source, ns)
        exec(self.function_source(), ns)
        args = [ns[n] for n in self.inputs()]
        f = ns["f"]
        if compiled:
            backend = {"neuron": "neuron", "cpu": "inductor", "meta": "eager"}[dev]
            f = torch.compile(f, backend=backend, fullgraph=True)
        try:
            with _quiet():
                return dict(zip(self.inputs() + self.results, args + list(f(*args))))
        except Exception as e:  # noqa: BLE001
            return e

    def _judge(self, reference, got, settled=None):
        if self.narrowed:
            return None if _int32_error(got) else f"{NARROW_RULE}; neuron {_outcome(got)}"
        if isinstance(reference, Exception) or isinstance(got, Exception):
            if type(reference) is type(got):
                return None
            return f"CPU {_outcome(reference)}, neuron {_outcome(got)}"
        return self.mismatch(reference, got, settled)

    def script(self):
        native = "TORCH_NEURONX_64BIT=native " if NATIVE_64BIT else ""
        head = [
            f'# {native}python: run with dev = "cpu" and dev = "neuron", then compare',
            "import torch",
            "from math import inf, nan",
            'dev = "neuron"',
        ]
        if self.compiled:
            call = "(" + ", ".join(self.inputs()) + ")"
            return "\n".join(
                head
                + [line.render() for line in self.lines if line.is_input]
                + [
                    self.function_source(),
                    f'out = f{call} if dev == "cpu" else torch.compile(f, '
                    f'backend="neuron", fullgraph=True){call}',
                ]
            )
        return "\n".join(head + [line.render() for line in self.lines])

    # -- argument generators, one per template field (those of numbers return ints) -------

    def _pick(self, preferred, others):
        """``preferred`` most of the time (and when shrinking), otherwise any of ``others``."""
        if self.draw(st.integers(0, 3)) == 3:
            return self.draw(st.sampled_from(others))
        return preferred

    def _dim(self, x, fields):
        """The dimension an op works on, clamped into range (0 for a 0-dim tensor)."""
        d = fields.get("dim", 0)
        return d % x.dim() if x.dim() and -x.dim() <= d < x.dim() else 0

    def _size(self, x, fields):
        return x.shape[self._dim(x, fields)] if x.dim() else 1

    def f_dim(self, x, fields):
        n = max(x.dim(), 1)
        if self.draw(st.integers(0, 15)) == 15:
            return self.draw(st.sampled_from([n, -n - 1]))  # out of range, rarely
        return self.draw(st.integers(-n, n - 1))

    f_dim2 = f_dim

    def f_newdim(self, x, fields):
        return self.draw(st.integers(-x.dim() - 1, x.dim()))

    def f_dims(self, x, fields):
        n = max(x.dim(), 1)
        dims = self.draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n))
        return repr(tuple(d - n if self.draw(st.booleans()) else d for d in dims))

    def f_perm(self, x, fields):
        return repr(tuple(self.draw(st.permutations(range(x.dim())))))

    def f_keepdim(self, x, fields):
        return repr(self.draw(st.booleans()))

    f_flag = f_keepdim

    def f_correction(self, x, fields):
        return repr(self.draw(st.integers(0, 2)))

    def f_rounding(self, x, fields):
        return repr(self.draw(st.sampled_from(["floor", "trunc", None])))

    def f_decimals(self, x, fields):
        return repr(self.draw(st.integers(-1, 3)))

    def f_ord(self, x, fields):
        return repr(self.draw(st.sampled_from([2, 1, 0, 3, math.inf, -math.inf])))

    def f_scalar(self, x, fields):
        if x.dtype == torch.bool:
            own = st.booleans()
        elif x.is_floating_point():
            own = st.integers(-8, 8).map(lambda k: k / 4) | st.sampled_from(
                [math.nan, math.inf, -0.0, 1e-3, 1e30]
            )
        else:
            own = st.integers(-8, 8)
        other = st.sampled_from([2**31, 2**40, -(2**63), 3.5, True, math.nan, 1e-40])
        fields["_scalar"] = self.draw(other if self.draw(st.integers(0, 5)) == 5 else own)
        return repr(fields["_scalar"])

    f_scalar2 = f_scalar

    def f_lo(self, x, fields):
        return "None" if self.draw(st.integers(0, 3)) == 0 else self.f_scalar(x, fields)

    f_hi = f_lo

    def _broadcastable(self, shape, lead=True):
        """A shape that broadcasts with ``shape``: a suffix of it with some sizes made 1."""
        keep = self.draw(st.integers(0, len(shape)))
        out = [1 if self.draw(st.integers(0, 3)) == 0 else s for s in shape[len(shape) - keep :]]
        extra = self.draw(st.integers(1, 3)) if lead and self.draw(st.integers(0, 4)) == 4 else None
        return tuple(([extra] if extra else []) + out)

    def _pool_tensor(self, fits):
        names = [n for n in self._operands() if fits(self.cpu[n])]
        return self.draw(st.sampled_from(names)) if names else None

    def f_operand(self, x, fields):
        if self.draw(st.integers(0, 9)) < 4:
            return self.f_scalar(x, fields)
        return self.f_other(x, fields)

    f_operand2 = f_operand

    def f_other(self, x, fields):
        """A tensor that broadcasts with ``x``."""
        kind = self.draw(st.integers(0, 5))
        if kind == 5:
            # A 0-dim CPU tensor may meet a neuron tensor, as on CUDA.
            return self.fresh((), self._pick(x.dtype, DTYPES), device="cpu")
        if kind == 4:
            name = self._pool_tensor(lambda t: _broadcasts(t.shape, x.shape))
            if name is not None:
                return name
        return self.fresh(self._broadcastable(tuple(x.shape)), self._pick(x.dtype, DTYPES))

    def _target(self, x, fields):
        """The shape written by an op that takes ``src``: x, or the part of it indexed."""
        key = next((fields[k] for k in ("slices", "index", "mask_prefix") if k in fields), None)
        if key is None:
            return tuple(x.shape)
        try:
            return tuple(eval(f"_x[{key}]", {**self.ns["cpu"], "_x": x}).shape)
        except Exception:  # noqa: BLE001 - the op itself will raise; any src will do
            return ()

    def f_src(self, x, fields):
        target = self._target(x, fields)
        if self.draw(st.integers(0, 3)) == 3:
            name = self._pool_tensor(
                lambda t: t.dim() <= len(target) and _broadcasts(t.shape, target)
            )
            if name is not None:
                return name
        return self.fresh(self._broadcastable(target, lead=False), self._pick(x.dtype, DTYPES))

    def f_same(self, x, fields):
        return self.fresh(tuple(x.shape), self._pick(x.dtype, DTYPES))

    def f_mask(self, x, fields):
        return self.fresh(self._broadcastable(tuple(x.shape)), torch.bool)

    def f_mask_prefix(self, x, fields):
        return self.fresh(
            tuple(x.shape[: self.draw(st.integers(min(1, x.dim()), x.dim()))]), torch.bool
        )

    def _index(self, size, shape, nonnegative=False, host=False):
        """Integer indices into a dimension of ``size``: in range, with rare exceptions."""
        low = 0 if nonnegative else -size
        bound = st.integers(low, size - 1) if size else st.just(0)
        if self.draw(st.integers(0, 15)) == 15:
            bound = st.integers(low - 2, size + 2)
        dtype = self._pick(torch.int64, [torch.int32])
        # Advanced indexing takes CPU indices into a device tensor, as on CUDA (``host``);
        # index_select, gather and the like check that all tensors share a device.
        device = "cpu" if host and self.draw(st.integers(0, 3)) == 3 else "neuron"
        return self.fresh(shape, dtype, device, bound)

    def _index_shape(self):
        return self.draw(st.sampled_from([(2,), (3,), (1,), (0,), (2, 2), ()]))

    def f_index(self, x, fields):
        return self._index(x.shape[0] if x.dim() else 1, self._index_shape(), host=True)

    def f_index2(self, x, fields):
        return self._index(x.shape[1] if x.dim() > 1 else 1, self._index_shape(), host=True)

    def f_index1d(self, x, fields):
        fields["_n"] = self.draw(st.integers(0, 4))
        return self._index(self._size(x, fields), (fields["_n"],))

    def f_flat_index(self, x, fields):
        return self._index(x.numel(), self._index_shape())

    def f_gindex(self, x, fields):
        shape = [self.draw(st.integers(0, s)) for s in x.shape]
        if shape:
            shape[self._dim(x, fields)] = self.draw(st.integers(0, 4))
        fields["_shape"] = tuple(shape)
        return self._index(self._size(x, fields), tuple(shape), nonnegative=True)

    def f_gsrc(self, x, fields):
        return self.fresh(fields["_shape"], self._pick(x.dtype, DTYPES))

    def f_isrc(self, x, fields):
        shape = list(x.shape) or [1]
        shape[self._dim(x, fields)] = fields["_n"]
        return self.fresh(tuple(shape), self._pick(x.dtype, DTYPES))

    def f_slices(self, x, fields):
        items = []
        for size in x.shape[: self.draw(st.integers(0, x.dim()))]:
            kind = self.draw(st.integers(0, 4))
            if kind == 0:
                items.append(":")
            elif kind == 1 and size:
                items.append(str(self.draw(st.integers(-size, size - 1))))
            else:
                lo, hi = (self.draw(st.integers(-size - 1, size + 1)) for _ in range(2))
                items.append(f"{lo}:{hi}:{self.draw(st.integers(1, 3))}")
            if self.draw(st.integers(0, 7)) == 7:
                items.append("None")
        if not items or self.draw(st.integers(0, 3)) == 3:
            items.append("...")
        return ", ".join(items)

    def f_start(self, x, fields):
        size = self._size(x, fields)
        return self.draw(st.integers(-size, size))

    def f_length(self, x, fields):
        size = self._size(x, fields)
        return self.draw(st.integers(0, size - fields["start"] % size if size else 0))

    def f_i(self, x, fields):
        size = self._size(x, fields)
        return self.draw(st.integers(-size, size - 1) if size else st.just(0))

    def f_size(self, x, fields):
        return self.draw(st.integers(0, self._size(x, fields) + 1))

    def f_step(self, x, fields):
        return self.draw(st.integers(1, 3))

    def f_k(self, x, fields):
        return self.draw(st.integers(0, self._size(x, fields)))

    def f_chunks(self, x, fields):
        return self.draw(st.integers(1, 4))

    def f_offset(self, x, fields):
        return self.draw(st.integers(-2, 2))

    def f_shifts(self, x, fields):
        return self.draw(st.integers(-4, 4))

    def f_shape(self, x, fields):
        """A shape with the same number of elements, perhaps with a -1."""
        n, dims = x.numel(), []
        while n > 1 and len(dims) < 3:
            factor = self.draw(st.sampled_from([f for f in range(2, n + 1) if n % f == 0]))
            dims.append(factor)
            n //= factor
        dims = list(self.draw(st.permutations(dims + [1] * self.draw(st.integers(0, 1)))))
        if x.numel() == 0:
            dims = self.draw(st.sampled_from([[0], [0, 3], [2, 0]]))
        elif dims and self.draw(st.integers(0, 3)) == 3:
            dims[self.draw(st.integers(0, len(dims) - 1))] = -1
        return repr(tuple(dims))

    def f_shape_le(self, x, fields):
        # Growing would expose uninitialized memory, which differs between any two allocations.
        room = x.untyped_storage().nbytes() // x.element_size() - x.storage_offset()
        n = self.draw(st.integers(0, max(room, 0)))
        return repr((n,) if self.draw(st.booleans()) else (1, n))

    def f_expand(self, x, fields):
        shape = [
            self.draw(st.integers(0, 3)) if s == 1 else self.draw(st.sampled_from([s, -1]))
            for s in x.shape
        ]
        return repr(tuple(self.draw(st.lists(st.integers(1, 3), max_size=2)) + shape))

    def f_strided(self, x, fields):
        storage = x.untyped_storage().nbytes() // x.element_size()
        sizes = self.draw(st.lists(st.integers(0, 4), max_size=3))
        strides = [self.draw(st.integers(0, 5)) for _ in sizes]
        reach = sum((n - 1) * s for n, s in zip(sizes, strides)) if all(sizes) else 0
        offset = self.draw(st.integers(0, max(storage - 1 - reach, 0)))
        return f"{tuple(sizes)}, {tuple(strides)}, {offset}"

    def f_repeats(self, x, fields):
        n = self.draw(st.integers(x.dim(), x.dim() + 1))
        return repr(tuple(self.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))))

    def f_pad(self, x, fields):
        n = 2 * self.draw(st.integers(1, max(min(x.dim(), 3), 1)))
        return repr(tuple(self.draw(st.lists(st.integers(-1, 2), min_size=n, max_size=n))))

    def f_dtype(self, x, fields):
        return str(self.draw(st.sampled_from(DTYPES)))

    def f_view_dtype(self, x, fields):
        # Viewing as bool could make bools of bytes other than 0 and 1; viewing as int64 under
        # the narrow policy would make int64 values beyond int32 without any op to check them.
        return str(
            self.draw(
                st.sampled_from(
                    [d for d in DTYPES if d != torch.bool and (NATIVE_64BIT or d != torch.int64)]
                )
            )
        )

    def f_mat(self, x, fields):
        inner = x.shape[-1] if x.dim() else 1
        shape = self.draw(st.sampled_from([(inner,), (inner, 2), (inner, 3), (2, inner, 1)]))
        return self.fresh(shape, self._pick(x.dtype, DTYPES))


NARROW_RULE = "an int64 result beyond int32 must raise under TORCH_NEURONX_64BIT=narrow"


def _narrowed(op, out):
    """Whether the narrow policy refuses ``out``: views show values checked when written."""
    return (
        not NATIVE_64BIT
        and op.group != "view"
        and out.dtype == torch.int64
        and out.numel()
        and (_beyond_int32(out.min().item()) or _beyond_int32(out.max().item()))
    )


def _refused_channels_last(op, out, error):
    """Whether ``error`` is the device's documented refusal of channels_last (docs/limitations.md)
    by an op that asked for it: constant ``F.pad`` allocates its result in its input's suggested
    memory format, channels_last where the CPU's result ``out`` shows it."""
    layout = {4: torch.channels_last, 5: torch.channels_last_3d}.get(out.dim())
    return (
        "functional.pad" in op.template
        and isinstance(error, RuntimeError)
        and "only support contiguous or preserve memory format" in str(error)
        and layout is not None
        and out.is_contiguous(memory_format=layout)
    )


def _overlap_off_the_cpu(op, fields, cpu, error):
    """Whether ``error`` is the overlap check that indexing assignment meets on every device but
    the CPU: ATen's ``copy_to`` fills from a 0-d CPU source, and expands and copies any other,
    which TensorIterator refuses where the source overlaps the destination (as on CUDA)."""
    src = cpu.get(fields.get("src"))
    return (
        op.group == "setitem"
        and isinstance(error, RuntimeError)
        and "refer to a single memory location" in str(error)
        and src is not None
        and src.dim() == 0
        and _storage(src) is not None
        and _storage(src) == _storage(cpu[fields["x"]])
    )


def _beyond_int32(value):
    return type(value) is int and not INT32_RANGE[0] <= value <= INT32_RANGE[1]


def _int32_error(error):
    return isinstance(error, RuntimeError) and "does not fit in int32" in str(error)


@contextlib.contextmanager
def _quiet():
    # PyTorch warns about drawn arguments (std() of one element, .mT of a 0-dim tensor).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _outcome(error):
    if isinstance(error, Exception):
        return f"raised {type(error).__name__}: {str(error)[:3000]}"
    return "succeeded"


def start(draw, compiled):
    """A chain over one or two input tensors of up to 4 dims and 48 elements.

    Half of them start permuted: dense but not contiguous, moved so (which must keep the
    strides) or permuted once on the device.
    """
    chain = Chain(draw, compiled)
    for _ in range(draw(st.integers(1, 2))):
        shape = []
        for _ in range(draw(st.integers(0, 4))):
            shape.append(draw(st.sampled_from([1, 2, 3, 4, 5, 2, 3, 0])))
            if math.prod(shape) > 48:
                shape[-1] = 1
        layout = ""
        if len(shape) > 1:
            perm = draw(st.permutations(range(len(shape))))
            layout = draw(
                st.sampled_from(
                    ["", f".permute({tuple(perm)})", f".to(dev).permute({tuple(perm)})"]
                )
            )
        chain.fresh(tuple(shape), chain._pick(torch.float32, DTYPES), layout=layout)
    return chain


def run_eager(draw, max_steps):
    chain = start(draw, compiled=False)
    for _ in range(draw(st.integers(1, max_steps))):
        if not chain.step():
            return


def run_compiled(draw, max_steps):
    chain = start(draw, compiled=True)
    for _ in range(draw(st.integers(1, max_steps))):
        if not chain.step():
            break
    chain.run_compiled()
