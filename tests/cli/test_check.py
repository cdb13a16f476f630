"""`torchneuron check`: each kind of finding, named at the user's line, from a real run."""

import json

import pytest
from torchneuron_cli import run, run_json, script

PORTING = script("porting.py")
SEVERITIES = {"blocker", "warning", "info"}
FRAME_KEYS = {"file", "line", "function", "code"}


def check(*words, options=(), **kwargs):
    """Runs `torchneuron check --json OPTIONS porting.py WORDS`; returns (process, report)."""
    return run_json("check", *options, PORTING, *words, **kwargs)


def assert_schema(report):
    """The JSON document has the documented shape (docs/cli.md)."""
    assert report["schema"] == "torchneuron.check/1"
    assert report["verdict"] in ("ready", "ready with warnings", "blocked")
    assert report["run"]["device"] == "neuron"
    assert report["run"]["status"] in ("ok", "failed", "crashed", "timed out")
    if report["run"]["status"] in ("ok", "failed"):  # it reported before it ended
        assert report["policy_64bit"] == "narrow"
    for finding in report["findings"]:
        assert {"kind", "severity", "title", "advice"} <= finding.keys()
        assert finding["severity"] in SEVERITIES
        for site in finding.get("sites", []):
            assert site["site"] is None or set(site["site"]) == FRAME_KEYS
    order = [f["severity"] for f in report["findings"]]
    assert order == sorted(order, key=["blocker", "warning", "info"].index)
    for action in report["actions"]:
        assert action["severity"] in SEVERITIES and action["text"]


def only(report, kind):
    (finding,) = [f for f in report["findings"] if f["kind"] == kind]
    return finding


def line_of(code):
    """The line number of `code` in porting.py."""
    with open(PORTING) as f:
        return next(i for i, line in enumerate(f, 1) if line.strip() == code)


def test_cpu_fallback_op_is_named_at_the_users_line_with_its_cost():
    out, report = check("fallback")
    assert_schema(report)
    assert out.returncode == 0 and report["verdict"] == "ready with warnings"
    fallback = only(report, "cpu_fallback")
    assert fallback["op"] == "aten::nonzero"
    assert fallback["principle"] == "data_dependent_shape"
    assert fallback["calls"] == 3 and fallback["eager_calls"] == 3
    # Each call copies the bool mask (12 bytes) to the host and the int64 indices of the six
    # elements above 5 (48 bytes) back.
    assert fallback["bytes"] == 3 * (12 + 48)
    assert fallback["host_time_s"] > 0 and 0 < fallback["host_share"] < 1
    (site,) = fallback["sites"]
    assert site["site"]["line"] == line_of("torch.nonzero(x > 5)")
    assert site["site"]["code"] == "torch.nonzero(x > 5)"
    assert (site["mode"], site["phase"], site["calls"]) == ("eager", "forward", 3)
    assert report["actions"][0]["kind"] == "cpu_fallback"
    assert report["counters"]["FallbackOp::aten::nonzero"] == 3


def test_64bit_data_float64_narrowed_and_int64_that_fits():
    out, report = check("float64", "int64", options=("--fail-on", "warning"))
    assert_schema(report)
    assert report["verdict"] == "ready with warnings" and out.returncode == 1
    narrowed = only(report, "float64")
    assert narrowed["severity"] == "warning"
    # ones (10 values), the division (10) and the sum (1) all produced float64 values.
    assert narrowed["values"] == 21
    assert {s["op"] for s in narrowed["sites"]} == {
        "aten::fill_.Scalar",
        "aten::div.Tensor",
        "aten::sum.dim_IntList",
    }
    third = line_of("third = torch.ones(10, dtype=torch.float64, device=device) / 3")
    assert {s["site"]["line"] for s in narrowed["sites"]} == {third, third + 1}
    fits = only(report, "int64")
    assert fits["severity"] == "info"
    (index,) = [s for s in fits["sites"] if s["op"] == "the copy to neuron"]
    assert (index["min"], index["max"], index["values"]) == (1, 3, 3)


