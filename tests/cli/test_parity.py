"""`torchneuron parity`: the same script on the CPU and on neuron, loss curve against loss curve."""

import os

import pytest
from torchneuron_cli import run_json, script

ACCEL = script("accel_train.py")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def parity(*args, **kwargs):
    return run_json("parity", *args, **kwargs)


def assert_schema(report):
    """The JSON document has the documented shape (docs/cli.md)."""
    assert report["schema"] == "torchneuron.parity/1"
    assert report["verdict"] in (
        "bit-identical",
        "within tolerance",
        "statistically equivalent",
        "diverged",
        "not compared",
    )
    assert report["source"] in ("backward", "metric")
    for key in ("steps", "neuron_steps", "cpu_steps"):
        assert isinstance(report[key], int)
    assert report["runs"]["neuron"]["device"] == "neuron"
    assert len(report["curves"]["neuron"]) == report["neuron_steps"]
    assert len(report["curves"]["cpu"]) == report["cpu_steps"]


def test_accel_script_is_bit_identical_with_a_plot_and_report(tmp_path):
    plot, markdown = tmp_path / "curves.png", tmp_path / "parity.md"
    out, report = parity(
        "--plot", str(plot), "--report", str(markdown), ACCEL, "--accel", "--steps", "6"
    )
    assert_schema(report)
    assert out.returncode == 0, out.stderr
    assert report["verdict"] == "bit-identical" and report["steps"] == 6
    assert report["curves"]["neuron"] == report["curves"]["cpu"]
    # The same unchanged command ran on each device: torch.accelerator chose it.
    runs = report["runs"]
    assert runs["neuron"]["command"] == runs["cpu"]["command"]
    assert runs["neuron"]["loss_devices"] == ["neuron"] and runs["cpu"]["loss_devices"] == ["cpu"]
    assert (report["max_abs_diff"], report["first_difference"]) == (0.0, None)
    assert plot.read_bytes().startswith(PNG_SIGNATURE)
    text = markdown.read_text()
    assert "**Verdict: bit-identical**" in text and "![neuron and CPU curves](curves.png)" in text


def test_metric_regex_on_stdout_with_explicit_device_arguments():
    out, report = parity(
        "--metric", r"Loss: ([0-9.]+)", "--neuron-args=--accel", ACCEL, "--steps", "3"
    )
    assert_schema(report)
    assert out.returncode == 0, out.stderr
    assert report["source"] == "metric" and report["verdict"] == "bit-identical"
    assert report["steps"] == 3 and all(v > 0 for v in report["curves"]["cpu"])
    assert report["runs"]["neuron"]["command"].endswith("--steps 3 --accel")
    assert report["runs"]["cpu"]["command"].endswith("--steps 3")


def test_float64_training_is_within_tolerance():
    # The device holds float64 at float32 precision, so the losses differ in their last bits.
    out, report = parity(ACCEL, "--accel", "--steps", "4", "--double")
    assert_schema(report)
    assert out.returncode == 0, out.stderr
    assert report["verdict"] == "within tolerance"
    assert report["first_difference"] == 0 and report["first_divergence"] is None
    assert 0 < report["max_rel_diff"] <= report["rtol"]


CHAR_GPT = script("char_gpt.py")
DEVICES = ("--cpu-args=--device=cpu", "--neuron-args=--device=neuron")


def _dropout_sites(report):
    return [o for o in report["rng"]["ops"] if o["op"] == "aten::native_dropout"]


def test_dropout_draws_the_cpu_runs_numbers_and_is_bit_identical():
    # nanoGPT's shape: batches drawn with torch.randint on the CPU, dropout 0.2 on the device.
    out, report = parity(*DEVICES, CHAR_GPT, "--iters", "6")
    assert_schema(report)
    assert out.returncode == 0, out.stderr
    assert report["verdict"] == "bit-identical" and report["steps"] == 6
    assert report["rng"]["source"] == "cpu" and report["rng"]["first_device_op"] is None
    sites = _dropout_sites(report)
    assert sites and all(o["source"] == "cpu" for o in sites)
    assert all(o["site"]["file"] == CHAR_GPT for o in sites)


@pytest.mark.slow
def test_compiled_dropout_is_bit_identical():
    # One host thread: with two, Inductor's embedding backward adds in an order that differs
    # from run to run even between two CPU runs.
    out, report = parity(
        *DEVICES, CHAR_GPT, "--iters", "4", "--compile", env={"OMP_NUM_THREADS": "1"}, timeout=900
    )
    assert_schema(report)
    assert out.returncode == 0, out.stderr
    assert report["verdict"] == "bit-identical" and report["steps"] == 4
    graphs = [o for o in report["rng"]["ops"] if o["op"].startswith("compiled graph")]
    assert graphs and all(o["source"] == "cpu" for o in graphs)


