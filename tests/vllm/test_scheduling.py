"""Continuous batching and prefix caching on the neuron plugin."""


def test_a_request_joining_during_decode_gets_the_tokens_it_gets_alone(runs):
    result = runs("neuron", "scheduling", 1)
    assert result["joined_while_decoding"], "the second request must arrive mid-decode"
    assert result["batched"] == result["alone"]
    assert result["fallback_ops"] == []


def test_a_shared_two_block_prefix_is_served_from_the_cache_with_the_same_output(runs):
    cached, uncached = runs("neuron", "scheduling", 1), runs("neuron", "scheduling", 0)
    assert cached["first_cached_tokens"] == 0
    assert cached["second_cached_tokens"] == cached["prefix_tokens"] == 64
    assert uncached["second_cached_tokens"] == 0
    assert cached["second"] == uncached["second"]