def test_int64_overflow_blocks_and_is_the_failures_cause():
    out, report = check("int64-overflow")
    assert_schema(report)
    assert out.returncode == 1 and report["verdict"] == "blocked"
    overflow = only(report, "int64_overflow")
    assert overflow["severity"] == "blocker" and overflow["value"] == 2**40
    line = line_of("return torch.tensor([2**40], device=device) + 1")
    assert overflow["sites"][0]["site"]["line"] == line
    failure = only(report, "script_failure")
    assert failure["cause"] == "int64_overflow"
    assert failure["error"]["type"] == "RuntimeError"
    assert failure["error"]["where"]["line"] == line
    assert "does not fit in int32" in failure["error"]["message"]
    assert report["run"]["status"] == "failed" and report["run"]["exit_code"] == 1


@pytest.mark.parametrize(
    "word, severity, exit_code", [("sparse", "blocker", 1), ("sparse-caught", "warning", 0)]
)
def test_excluded_feature_blocks_unless_the_script_carries_on(word, severity, exit_code):
    out, report = check(word)
    assert_schema(report)
    excluded = only(report, "excluded")
    assert excluded["feature"] == "Sparse tensors" and excluded["severity"] == severity
    line = line_of("return torch.eye(3, device=device).to_sparse()")
    assert excluded["sites"][0]["site"]["line"] == line
    assert out.returncode == exit_code


def test_failure_only_on_neuron_is_told_apart_by_the_cpu_run(tmp_path):
    markdown = tmp_path / "report.md"
    out, report = check("channels-last", options=("--compare-cpu", "--report", str(markdown)))
    assert_schema(report)
    assert out.returncode == 1 and report["verdict"] == "blocked"
    assert only(report, "excluded")["feature"] == "channels_last"
    failure = only(report, "script_failure")
    assert failure["cause"] == "excluded" and failure["fails_on_cpu"] is False
    assert report["cpu_run"]["status"] == "ok" and report["cpu_run"]["device"] == "cpu"
    text = markdown.read_text()
    assert "**Verdict: blocked**" in text and "## What to change" in text
    assert "the failure is specific to neuron" in text
    assert ".contiguous(memory_format=torch.channels_last)" in text


def test_op_with_no_implementation():
    out, report = check("no-kernel")
    assert_schema(report)
    missing = only(report, "no_kernel")
    assert missing["op"] == "aten::cudnn_convolution" and missing["severity"] == "blocker"
    assert only(report, "script_failure")["cause"] == "no_kernel"


def test_nki_kernel_that_fails_validation_is_named_at_the_kernel_line():
    out, report = check("nki-kernel")
    assert_schema(report)
    failure = only(report, "nki_validation")
    assert "partition dimension 256 exceeds maximum 128" in failure["message"]
    site = failure["sites"][0]["site"]
    assert site["code"] == "tile = nl.ndarray((256, 64), dtype=a.dtype, buffer=nl.sbuf)"
    assert only(report, "script_failure")["cause"] == "nki_validation"


def test_compile_graph_break_and_recompile_for_a_new_shape():
    out, report = check("compiled", timeout=300)
    assert_schema(report)
    assert out.returncode == 0 and report["verdict"] == "ready with warnings"
    compiled = report["compile"]
    # One graph before the break for each input shape; nothing is left to compile after it.
    assert compiled["graphs"] == 2 and compiled["recompiles"] == 1
    assert compiled["graph_breaks"] >= 1 and compiled["cache_misses"] == 2
    assert compiled["compile_time_s"] > 0 and compiled["eager_fallbacks"] == 0
    graph_break = only(report, "graph_break")
    assert graph_break["reason"] == "Call to `torch._dynamo.graph_break()`"
    assert graph_break["sites"][0]["site"]["code"] == "torch._dynamo.graph_break()"
    recompile = only(report, "recompile")
    assert recompile["cause"] == "new input shape" and recompile["function"].startswith("step")
    assert "size mismatch at index 0. expected 4, actual 8" in recompile["reasons"][0]


