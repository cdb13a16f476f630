"""Remembers Inductor's probes of the C++ toolchain across processes.

Inductor proves each SIMD instruction set that the CPU advertises by building a test kernel
and loading it in a fresh interpreter, about half a second per set, in every process. The
outcome is kept in the cache root; when every advertised set passed, with the same compiler
and torch, later processes skip the probes. Inductor's FX-graph cache keys include the
setting that skips them, so it is set the same way in the process that ran the probes.
"""

import functools
import json
import os
import tempfile

import torch
from torch._inductor import config as inductor_config
from torch._inductor import cpp_builder, cpu_vec_isa

from torch_neuronx._dynamo import cache, config


def _advertised():
    with inductor_config.patch({"cpp.vec_isa_ok": True}):
        return [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list.__wrapped__()]


@functools.cache
def vec_isa_proven():
    """True when every instruction set this CPU advertises passed its probe, now or before."""
    compiler = cpp_builder.get_cpp_compiler()
    identity = [torch.__version__, compiler, cpp_builder.get_compiler_version_info(compiler)]
    path = os.path.join(config.cache_dir(), "vec_isa.json")
    advertised = _advertised()
    try:
        with open(path) as f:
            record = json.load(f)
        if record["identity"] == identity and record["passed"] == advertised:
            return True
    except (OSError, ValueError, KeyError, TypeError):
        pass
    passed = [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]
    with cache.owner_only():
        os.makedirs(config.cache_dir(), mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=config.cache_dir(), prefix=".vec_isa-")
        with os.fdopen(fd, "w") as f:
            json.dump({"identity": identity, "passed": passed}, f)
        os.replace(tmp, path)
    return passed == advertised


def probes_skipped():
    """Inductor settings that skip the probes when they are already proven."""
    return inductor_config.patch({"cpp.vec_isa_ok": True} if vec_isa_proven() else {})
