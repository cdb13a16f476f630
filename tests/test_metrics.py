import csv
import glob

import pytest
import torch
from pyrun import run_python

import torch_neuronx
from torch_neuronx import metrics


def test_counts_native_ops_copies_and_allocations():
    metrics.clear_counters()
    x = torch.randn(256).to("neuron")
    y = (x * 2).relu()
    y.cpu()
    c = metrics.counters()
    assert c["NativeOp::aten::mul.Tensor"] == 1 and c["NativeOp::aten::relu"] == 1
    assert c["HostToDeviceCopies"] == 1 and c["HostToDeviceBytes"] == 1024
    assert c["DeviceToHostCopies"] == 1 and c["DeviceToHostBytes"] == 1024
    assert c["DeviceAllocations"] >= 3
    assert metrics.get_counter_value("NativeOp::aten::relu") == 1
    assert "NativeOp::aten::relu" in metrics.get_counter_names()
    assert "NativeOp::aten::relu" in metrics.report()
    assert metrics.get_counter_value("no such counter") == 0


def test_ooms_are_counted():
    metrics.clear_counters()
    try:
        torch.empty(40 * 2**30, dtype=torch.uint8, device="neuron")
    except torch.OutOfMemoryError:
        pass
    assert metrics.get_counter_value("OutOfMemoryErrors") == 1


def test_clear_counters():
    torch.relu(torch.ones(2, device="neuron"))
    metrics.clear_counters()
    assert metrics.get_counter_value("NativeOp::aten::relu") == 0
    assert torch_neuronx.get_executed_ops() == []


def test_csv_written_at_exit(tmp_path):
    out = run_python(
        "import torch\ntorch.relu(torch.ones(3, device='neuron'))",
        env={"TORCH_NEURONX_METRICS_ENABLED": "1", "TORCH_NEURONX_METRICS_DIR": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr
    files = glob.glob(str(tmp_path / "*.csv"))
    assert len(files) == 1
    rows = dict(csv.reader(open(files[0])))
    assert rows["counter"] == "value" and int(rows["NativeOp::aten::relu"]) == 1


def test_log_level_from_environment():
    code = "import logging, torch_neuronx\nprint(torch_neuronx._log.logger.getEffectiveLevel())"
    assert run_python(code, env={"TORCH_NEURONX_LOG_LEVEL": "3"}).stdout.strip() == "10"
    assert run_python(code, env={"TORCH_NEURONX_LOG_LEVEL": "ERROR"}).stdout.strip() == "40"
    fallback = "import torch\nprint(torch.nonzero(torch.ones(3, device='neuron')).tolist())"
    for level, warns in (("WARNING", True), ("ERROR", False)):
        out = run_python(fallback, env={"TORCH_NEURONX_LOG_LEVEL": level})
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "[[0], [1], [2]]"
        assert ("Operator 'aten::nonzero' executed via CPU fallback" in out.stderr) == warns


def _compile_two_graphs():
    torch._dynamo.reset()
    torch_neuronx.reset_dynamo_metrics()
    x = torch.randn(8, 8)
    outs = [
        torch.compile(fn, backend="neuron")(x.to("neuron")).cpu()
        for fn in (lambda t: t.exp() * 2, lambda t: t @ t + 1)
    ]
    torch.testing.assert_close(outs[0], x.exp() * 2)
    torch.testing.assert_close(outs[1], x @ x + 1)


def test_torch_neuron_reports_the_dynamo_metrics():
    """The torch.neuron reference (awsdocs-neuron .../torch/reference/api/
    torch-neuron-module.html, compilation-metrics functions) and the torch.compile reference
    (.../torch/compile/reference-torch-compile.html, get_dynamo_metrics)."""
    assert torch.neuron.get_dynamo_metrics is torch_neuronx.get_dynamo_metrics
    _compile_two_graphs()
    m = torch.neuron.get_dynamo_metrics()
    assert m["num_graphs"] == 2 and len(m["graphs"]) == 2
    torch.neuron.reset_dynamo_metrics()
    assert torch.neuron.get_dynamo_metrics()["num_graphs"] == 0


def test_metric_query_functions():
    """TorchNeuron's torch_neuronx.metrics API: metrics are timed samples, counters integers."""
    _compile_two_graphs()
    assert "DynamoCompilationTime" in metrics.get_metric_names()
    data = metrics.get_metric_data("DynamoCompilationTime")
    assert data["total_samples"] == 2 and len(data["samples"]) == 2
    assert data["accumulator"] == pytest.approx(sum(data["samples"])) and data["accumulator"] > 0
    assert metrics.get_metric_data("no such metric") is None
    compilation = metrics.get_compilation_metrics()
    assert compilation["DynamoGraphs"] == 2
    assert compilation["DynamoCompilationTime"]["total_samples"] == 2
    text = metrics.report_filtered(["DynamoGraphs"], ["DynamoCompilationTime"])
    assert "DynamoGraphs" in text and "over 2 samples" in text and "NativeOp" not in text
    metrics.clear_metrics()
    assert (
        metrics.get_metric_names() == [] and metrics.get_compilation_metrics()["DynamoGraphs"] == 0
    )


def test_enabling_metrics_writes_the_chosen_tables_at_exit(tmp_path):
    code = (
        "import torch, torch_neuronx.metrics as met\n"
        "print(met.is_enabled())\n"
        "met.set_enabled(True)\n"
        "print(met.is_enabled())\n"
        "f = torch.compile(lambda t: t.relu() * 3, backend='neuron')\n"
        "print(f(torch.ones(4, device='neuron')).sum().item())\n"
    )
    env = {
        "TORCH_NEURONX_METRICS_DIR": str(tmp_path),
        "TORCH_NEURONX_ENABLED_METRIC_TABLES": "counters,graph_stats",
    }
    out = run_python(code, env=env)
    assert out.stdout.split() == ["False", "True", "12.0"], out.stderr
    (graphs,) = glob.glob(str(tmp_path / "torch_neuronx_graph_stats_*.csv"))
    rows = list(csv.DictReader(open(graphs)))
    assert len(rows) == 1 and float(rows[0]["compile_time_s"]) > 0
    assert len(glob.glob(str(tmp_path / "torch_neuronx_metrics_*.csv"))) == 1


def test_an_unknown_metric_table_is_named():
    out = run_python(
        "import torch_neuronx",
        env={"TORCH_NEURONX_METRICS_ENABLED": "1", "TORCH_NEURONX_ENABLED_METRIC_TABLES": "graphs"},
    )
    assert out.returncode != 0
    assert "TORCH_NEURONX_ENABLED_METRIC_TABLES names graphs" in out.stderr
