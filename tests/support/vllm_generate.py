"""vLLM runs for the serving tests and benchmark, each in a process of its own; prints one JSON
line (after "RESULT "). With vllm_runs.STOCK_ENV it is stock vLLM on the CPU.

usage: python vllm_generate.py generate MODEL_DIR DTYPE
       python vllm_generate.py compiled MODEL_DIR DTYPE
       python vllm_generate.py scheduling MODEL_DIR PREFIX_CACHING(0|1)"""

import json
import sys

import torch
import vllm
from vllm_tiny import PROMPTS

MAX_TOKENS = 20
# Compiled serving's buckets of batched tokens: 4 prompts prefill in 32, decode in 8.
BUCKETS = [8, 32, 128]


def greedy(max_tokens=MAX_TOKENS):
    # The two best logprobs of each step: how close a step was to picking another token.
    return vllm.SamplingParams(temperature=0.0, max_tokens=max_tokens, logprobs=2, ignore_eos=True)


def completion(output):
    """(token ids, the logprob of each, its lead over the runner-up) of a request's output."""
    c = output.outputs[0]
    logprobs = [step[t].logprob for t, step in zip(c.token_ids, c.logprobs)]
    leads = [
        lp - max(v.logprob for k, v in step.items() if k != t)
        for lp, t, step in zip(logprobs, c.token_ids, c.logprobs)
    ]
    return list(c.token_ids), logprobs, leads


def device_facts(llm):
    """Where the model and KV cache live, and what the device ran (empty on stock vLLM)."""
    if "torch_neuronx" not in sys.modules:
        return {"torchneuron_loaded": False}
    from vllm.platforms import current_platform

    import torch_neuronx
    from torch_neuronx.vllm import _kernels as kernels

    runner = llm.llm_engine.engine_core.engine_core.model_executor.driver_worker.worker.model_runner
    params = list(runner.model.parameters())
    # Layers may share one allocation: count each storage once.
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage() for t in runner.kv_caches}
    return {
        "torchneuron_loaded": True,
        "platform": type(current_platform).__name__,
        "param_devices": sorted({p.device.type for p in params}),
        "param_bytes": sum(p.numel() * p.element_size() for p in params),
        "kv_devices": sorted({t.device.type for t in runner.kv_caches}),
        "kv_bytes": sum(s.nbytes() for s in storages.values()),
        "memory_allocated": torch.neuron.memory_allocated(),
        "fallback_ops": torch_neuronx.get_fallback_ops(),
        "device_kernel_calls": kernels.device_kernel_calls(),
    }


def generate(model, dtype):
    llm = vllm.LLM(model=model, dtype=dtype, seed=0, max_model_len=256, enforce_eager=True)
    outputs = [completion(o) for o in llm.generate(PROMPTS, greedy())]
    chats = llm.chat([[{"role": "user", "content": p}] for p in PROMPTS], greedy())
    return {
        "tokens": [t for t, _, _ in outputs],
        "logprobs": [lp for _, lp, _ in outputs],
        "leads": [lead for _, _, lead in outputs],
        "texts": [o.outputs[0].text for o in llm.generate(PROMPTS, greedy())],
        "chat_texts": [o.outputs[0].text for o in chats],
        "chat_tokens": [list(o.outputs[0].token_ids) for o in chats],
        **device_facts(llm),
    }


def compiled(model, dtype):
    """Compiled serving: one neuron graph per bucket, the prompts padded to the buckets."""
    from torch_neuronx._dynamo import get_dynamo_metrics

    llm = vllm.LLM(
        model=model,
        dtype=dtype,
        seed=0,
        max_model_len=256,
        max_num_batched_tokens=BUCKETS[-1],
        additional_config={"num_batched_tokens_buckets": BUCKETS},
    )
    warm_up = get_dynamo_metrics()
    outputs = [completion(o) for o in llm.generate(PROMPTS, greedy())]
    serving = get_dynamo_metrics()
    runner = llm.llm_engine.engine_core.engine_core.model_executor.driver_worker.worker.model_runner
    return {
        "tokens": [t for t, _, _ in outputs],
        "logprobs": [lp for _, lp, _ in outputs],
        "buckets": BUCKETS,
        "compiled_buckets": runner.bucketed_forward.compiled_buckets,
        "warm_up_graphs": warm_up["num_graphs"],
        "serving_graphs": serving["num_graphs"] - warm_up["num_graphs"],
        "cache_hits": warm_up["cache_hits"],
        "cache_misses": warm_up["cache_misses"],
        "graph_fallbacks": serving["num_fallbacks"],
        **device_facts(llm),
    }


def scheduling(model, prefix_caching):
    """Continuous batching (a request joins while another decodes; each then as alone) and
    prefix caching (a request sharing a two-block prefix with an earlier one)."""
    block = 32
    llm = vllm.LLM(
        model=model,
        dtype="float32",
        seed=0,
        max_model_len=512,
        block_size=block,
        enforce_eager=True,
        enable_prefix_caching=bool(int(prefix_caching)),
    )
    engine = llm.llm_engine
    engine.add_request("long", PROMPTS[0], greedy(40))
    finished, steps, joined_while_decoding = {}, 0, None
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                finished[out.request_id] = out
        steps += 1
        if steps == 5:
            joined_while_decoding = "long" not in finished
            engine.add_request("joining", PROMPTS[1], greedy())
    alone = [completion(o) for o in llm.generate([PROMPTS[0], PROMPTS[1]], [greedy(40), greedy()])]
    prefix = [(7 * i) % 250 + 4 for i in range(2 * block)]
    first, second = (
        llm.generate([{"prompt_token_ids": prefix + [11, 12, 13]}], greedy()),
        llm.generate([{"prompt_token_ids": prefix + [21, 22, 23, 24]}], greedy()),
    )
    return {
        "joined_while_decoding": joined_while_decoding,
        "batched": [completion(finished["long"]), completion(finished["joining"])],
        "alone": alone,
        "prefix_tokens": len(prefix),
        "first_cached_tokens": first[0].num_cached_tokens,
        "second_cached_tokens": second[0].num_cached_tokens,
        "second": completion(second[0]),
        **device_facts(llm),
    }


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    result = {"generate": generate, "compiled": compiled, "scheduling": scheduling}[mode](*args)
    print("RESULT " + json.dumps(result))
