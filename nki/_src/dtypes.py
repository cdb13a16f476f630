"""NKI data types: string-valued names (``str(nl.float32) == "float32"``, as in NKI), each
carrying the torch dtype that stores its values on the host.

The 4x packed MX types (``float8_e4m3fn_x4``, ``float8_e5m2_x4``: 32 bits; ``float4_e2m1fn_x4``:
16 bits) are stored as raw int32/int16 words; element ``j`` of a word sits in bits
``[j*b, (j+1)*b)`` (b = 8 or 4), i.e. little-endian order as on the device.
"""

import math

import numpy as np
import torch

from .errors import fail


class DType:
    """An NKI dtype: its NKI name, the torch dtype storing it and (x4 types) the element format.

    Equal to its name (``str(nl.float32) == "float32"``) and to the numpy dtype of that name;
    equal to a torch dtype when it is the NKI type that torch dtype maps to (``nl.float32 ==
    torch.float32``, but ``nl.tfloat32`` is not).  ``.dtype`` is the numpy dtype holding its
    values, so ``np.zeros(shape, dtype=nl.bfloat16)`` works (bf16/fp8 need ml_dtypes).
    """

    __slots__ = ("_name", "torch", "element", "packed", "itemsize", "is_floating_point")

    def __init__(self, name, storage, element=None):
        self._name = name
        self.torch = storage
        self.element = element  # x4 types: the Element format of each packed value
        # Plain attributes, not properties: every instruction asks them of its operands.
        self.packed = element is not None  # a 4x packed MX type
        self.itemsize = storage.itemsize
        self.is_floating_point = self.packed or storage.is_floating_point

    @property
    def name(self):
        return self._name

    @property
    def __name__(self):
        # Named like the numpy scalar types, so tools that label values by ``__name__`` (e.g.
        # pytest parameter ids) show "bfloat16" rather than a position.
        return self._name

    @property
    def dtype(self):
        """The numpy dtype of host arrays of this type (x4: raw words tagged with metadata)."""
        if self.packed:
            # A record of the word's two halves, the low one named after the type (so str() of
            # an array's dtype names it).  With two fields numpy refuses (TypeError) to convert
            # it to a number, and harnesses written for AWS's x4 dtypes unpack on that error; a
            # one-field record converts each packed word to one value, so wrong data could pass
            # a tolerance check.
            half = np.uint16 if self.itemsize == 4 else np.uint8
            return np.dtype([(self._name, half), ("hi", half)], metadata={"nki_dtype": self._name})
        if self is float8_e4m3:
            import ml_dtypes

            return np.dtype(ml_dtypes.float8_e4m3)
        try:
            return np.dtype(torch.empty(0, dtype=self.torch).numpy().dtype)
        except TypeError:
            import ml_dtypes

            return np.dtype(getattr(ml_dtypes, str(self.torch).removeprefix("torch.")))

    def __str__(self):
        return self._name

    __repr__ = __str__

    def __format__(self, spec):
        return format(self._name, spec)

    def __eq__(self, other):
        if other is self:
            return True
        if other is None:
            return False
        if isinstance(other, DType):
            return other._name == self._name
        if isinstance(other, str):
            return other == self._name
        if isinstance(other, torch.dtype):
            return _FROM_TORCH.get(other) is self
        found = from_numpy(other)
        return NotImplemented if found is None else found is self

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        # An x4 type hashes as its numpy dtype, which it equals: a dict keyed by x4 types is
        # then also found by the dtype of a numpy x4 array.
        return hash(self.dtype) if self.packed else hash(self._name)

    def __reduce__(self):
        return (by_name, (self._name,))


class Element:
    """The format of the values packed four to a word in an x4 type."""

    __slots__ = ("name", "bits", "max_exp", "max_normal", "codes", "by_byte")

    def __init__(self, name, bits, max_exp, max_normal, codes):
        self.name = name
        self.bits = bits
        self.max_exp = max_exp  # largest unbiased exponent of a normal value
        self.max_normal = max_normal
        self.codes = codes  # float32 value of every code, indexed by the code
        # The values held by each byte of a word, low bits first: [256, 8 // bits].
        byte = torch.arange(256)
        self.by_byte = torch.stack(
            [codes[(byte >> shift) & ((1 << bits) - 1)] for shift in range(0, 8, bits)], dim=1
        )

    def encode(self, values):
        """Codes of float32 ``values``, rounded to nearest even (as the Vector engine casts)."""
        if self.bits == 8:
            return values.to(_FP8[self.name]).view(torch.uint8).to(torch.int64)
        # fp4 e2m1: no inf/NaN; magnitudes saturate at 6, NaN gives code 0.  Round to the
        # nearest magnitude, ties to the even code: a magnitude's code is the number of
        # midpoints between neighbouring codes below it, counting a midpoint it equals when the
        # code above that midpoint is even (odd midpoint numbers).  Two searches over the
        # midpoints, not a distance to every code: weight tensors have ~1e8 values.
        mags = self.codes[:8]
        midpoints = (mags[:-1] + mags[1:]) / 2
        a = values.abs()
        code = torch.bucketize(a, midpoints[0::2].contiguous(), out_int32=True)
        code += torch.bucketize(a, midpoints[1::2].contiguous(), out_int32=True, right=True)
        code.masked_fill_(torch.isnan(a), 0)
        return code.to(torch.int64) | (torch.signbit(values).to(torch.int64) << 3)


