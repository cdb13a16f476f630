"""AWS's two distributed TorchNeuron examples, done by our own rank functions
(tests/support/aws_examples.py) on 2 ranks: the multi-node data-parallel example
(aws-neuron/torch-neuronx examples; it calls ``torch_neuronx.current_device()`` and checks
that gradients and weights match across ranks) and the Neuron Explorer multi-rank profiling
example (awsdocs-neuron .../tools/neuron-explorer/how-to-profile-pytorch.html: per-rank
traces under ``profile_output_dir``)."""

import json
import os

import aws_examples
import torch
from dist_harness import spawn


def _results(outcomes):
    errors = [error for _, error in outcomes if error]
    assert not errors, "\n".join(errors)
    return [result for result, _ in outcomes]


def test_data_parallel_example_matches_across_ranks_and_the_cpu():
    neuron = _results(spawn(aws_examples.data_parallel_rank, 2, "neuron", 6))
    cpu = _results(spawn(aws_examples.data_parallel_rank, 2, "gloo", 6))
    assert [r["device"] for r in neuron] == ["neuron:0", "neuron:1"]
    for kind in ("grads", "weights"):
        first = neuron[0][kind]
        assert first.keys() == neuron[1][kind].keys()
        for name, value in first.items():
            assert torch.equal(value, neuron[1][kind][name]), f"{kind} of {name} differ"
            torch.testing.assert_close(value, cpu[0][kind][name], msg=f"{kind} of {name}")


def test_multi_rank_profiling_example_writes_each_rank_s_trace(tmp_path):
    out = str(tmp_path / "profile_host_cc")
    results = _results(spawn(aws_examples.profiled_rank, 2, out))
    inputs = []
    for rank in range(2):
        generator = torch.Generator().manual_seed(rank)
        inputs.append([torch.randn(n, 64, generator=generator) for n in (64, 64, 16)])
    expected_sum = inputs[0][2] + inputs[1][2]
    for rank, result in enumerate(results):
        a, b, t = inputs[rank]
        torch.testing.assert_close(result["product"], a @ b)
        # Three all-reduces of the same tensor: the sum, then twice the sum, then four times.
        torch.testing.assert_close(result["reduced"], 4 * expected_sum)
        (trace,) = result["traces"]
        session = os.path.dirname(trace)
        assert os.path.basename(os.path.dirname(session)).endswith(f"_pid_{result['pid']}")
        assert os.path.commonpath([out, trace]) == out
        with open(trace) as f:
            names = {e.get("name", "") for e in json.load(f)["traceEvents"]}
        assert "nc::aten::mm" in names and "model_inference" in names
        assert any("all_reduce" in n or "allreduce" in n for n in names), sorted(names)
        with open(os.path.join(session, "neuron_session.json")) as f:
            record = json.load(f)
        assert (record["rank"], record["world_size"]) == (rank, 2)
        assert record["device_events"] == {
            f"neuron:{rank}": record["device_events"][f"neuron:{rank}"]
        }