def test_random_ops_on_the_device_are_told_and_int64_draws_folded():
    out, report = check("random")
    assert_schema(report)
    assert out.returncode == 0 and report["verdict"] == "ready with warnings"
    drawn = only(report, "random")
    assert drawn["severity"] == "info" and "TORCH_NEURONX_RNG=cpu" in drawn["advice"]
    ops = [s["op"] for s in drawn["sites"]]
    assert ops == ["aten::native_dropout", "aten::random_.from"]
    assert drawn["sites"][0]["site"]["line"] == line_of(
        "torch.nn.functional.dropout(torch.ones(64, device=device), 0.5)"
    )
    folded = only(report, "int64_random")
    assert folded["severity"] == "warning" and "[0, 4294967295)" in folded["title"]
    assert 0 < folded["sites"][0]["values"] < 64
    assert [a["kind"] for a in report["actions"]] == ["int64_random"]


def test_clean_script_is_ready():
    out, report = check("int64")
    assert_schema(report)
    assert out.returncode == 0 and report["verdict"] == "ready"
    assert report["actions"] == []
    assert report["counters"]["NativeOp::aten::index.Tensor"] == 1


def test_hardware_only_variables_are_info_findings():
    """A TorchNeuron variable with no effect here is told, and changes no verdict."""
    out, report = check("int64", env={"TORCH_NEURONX_ENABLE_HOST_CC": "1"})
    assert_schema(report)
    assert out.returncode == 0 and report["verdict"] == "ready"
    finding = only(report, "hardware_only")
    assert finding["severity"] == "info"
    assert finding["title"] == "`TORCH_NEURONX_ENABLE_HOST_CC=1` has no effect on the emulator"
    assert "collectives already run on the host" in finding["advice"]


def test_adaptive_eager_is_reported_when_it_is_on():
    out, report = check("elementwise", env={"TORCH_NEURONX_ENABLE_CONCATENATION": "1"})
    assert out.returncode == 0 and report["verdict"] == "ready"
    fusion = report["adaptive_eager"]
    assert fusion["queued_ops"] == 4 and fusion["fused_ops"] == 4
    assert fusion["fused_kernels"] == 1 and fusion["runs"] == {"op": 1}
    text = run("check", PORTING, "elementwise", env={"TORCH_NEURONX_ENABLE_CONCATENATION": "1"})
    assert "Adaptive eager: 4 ops queued, 4 of them in 1 fused kernels" in text.stdout
    _, off = check("elementwise")
    assert off["adaptive_eager"] is None


def test_module_mode_runs_as_python_dash_m():
    out, report = run_json("check", "-m", "porting", "fallback", cwd=script(""))
    assert out.returncode == 0, out.stderr
    assert report["command"] == "python -m porting fallback"
    assert only(report, "cpu_fallback")["sites"][0]["site"]["file"].endswith("porting.py")


def test_markdown_report_on_stdout_without_json():
    out = run("check", PORTING, "fallback")
    assert out.returncode == 0
    assert out.stdout.startswith("# torchneuron check:")
    assert "**Verdict: ready with warnings**" in out.stdout
    assert "| `" in out.stdout and "torch.nonzero(x > 5)" in out.stdout
    assert "done" in out.stderr  # the script's own output goes to stderr
    with pytest.raises(json.JSONDecodeError):
        json.loads(out.stdout)


def test_timeout_stops_the_run_and_blocks():
    out, report = check("fallback", options=("--timeout", "0.5"))
    assert_schema(report)
    assert out.returncode == 1 and report["verdict"] == "blocked"
    assert report["run"]["status"] == "timed out"
    assert "0.5 s timeout" in only(report, "script_failure")["title"]


def test_usage_errors_exit_2():
    assert run("check").returncode == 2
    missing = run("check", "no/such/script.py")
    assert missing.returncode == 2 and "is not a file" in missing.stderr


@pytest.mark.slow
def test_hugging_face_trainer_is_ready():
    out, report = run_json("check", script("hf_trainer.py"), "--steps", "2", timeout=300)
    assert_schema(report)
    assert out.returncode == 0, out.stderr
    assert report["verdict"] == "ready" and report["run"]["status"] == "ok"
    assert sum(v for k, v in report["counters"].items() if k.startswith("NativeOp::")) > 100
