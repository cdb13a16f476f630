import csv
import glob

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
    code = "import logging, torch_neuronx\nprint(torch_neuronx.log.logger.getEffectiveLevel())"
    assert run_python(code, env={"TORCH_NEURONX_LOG_LEVEL": "3"}).stdout.strip() == "10"
    assert run_python(code, env={"TORCH_NEURONX_LOG_LEVEL": "ERROR"}).stdout.strip() == "40"
    fallback = "import torch\nprint(torch.nonzero(torch.ones(3, device='neuron')).tolist())"
    for level, warns in (("WARNING", True), ("ERROR", False)):
        out = run_python(fallback, env={"TORCH_NEURONX_LOG_LEVEL": level})
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "[[0], [1], [2]]"
        assert ("Operator 'aten::nonzero' executed via CPU fallback" in out.stderr) == warns
