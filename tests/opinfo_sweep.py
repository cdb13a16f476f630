"""Runs PyTorch's OpInfo samples (float32, forward and backward) on neuron and on the CPU and
compares them. Usage: python opinfo_sweep.py [--ops a,b] [--json out.json]."""

import argparse
import json
import sys
import time
import warnings

import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_flatten, tree_map

warnings.filterwarnings("ignore")
SEED = 1234
# Factories whose outputs are uninitialised memory: only their metadata can be compared.
UNINITIALISED = ("empty", "empty_like", "empty_permuted", "empty_strided", "new_empty",
                 "new_empty_strided")
# Arguments that the op requires on the CPU whatever the device (as on CUDA).
HOST_ARGUMENTS = {"tensor_split"}
# The message every deliberately excluded feature carries (docs/limitations.md).
EXCLUDED = "docs/limitations.md"


def _move(device):
    """Moves a tensor with its whole storage, so views keep their offsets and strides."""
    def move(t):
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
    """Forward (and backward when differentiable) on `device`; returns tensors on the CPU."""
    move = _move(device)
    inp = move(sample.input)
    if op.name in HOST_ARGUMENTS:
        args, kwargs = sample.args, sample.kwargs
    else:
        args, kwargs = tree_map(move, (sample.args, sample.kwargs))
    torch.manual_seed(SEED)
    out = op(inp, *args, **kwargs)
    out = sample.output_process_fn_grad(out)
    flat = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    if op.name in UNINITIALISED:
        flat = [torch.zeros(t.shape, dtype=t.dtype) for t in flat]
    results = [t.detach().cpu() for t in flat]
    inputs = [t for t in tree_flatten((inp, args, kwargs))[0]
              if isinstance(t, torch.Tensor) and t.requires_grad]
    diff = [t for t in flat if t.requires_grad and t.grad_fn is not None]
    if inputs and diff:
        torch.manual_seed(SEED + 1)
        cotangents = [torch.randn(t.shape, dtype=t.dtype).to(t.device) for t in diff]
        grads = torch.autograd.grad(diff, inputs, cotangents, allow_unused=True)
        results += [g.detach().cpu() for g in grads if g is not None]
    return results, [type(t).__name__ for t in tree_flatten(out)[0]]


def _agree(a, b):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        try:
            torch.testing.assert_close(x, y, equal_nan=True, atol=1e-5, rtol=1.3e-6)
        except AssertionError:
            return False
    return True


def sweep(names=None):
    stats = {"samples": 0, "agree": 0, "both_error": 0, "excluded": 0, "failures": [], "ops": 0}
    start = time.time()
    for op in op_db:
        if names and op.name not in names:
            continue
        if op.name.startswith("jiterator") or torch.float32 not in op.supported_dtypes("cpu"):
            continue
        stats["ops"] += 1
        grad = op.supports_autograd and torch.float32 in op.supported_backward_dtypes("cpu")
        try:
            samples = list(op.sample_inputs("cpu", torch.float32, requires_grad=grad))
        except Exception:  # noqa: BLE001 - generators that fail on CPU are not our samples
            continue
        for i, sample in enumerate(samples):
            if sample.input.layout != torch.strided if isinstance(sample.input, torch.Tensor) else False:
                stats["excluded"] += 1
                continue
            stats["samples"] += 1
            try:
                cpu, cpu_types = _run(op, sample, "cpu")
            except Exception as e:  # noqa: BLE001
                cpu_error = type(e)
            else:
                cpu_error = None
            try:
                dev, dev_types = _run(op, sample, "neuron")
            except Exception as e:  # noqa: BLE001
                dev_error, message = type(e), str(e).split("\n")[0][:300]
            else:
                dev_error, message = None, ""
            if dev_error and not cpu_error and EXCLUDED in message:
                stats["samples"] -= 1
                stats["excluded"] += 1
                continue
            if cpu_error or dev_error:
                ok = cpu_error is not None and dev_error is not None
                stats["both_error"] += ok
            else:
                ok = cpu_types == dev_types and _agree(dev, cpu)
                message = "" if ok else "results differ"
            if ok:
                stats["agree"] += 1
            else:
                stats["failures"].append(f"{op.name}[{op.variant_test_name}]#{i}: "
                                         f"cpu={getattr(cpu_error, '__name__', 'ok')} {message}")
    stats["seconds"] = round(time.time() - start, 1)
    return stats


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops")
    parser.add_argument("--json")
    a = parser.parse_args()
    stats = sweep(set(a.ops.split(",")) if a.ops else None)
    text = json.dumps(stats, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text)
    print(f"{stats['agree']}/{stats['samples']} samples agree over {stats['ops']} ops "
          f"in {stats['seconds']} s; {len(stats['failures'])} disagree; "
          f"{stats['excluded']} use excluded features (docs/limitations.md)")
    for line in stats["failures"][:50]:
        print("  ", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
