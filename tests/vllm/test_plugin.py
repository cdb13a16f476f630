"""The plugin's registration and its KV-cache budget."""

import pytest
import vllm.plugins

import torch_neuronx.vllm
from torch_neuronx.vllm import _platform as platform


def test_vllm_finds_the_plugin_through_its_entry_point(monkeypatch):
    monkeypatch.delenv("TORCHNEURON_VLLM", raising=False)
    plugins = vllm.plugins.load_plugins_by_group(vllm.plugins.PLATFORM_PLUGINS_GROUP)
    assert plugins["neuron"]() == "torch_neuronx.vllm._platform.NeuronPlatform"


def test_the_off_switch_keeps_the_plugin_out(monkeypatch):
    monkeypatch.setenv("TORCHNEURON_VLLM", "0")
    assert torch_neuronx.vllm.register() is None


def test_the_real_vllm_neuron_plugin_wins(monkeypatch, tmp_path):
    (tmp_path / "vllm_neuron").mkdir()
    (tmp_path / "vllm_neuron" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("TORCHNEURON_VLLM", raising=False)
    assert torch_neuronx.vllm.register() is None


def test_the_kv_cache_takes_vllms_share_of_hbm_capped_by_host_memory():
    gib = 2**30
    assert platform.kv_cache_budget(0.5, 24 * gib, 100 * gib) == 12 * gib
    assert platform.kv_cache_budget(0.9, 24 * gib, 10 * gib) == 5 * gib


@pytest.mark.parametrize("utilization", [0.0, 1.5])
def test_a_utilization_outside_0_1_is_refused(utilization):
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        platform.kv_cache_budget(utilization, 2**30, 2**30)


def test_the_budget_is_set_when_vllm_names_none_and_kept_when_it_does(monkeypatch):
    class CacheConfig:
        gpu_memory_utilization = 0.9
        kv_cache_memory_bytes = None

    chosen = CacheConfig()
    platform._size_kv_cache(chosen)
    hbm = platform.torch.neuron.get_device_properties(0).total_memory
    assert 0 < chosen.kv_cache_memory_bytes <= 0.9 * hbm
    named = CacheConfig()
    named.kv_cache_memory_bytes = 12345
    platform._size_kv_cache(named)
    assert named.kv_cache_memory_bytes == 12345
