"""`torchneuron coverage` on a few entries: each outcome (passed, CPU-fallback tier, excluded,
failed, crashed) on real ops and on the misbehaving ops of the coverage_ops plugin, the JSON
document, the Markdown report and the exit status."""

import subprocess
import sys

import coverage_defects
import coverage_ops
import pytest
import torch
from opinfo_sweep import run_coverage

from torch_neuronx.cli import _coverage as coverage

OUTCOMES = ("passed", "fallback", "excluded", "failed", "crashed")


@pytest.fixture(scope="module")
def ops_sweep(tmp_path_factory):
    """OpInfo entries with every outcome, swept by two workers; (report, Markdown, process)."""
    markdown = tmp_path_factory.mktemp("coverage") / "ops.md"
    report, proc = run_coverage(
        "--ops",
        "abs,add,nonzero,to,coverage_test.*",
        "--plugin",
        "coverage_ops",
        "--workers",
        "2",
        "--report",
        str(markdown),
    )
    return report, markdown.read_text(), proc


@pytest.fixture(scope="module")
def defects_sweep(tmp_path_factory):
    """The coverage_defects plugin's entries; (report, Markdown, process)."""
    markdown = tmp_path_factory.mktemp("coverage") / "defects.md"
    report, proc = run_coverage(
        "--ops",
        "coverage_defects.*",
        "--plugin",
        "coverage_defects",
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
    assert set(entries) == {"abs", "add", "nonzero", "to"} | {
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
    absolute, add, nonzero = entries["abs"], entries["add"], entries["nonzero"]
    assert absolute["bit_identical"] == absolute["samples"] > 0 and not absolute["notes"]
    assert add["samples"] > 10 and add["passed"] == add["samples"]
    assert add["fallback_ops"] == {}
    # Only in-place calls that would broadcast their input raise, as on the CPU.
    assert add["same_error"] == len(add["notes"]) > 0
    for note in add["notes"]:
        assert note["match"] == "same_error" and note["description"].startswith("in-place: ")
        assert "doesn't match the broadcast shape" in note["detail"]
    assert nonzero["fallback"] == nonzero["samples"] > 0
    # Its out= samples call the function first, for the shape of the out= tensor.
    assert set(nonzero["fallback_ops"]) == {"aten::nonzero", "aten::nonzero.out"}
    summary = ops_sweep[0]["summary"]["fallback_ops"]
    assert summary["aten::nonzero"] == nonzero["fallback_ops"]["aten::nonzero"]


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
    assert {n["detail"] for n in off_by_one["notes"]} == {
        "results differ from the CPU's (output 0)"
    }
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
    # abs's samples (function, in-place and out=) all passed bit for bit: nothing to show.
    assert "| abs | float32 |" not in terminal
    assert "| add | float32 |" in terminal  # in-place calls that raise as on the CPU


def _defect(report, name):
    """The entry of coverage_defects.NAME; every sample it failed has its detail in `details`."""
    entry = _entries(report)[f"coverage_defects.{name}"]
    entry["details"] = {n["detail"] for n in entry["notes"] if n["outcome"] == "failed"}
    return entry


def test_a_result_with_other_strides_fails_and_names_them(defects_sweep):
    entry = _defect(defects_sweep[0], "column_major")
    assert entry["failed"] == entry["samples"] == len(coverage_defects.SHAPES)
    (rows, columns), _ = coverage_defects.SHAPES
    assert any(
        f"output 0: strides (1, {rows}), storage offset 0, its own storage on neuron, "
        f"strides ({columns}, 1), storage offset 0, its own storage on the CPU" in detail
        for detail in entry["details"]
    ), entry["details"]


def test_another_error_of_the_same_type_fails_and_shows_both(defects_sweep):
    entry = _defect(defects_sweep[0], "other_error")
    assert entry["failed"] == entry["samples"] and entry["same_error"] == 0
    for detail in entry["details"]:
        assert detail.startswith("neuron raised RuntimeError: other_error: the neuron kernel")
        assert f"the CPU raised RuntimeError: {coverage_defects.CPU_ERROR}" in detail


def test_an_input_written_by_the_op_fails(defects_sweep):
    entry = _defect(defects_sweep[0], "writes_input")
    assert entry["failed"] == entry["samples"]
    assert entry["details"] == {"results differ from the CPU's (input 0 after the call)"}


def test_an_in_place_variant_that_returns_a_copy_fails(defects_sweep):
    entry = _defect(defects_sweep[0], "not_in_place")
    samples = len(coverage_defects.SHAPES)
    # The function calls pass; the in-place calls return a new tensor and leave the input.
    assert (entry["samples"], entry["bit_identical"], entry["failed"]) == (
        2 * samples,
        samples,
        samples,
    )
    assert entry["details"] == {"outputs ['Tensor'], the CPU's ['input 0 itself']"}


def test_an_out_variant_that_ignores_out_fails(defects_sweep):
    entry = _defect(defects_sweep[0], "ignores_out")
    samples = len(coverage_defects.SHAPES)
    assert (entry["samples"], entry["bit_identical"], entry["failed"]) == (
        2 * samples,
        samples,
        samples,
    )
    assert entry["details"] == {"outputs ['Tensor'], the CPU's ['out= tensor 0 itself']"}


def test_an_entry_whose_samples_cannot_be_made_is_named_and_fails_the_sweep(defects_sweep):
    report, markdown, proc = defects_sweep
    assert "coverage_defects.no_samples" not in _entries(report)
    (item,) = [i for i in report["not_swept"] if i["name"] == "coverage_defects.no_samples"]
    assert item["reason"] == (
        "its sample generator failed on the CPU: ValueError: no_samples: this generator is broken"
    )
    assert report["summary"]["generator_failures"] == 1
    assert "## Entries that made no samples (not examined)" in markdown
    assert "| coverage_defects.no_samples | float32 | its sample generator failed" in markdown
    assert proc.returncode == 1


def test_each_defect_is_named_in_the_report(defects_sweep):
    report, markdown, _ = defects_sweep
    for name in ("column_major", "other_error", "writes_input", "not_in_place", "ignores_out"):
        assert f"| coverage_defects.{name} | float32 |" in markdown, name
    assert report["summary"]["entries_failing"] == 5


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
