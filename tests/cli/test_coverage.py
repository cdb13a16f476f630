"""`torchneuron coverage` on a few entries: each outcome (passed, CPU-fallback tier, excluded,
failed, crashed) on real ops and on the misbehaving ops of the coverage_ops plugin, the JSON
document, the Markdown report and the exit status."""

import subprocess
import sys

import coverage_ops
import pytest
import torch
from opinfo_sweep import run_coverage

from torch_neuronx.cli import coverage

OUTCOMES = ("passed", "fallback", "excluded", "failed", "crashed")


@pytest.fixture(scope="module")
def ops_sweep(tmp_path_factory):
    """OpInfo entries with every outcome, swept by two workers; (report, Markdown, process)."""
    markdown = tmp_path_factory.mktemp("coverage") / "ops.md"
    report, proc = run_coverage(
        "--ops",
        "add,nonzero,to,coverage_test.*",
        "--plugin",
        "coverage_ops",
        "--workers",
        "2",
        "--report",
        str(markdown),
    )
    return report, markdown.read_text(), proc


def _entries(report):
    return {entry["name"]: entry for entry in report["entries"]}


def test_each_sample_has_one_outcome_and_the_summary_adds_them_up(ops_sweep):
    report, _, _ = ops_sweep
    assert report["schema"] == "torchneuron.coverage/1"
    entries = _entries(report)
    assert set(entries) == {"add", "nonzero", "to"} | {
        f"coverage_test.{name}" for name in coverage_ops.NEURON_KERNELS
    }
    for entry in entries.values():
        assert entry["samples"] == sum(entry[k] for k in OUTCOMES), entry["name"]
        assert entry["passed"] == sum(
            entry[k] for k in ("bit_identical", "within_tolerance", "same_error")
        )
    summary = report["summary"]
    for key in ("samples", *OUTCOMES):
        assert summary[key] == sum(entry[key] for entry in entries.values()), key


def test_native_ops_pass_bit_identical_and_fallback_ops_are_named(ops_sweep):
    entries = _entries(ops_sweep[0])
    add, nonzero = entries["add"], entries["nonzero"]
    assert add["samples"] > 10 and add["bit_identical"] == add["samples"]
    assert add["fallback_ops"] == {} and add["notes"] == []
    assert nonzero["fallback"] == nonzero["samples"] > 0
    assert nonzero["fallback_ops"] == {"aten::nonzero": nonzero["samples"]}
    assert ops_sweep[0]["summary"]["fallback_ops"]["aten::nonzero"] == nonzero["samples"]


def test_a_deliberate_exclusion_is_named(ops_sweep):
    to = _entries(ops_sweep[0])["to"]
    # Tensor.to(memory_format=torch.channels_last) samples; the others pass.
    assert to["excluded"] > 0 and to["excluded_by"] == {"channels_last": to["excluded"]}
    assert to["passed"] == to["samples"] - to["excluded"]


def test_wrong_results_and_neuron_only_errors_fail(ops_sweep):
    entries = _entries(ops_sweep[0])
    samples = len(coverage_ops.SHAPES)
    off_by_one, raises = entries["coverage_test.off_by_one"], entries["coverage_test.raises"]
    assert off_by_one["failed"] == raises["failed"] == samples
    assert {n["detail"] for n in off_by_one["notes"]} == {"results differ from the CPU's"}
    for note in raises["notes"]:
        assert note["detail"].startswith("neuron raised RuntimeError: coverage_test.raises")
        assert note["detail"].endswith("the CPU ran")


def test_a_crashing_sample_is_recorded_and_the_entry_goes_on(ops_sweep):
    aborts = _entries(ops_sweep[0])["coverage_test.aborts"]
    crashed = coverage_ops.SHAPES.index(coverage_ops.ABORTING_SHAPE)
    assert aborts["samples"] == len(coverage_ops.SHAPES)
    assert (aborts["crashed"], aborts["passed"]) == (1, len(coverage_ops.SHAPES) - 1)
    (note,) = aborts["notes"]
    assert note["sample"] == crashed and note["outcome"] == "crashed"
    assert "SIGABRT" in note["detail"] and "coverage_ops.py" in note["detail"]


def test_failures_set_the_exit_status(ops_sweep):
    assert ops_sweep[2].returncode == 1


def test_the_markdown_report_shows_the_summary_and_every_entry(ops_sweep):
    report, markdown, _ = ops_sweep
    summary = report["summary"]
    assert f"| Outcomes (samples run) | {summary['samples']:,} | 100.0% |" in markdown
    assert f"| Crashed | {summary['crashed']} |" in markdown
    assert "`aten::nonzero`" in markdown
    for entry in report["entries"]:
        counts = " | ".join(str(entry[k]) for k in ("samples", *OUTCOMES))
        assert f"| {entry['name']} | float32 | {counts} |" in markdown


def test_the_terminal_shows_the_summary_and_the_entries_with_findings(ops_sweep):
    terminal = coverage.markdown(ops_sweep[0], every_entry=False)
    assert terminal.startswith("# torchneuron coverage")
    assert "| Outcomes (samples run) |" in terminal
    assert "| coverage_test.aborts | float32 |" in terminal
    assert "| nonzero | float32 |" in terminal
    # add's samples all passed bit for bit: nothing to show.
    assert "| add | float32 |" not in terminal


def test_modules_and_optimizers_with_gradients():
    report, proc = run_coverage(
        "--db",
        "modules",
        "optimizers",
        "--grad",
        "--ops",
        "nn.Linear,nn.BatchNorm1d,optim.SGD,optim.SparseAdam",
        "--workers",
        "1",
    )
    assert proc.returncode == 0
    entries = _entries(report)
    assert set(entries) == {"nn.Linear", "nn.BatchNorm1d", "optim.SGD", "optim.SparseAdam"}
    for name in ("nn.Linear", "nn.BatchNorm1d", "optim.SGD"):
        assert entries[name]["bit_identical"] == entries[name]["samples"] > 0, name
    # BatchNorm behaves differently in training and evaluation: its inputs run in both modes.
    from torch.testing._internal.common_modules import module_db

    (batch_norm,) = [info for info in module_db if info.name == "nn.BatchNorm1d"]
    inputs = batch_norm.module_inputs_func(
        batch_norm, device="cpu", dtype=torch.float32, requires_grad=True, training=True
    )
    assert entries["nn.BatchNorm1d"]["samples"] == 2 * len(inputs)
    sparse = entries["optim.SparseAdam"]
    assert sparse["excluded_by"] == {"sparse": sparse["samples"]}
    assert [g["database"] for g in report["groups"]] == ["modules", "optimizers"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--grad", "--dtype", "int64"], "--grad needs a floating dtype"),
        (["--ops", "no_such_op*"], "no entry of ops matches --ops 'no_such_op*'"),
        (["--dtype", "float64"], "invalid choice: 'float64'"),
    ],
)
def test_usage_errors_name_the_option(args, message):
    proc = subprocess.run(
        [sys.executable, "-m", "torch_neuronx", "coverage", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]