def test_device_rng_is_explained_and_judged_by_statistics(tmp_path):
    markdown = tmp_path / "parity.md"
    out, report = parity("--device-rng", "--report", str(markdown), *DEVICES, CHAR_GPT)
    assert_schema(report)
    assert out.returncode == 0, out.stderr
    assert report["verdict"] == "statistically equivalent"
    assert report["first_difference"] == 0
    first = report["rng"]["first_device_op"]
    assert first["op"] == "aten::native_dropout" and first["source"] == "device"
    assert first["site"]["file"] == CHAR_GPT and "self.drop(" in first["site"]["code"]
    assert "drew from the device's generators" in report["reason"]
    assert f"char_gpt.py:{first['site']['line']}" in report["reason"]
    assert report["statistics"]["equivalent"] and len(report["statistics"]["windows"]) == 5
    # Chance was measured by a second CPU run with another seed, which drew other numbers.
    assert report["statistics"]["reference"]
    assert report["runs"]["cpu_other_seed"]["status"] == "ok"
    assert any(w["reference_difference"] != 0 for w in report["statistics"]["windows"])
    assert "**Verdict: statistically equivalent**" in markdown.read_text()


def test_device_rng_statistics_still_catch_a_real_difference():
    # The neuron run does not learn (lr 0): chance does not explain that.
    out, report = parity(
        "--device-rng", "--cpu-args=--device=cpu", "--neuron-args=--device=neuron --lr=0", CHAR_GPT
    )
    assert_schema(report)
    assert out.returncode == 1
    assert report["verdict"] == "diverged" and not report["statistics"]["equivalent"]
    assert "chance does not explain the difference" in report["reason"]


def test_device_rng_with_too_few_steps_still_names_the_cause():
    out, report = parity("--device-rng", ACCEL, "--accel", "--steps", "3", "--dropout", "0.5")
    assert_schema(report)
    assert report["verdict"] == "diverged" and report["first_divergence"] == 0
    assert "too few steps" in report["reason"] and "accel_train.py" in report["reason"]
    assert out.returncode == 1


def test_cpu_run_has_no_accelerator():
    # `current_accelerator() or cpu`: a CUDA build of torch names cuda even with no GPU.
    out, report = parity(CHAR_GPT, "--device", "auto", "--iters", "3")
    assert_schema(report)
    assert out.returncode == 0, out.stderr
    assert report["verdict"] == "bit-identical"
    assert report["runs"]["cpu"]["loss_devices"] == ["cpu"]
    assert report["runs"]["neuron"]["loss_devices"] == ["neuron"]


def test_script_that_never_uses_the_device_is_not_compared():
    out, report = parity(ACCEL, "--steps", "2")
    assert_schema(report)
    assert out.returncode == 3 and report["verdict"] == "not compared"
    assert "its losses were on cpu" in report["reason"]
    assert report["runs"]["cpu"] is None  # nothing to compare it with


def test_run_that_fails_is_not_compared():
    out, report = parity(script("porting.py"), "int64-overflow")
    assert_schema(report)
    assert out.returncode == 3 and report["verdict"] == "not compared"
    assert "the neuron run failed at" in report["reason"] and "int32" in report["reason"]
    assert report["runs"]["cpu"] is None


def test_script_that_trains_on_both_devices_is_compared_within_its_run():
    demo = os.path.join(ROOT, "examples", "demo.py")
    out, report = parity(demo, env={"DEMO_STEPS": "3"}, timeout=300)
    assert_schema(report)
    assert out.returncode == 0, out.stderr
    assert report["same_run"] and report["runs"]["cpu"] is None
    # Five warm-up steps, then the demo's steps, on each device.
    assert report["verdict"] == "bit-identical" and report["steps"] == 5 + 3


@pytest.mark.slow
def test_hugging_face_trainer_is_bit_identical():
    out, report = parity(script("hf_trainer.py"), "--steps", "4", timeout=400)
    assert_schema(report)
    assert out.returncode == 0, out.stderr
    assert report["runs"]["neuron"]["loss_devices"] == ["neuron"]
    assert report["verdict"] == "bit-identical" and report["steps"] == 4


def test_seed_offset_gives_the_same_program_other_random_numbers(tmp_path):
    # The reference run of --device-rng: torch.manual_seed(s) seeds s + offset.
    import json
    import subprocess
    import sys

    from torch_neuronx.cli import _runs as runs

    program = tmp_path / "draws.py"
    program.write_text("import torch\ntorch.manual_seed(7)\nprint(torch.rand(2).tolist())\n")

    def draws(*options):
        command = [sys.executable, runs.LAUNCHER, "--events", str(tmp_path / "e.jsonl")]
        out = subprocess.run(
            [*command, "--cpu-only", *options, str(program)], capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    plain, offset, again = draws(), draws("--seed-offset", "1"), draws("--seed-offset", "1")
    assert offset == again != plain == draws()
