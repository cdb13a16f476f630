"""Compiled serving: one static graph per bucket of batched tokens, as vLLM Neuron serves.

The neuron backend takes static shapes only, and vLLM's own compile path marks the token
dimension dynamic. So when vLLM is asked to compile (no ``--enforce-eager``), the platform
hands compilation to the model runner (vLLM's ``STOCK_TORCH_COMPILE`` mode) and the runner
pads each step's batch to the next bucket (``NeuronModelRunner``): the model's forward is
``torch.compile(backend="neuron", fullgraph=True, dynamic=False)``, compiled once per bucket
while the engine warms up and never again (Dynamo's ``fail_on_recompile`` stance while it
serves). vLLM's attention ops are opaque custom ops inside the graph, which read the step's
attention metadata when they run. A second start loads each bucket's graph from the neuron
compile cache (TORCH_NEURONX_NEFF_CACHE_DIR).

The buckets are ``additional_config={"num_batched_tokens_buckets": [...]}`` (vLLM Neuron's
name), by default the powers of two from 16 below ``max_num_batched_tokens``, and that number.
"""

import bisect
import contextlib

import torch

BUCKETS_KEY = "num_batched_tokens_buckets"
SMALLEST_DEFAULT_BUCKET = 16


def default_buckets(max_num_batched_tokens: int) -> list[int]:
    buckets = []
    size = SMALLEST_DEFAULT_BUCKET
    while size < max_num_batched_tokens:
        buckets.append(size)
        size *= 2
    return [*buckets, max_num_batched_tokens]


def buckets(additional_config: dict, max_num_batched_tokens: int) -> list[int]:
    """The sorted buckets vLLM's settings ask for; a bucket list that cannot hold a step's
    batch (vLLM schedules up to max_num_batched_tokens tokens) is refused."""
    asked = (additional_config or {}).get(BUCKETS_KEY)
    if asked is None:
        return default_buckets(max_num_batched_tokens)
    listed = isinstance(asked, (list, tuple)) and len(asked) > 0
    if not listed or not all(
        isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in asked
    ):
        raise ValueError(
            f"additional_config[{BUCKETS_KEY!r}] must be a non-empty list of positive token "
            f"counts, got {asked!r}"
        )
    chosen = sorted(set(asked))
    if chosen[-1] != max_num_batched_tokens:
        raise ValueError(
            f"the largest bucket of additional_config[{BUCKETS_KEY!r}] is {chosen[-1]}, but a "
            f"step batches up to max_num_batched_tokens={max_num_batched_tokens} tokens: make "
            f"the largest bucket {max_num_batched_tokens}, or set --max-num-batched-tokens "
            f"{chosen[-1]}"
        )
    return chosen


def bucket_for(num_tokens: int, sizes: list[int]) -> int:
    """The smallest bucket that holds num_tokens tokens."""
    index = bisect.bisect_left(sizes, num_tokens)
    if index == len(sizes):
        raise ValueError(f"{num_tokens} tokens exceed the largest bucket, {sizes[-1]}")
    return sizes[index]


class BucketedForward:
    """A model's forward, compiled by the neuron backend for each bucket it is called with."""

    def __init__(self, forward, sizes: list[int]):
        self.sizes = sizes
        self.compiled_buckets: list[int] = []
        self._compiled = torch.compile(forward, backend="neuron", fullgraph=True, dynamic=False)
        self._warm = False

    def __call__(self, *args, **kwargs):
        num_tokens = _num_tokens(args, kwargs)
        if num_tokens not in self.sizes:
            raise RuntimeError(
                f"compiled serving ran a batch of {num_tokens} tokens, which is no bucket "
                f"({self.sizes}): the model runner pads every step to a bucket"
            )
        if self._warm:
            # Every bucket compiled during warm-up: a recompile now would be a bug.
            with torch.compiler.set_stance("fail_on_recompile"):
                return self._compiled(*args, **kwargs)
        if num_tokens not in self.compiled_buckets:
            self.compiled_buckets.append(num_tokens)
        return self._compiled(*args, **kwargs)

    @contextlib.contextmanager
    def warming_up(self):
        """Compiling each bucket; afterwards a step that would recompile fails instead."""
        torch._dynamo.config.recompile_limit = max(
            torch._dynamo.config.recompile_limit, len(self.sizes)
        )
        yield
        self._warm = True


def _num_tokens(args, kwargs) -> int:
    for name in ("input_ids", "inputs_embeds"):
        value = kwargs.get(name)
        if value is not None:
            return value.shape[0]
    return args[0].shape[0]
