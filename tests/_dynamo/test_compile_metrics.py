"""get_dynamo_metrics / reset_dynamo_metrics / counters."""

import torch

import torch_neuronx._dynamo as neuron_dynamo


def test_metrics_report_each_graph_and_reset():
    def fn(x):
        return torch.exp(x) - 1

    compiled = torch.compile(fn, backend="neuron", options={"model_name": "metered"})
    compiled(torch.randn(3, device="neuron"))
    compiled(torch.randn(5, device="neuron"))
    metrics = neuron_dynamo.get_dynamo_metrics()
    assert metrics["num_graphs"] == 2 and metrics["num_recompiles"] == 1
    for graph in metrics["graphs"]:
        assert graph["name"].startswith("metered_") and graph["compile_time_s"] > 0
        (part,) = graph["subgraphs"]
        assert part["kind"] == "inference" and len(part["cache_key"]) == 64
        assert part["compile_time_s"] <= graph["compile_time_s"]
    assert metrics["cache_hits"] + metrics["cache_misses"] == 2
    counters = neuron_dynamo.counters()
    assert counters["DynamoGraphs"] == 2 and counters["DynamoRecompiles"] == 1
    assert counters["NeffCacheHits"] + counters["NeffCacheMisses"] == 2
    assert counters["DynamoCompileSeconds"] == metrics["compile_time_s"]
    neuron_dynamo.reset_dynamo_metrics()
    assert neuron_dynamo.get_dynamo_metrics()["num_graphs"] == 0
    assert neuron_dynamo.counters()["DynamoGraphs"] == 0