def _fp8_codes(dtype):
    return torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype).to(torch.float32)


def _fp4_codes():
    mags = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    return torch.cat([mags, -mags])


_FP8 = {"e4m3fn": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
E4M3FN = Element("e4m3fn", 8, 8, 448.0, _fp8_codes(torch.float8_e4m3fn))
E5M2 = Element("e5m2", 8, 15, 57344.0, _fp8_codes(torch.float8_e5m2))
E2M1 = Element("e2m1", 4, 2, 6.0, _fp4_codes())

bool_ = DType("bool", torch.bool)
int8 = DType("int8", torch.int8)
int16 = DType("int16", torch.int16)
int32 = DType("int32", torch.int32)
uint8 = DType("uint8", torch.uint8)
uint16 = DType("uint16", torch.uint16)
uint32 = DType("uint32", torch.uint32)
float16 = DType("float16", torch.float16)
bfloat16 = DType("bfloat16", torch.bfloat16)
float32 = DType("float32", torch.float32)
# tfloat32 has no host type; it is stored and computed as float32.
tfloat32 = DType("tfloat32", torch.float32)
# float8_e4m3 is the IEEE-style e4m3 (largest finite 240, +-inf, NaNs; ml_dtypes.float8_e4m3),
# where float8_e4m3fn is the "extended range, no inf" one.  It has no torch type, but every
# finite e4m3 value has e4m3fn's code, so e4m3fn storage holds its codes bit for bit; ``stored``
# and ``stored_values`` translate the codes e4m3fn spends on 256..448, which in e4m3 are the
# infinities (0x78, 0xF8) and NaNs.
float8_e4m3 = DType("float8_e4m3", torch.float8_e4m3fn)
float8_e4m3fn = DType("float8_e4m3fn", torch.float8_e4m3fn)
float8_e5m2 = DType("float8_e5m2", torch.float8_e5m2)
float8_e8m0fnu = DType("float8_e8m0fnu", torch.float8_e8m0fnu)
float8_e4m3fn_x4 = DType("float8_e4m3fn_x4", torch.int32, E4M3FN)
float8_e5m2_x4 = DType("float8_e5m2_x4", torch.int32, E5M2)
float4_e2m1fn_x4 = DType("float4_e2m1fn_x4", torch.int16, E2M1)
# HBM tensors handed in from the host may also use these wider types.
float64 = DType("float64", torch.float64)
int64 = DType("int64", torch.int64)

SUPPORTED = (
    bool_,
    int8,
    int16,
    int32,
    uint8,
    uint16,
    uint32,
    float16,
    bfloat16,
    float32,
    tfloat32,
    float8_e4m3,
    float8_e4m3fn,
    float8_e5m2,
    float8_e8m0fnu,
    float8_e4m3fn_x4,
    float8_e5m2_x4,
    float4_e2m1fn_x4,
)
HOST_ONLY = (float64, int64)
PACKED = (float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4)

_BY_NAME = {dt.name: dt for dt in SUPPORTED + HOST_ONLY}
_BY_NAME.update({"bool_": bool_, "float8e4": float8_e4m3, "float8e5": float8_e5m2})
# The NKI type each torch dtype holds (the first listed wins: float32, not tfloat32; a
# float8_e4m3fn tensor is float8_e4m3fn, float8_e4m3 only borrows its storage).
_FROM_TORCH = {}
for _dt in SUPPORTED + HOST_ONLY:
    if not _dt.packed and _dt is not float8_e4m3:
        _FROM_TORCH.setdefault(_dt.torch, _dt)


def by_name(name):
    """The NKI dtype called ``name``."""
    return _BY_NAME[name]


def from_torch(dtype):
    """The NKI dtype a torch dtype stores, or None."""
    return _FROM_TORCH.get(dtype)


def from_numpy(dtype):
    """The NKI dtype of a numpy dtype (or scalar type), or None if it has none.

    x4 arrays are numpy uint32/uint16 words (or records of them) whose dtype carries
    ``metadata={"nki_dtype": name}``, whose first field is named after the x4 type, or whose
    dtype is named after it (as extension-dtype packages name them).
    """
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        return None
    meta = np_dtype.metadata or {}
    fields = np_dtype.names or ()
    name = meta.get("nki_dtype") or (fields[0] if fields else np_dtype.name)
    found = _BY_NAME.get(name)
    if found is not None and found.packed and np_dtype.itemsize != found.itemsize:
        return None
    return found


def normalize(dtype, op="dtype") -> DType:
    """Map an NKI, torch, numpy or string dtype (or float/int/bool) to its NKI DType."""
    if isinstance(dtype, DType):
        result = dtype
    elif isinstance(dtype, str):
        result = _BY_NAME.get(dtype.removeprefix("torch."))
    elif isinstance(dtype, torch.dtype):
        result = _FROM_TORCH.get(dtype)
    elif dtype is float:
        result = float32
    elif dtype is int:
        result = int32
    elif dtype is bool:
        result = bool_
    else:
        result = from_numpy(dtype)
    if result is None:
        fail(op, f"unsupported dtype {dtype!r}")
    return result


def require_on_chip_dtype(dtype, op):
    """Reject host-only dtypes (float64/int64) for on-chip tensors."""
    if dtype in HOST_ONLY:
        fail(op, f"dtype {dtype} is not supported on chip")


def require_unpacked(t, op, label="operand"):
    """x4 tiles hold packed codes: only MX instructions, DMA and copies may use them."""
    if t.dtype.packed:
        fail(
            op,
            f"{label} has packed MX dtype {t.dtype}; only nc_matmul_mx, quantize_mx, DMA and "
            "same-dtype copies accept x4 tiles",
        )


def is_float(dtype):
    """True for floating point dtypes."""
    return dtype.is_floating_point


def promote(*dtypes):
    """The result dtype of an elementwise op: the highest-precision input dtype."""
    if all(dt is dtypes[0] for dt in dtypes):
        return dtypes[0]
    result = dtypes[0].torch
    for dt in dtypes[1:]:
        result = torch.promote_types(result, dt.torch)
    return from_torch(result)


def sentinel(dtype):
    """The fill value for fresh allocations: NaN for floats, 4 for integers (as AWS's simulator).

    x4 words are filled with NaN codes (fp8) or the code of -6 (fp4, which has no NaN)."""
    if dtype is bool_:
        return True
    if dtype.packed:
        word = 0x7F7F7F7F if dtype.element.bits == 8 else 0xFFFF
        return torch.tensor(word, dtype=torch.int64).to(dtype.torch).item()
    return float("nan") if dtype.torch.is_floating_point else 4


# Magnitudes from here up round to e4m3's infinity (the midpoint of 240 and 256 rounds to even,
# 256); e4m3fn storage holds that infinity as its code for 256.
_E4M3_OVERFLOW = 248.0
_E4M3_INF_STORED = 256.0


def stored(values, dtype):
    """Float ``values`` in ``dtype``'s storage type, rounded to nearest even (float8_e4m3:
    overflowing to +-inf, as ml_dtypes rounds it).  Values already in the storage type are
    codes and are kept as they are."""
    if values.dtype == dtype.torch:
        return values
    if dtype is float8_e4m3:
        inf = torch.full_like(values, _E4M3_INF_STORED).copysign(values)
        values = torch.where(values.abs() >= _E4M3_OVERFLOW, inf, values)
    return values.to(dtype.torch)


def stored_values(host, dtype, to=torch.float32):
    """The values held in storage ``host`` of NKI ``dtype``, as torch dtype ``to``."""
    values = host if host.dtype is to else host.to(to)
    if dtype is float8_e4m3:
        magnitude = values.abs()
        values = torch.where(magnitude == _E4M3_INF_STORED, values * math.inf, values)
        values = torch.where(magnitude > _E4M3_INF_STORED, math.nan, values)
    return values


def name(dtype):
    """Short printable name of a dtype."""
    return dtype.name if isinstance(dtype, DType) else str(dtype).removeprefix("torch.")


# x4 words converted per step: the int64 codes of a whole weight tensor (~1e8 values, as
# nki-library's MX tests cast) would take several GB at once.
_WORDS_PER_STEP = 1 << 22


def unpack(words, dtype):
    """float32 values of x4 ``words`` (int tensor ``[..., n]``) as ``[..., 4n]``."""
    element = dtype.element
    flat = words.reshape(-1)
    if flat.dtype != dtype.torch:
        flat = flat.to(torch.int64)  # its low bytes are the word
    # A word's bytes in memory order are its low to high bits (little-endian hosts), so one
    # table lookup per byte decodes it without shifting and masking every value.
    data = flat.contiguous().view(torch.uint8).view(flat.numel(), flat.element_size())
    data = data[:, : dtype.itemsize]
    steps = []
    for start in range(0, max(flat.numel(), 1), _WORDS_PER_STEP):
        word_bytes = data[start : start + _WORDS_PER_STEP].flatten().int()
        steps.append(torch.index_select(element.by_byte, 0, word_bytes))
    values = steps[0] if len(steps) == 1 else torch.cat(steps)
    return values.reshape(*words.shape[:-1], words.shape[-1] * 4)


def pack(values, dtype):
    """x4 words (``dtype.torch``) of float32 ``values`` ``[..., 4n]``, rounded to nearest even."""
    element = dtype.element
    groups = values.reshape(-1, 4)
    shifts = torch.arange(4) * element.bits
    wrap = 2 ** (8 * dtype.itemsize)
    words = torch.empty(groups.shape[0], dtype=dtype.torch)
    for start in range(0, groups.shape[0], _WORDS_PER_STEP):
        step = slice(start, start + _WORDS_PER_STEP)
        unsigned = (element.encode(groups[step]) << shifts).sum(-1)
        words[step] = torch.where(unsigned >= wrap // 2, unsigned - wrap, unsigned)
    return words.reshape(*values.shape[:-1], values.shape[-1] // 4)
