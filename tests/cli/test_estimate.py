"""`torchneuron estimate` and `torch_neuronx.estimate`: the roofline's anchors against the
documented peak rates, FLOPs against torch's FlopCounterMode and the 6·N·tokens rule, NKI
kernels against the NKI cost model, and the CLI on small scripts."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from dist_harness import free_port
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

import nki
import torch_neuronx
from torch_neuronx import _config as config
from torch_neuronx import _roofline as roofline
from torch_neuronx.cli import main

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
LNC = config.get("NEURON_LOGICAL_NC_CONFIG")
PLATFORMS = sorted(roofline.HARDWARE)


def _only(estimate, platform):
    (row,) = estimate.rows(platform)
    return row


@pytest.mark.parametrize("platform", PLATFORMS)
def test_large_bf16_gemm_is_compute_bound_at_the_documented_tensor_engine_peak(platform):
    n = 8192
    a = torch.empty(n, n, dtype=torch.bfloat16, device="meta")
    row = _only(torch_neuronx.estimate(torch.mm, a, a), platform)
    # 79 dense BF16 TFLOPS per physical NeuronCore on both generations (nki_spec.md §4).
    peak = 79e12 * LNC
    assert row["engine"] == "TensorE" and row["bound"] == "compute"
    assert row["flops"] == 2 * n**3
    assert row["time_s"] == pytest.approx(2 * n**3 / peak, rel=1e-12)
    summary = torch_neuronx.estimate(torch.mm, a, a).summary(platform)
    assert summary["mfu"] == pytest.approx(1.0)


@pytest.mark.parametrize("platform, hbm_tb_s", [("trn2", 2.9), ("trn3", 4.9)])
def test_large_elementwise_op_is_hbm_bound_at_the_documented_bandwidth(platform, hbm_tb_s):
    a = torch.empty(8192, 8192, dtype=torch.bfloat16, device="meta")
    row = _only(torch_neuronx.estimate(torch.add, a, a), platform)
    moved = 3 * a.numel() * 2  # two inputs read, one output written
    per_core = hbm_tb_s * 1e12 / 8 * LNC  # the chip's HBM shared by its 8 NeuronCores
    assert (row["engine"], row["bound"], row["bytes"]) == ("VectorE", "HBM", moved)
    assert row["time_s"] == pytest.approx(moved / per_core, rel=1e-12)


def test_estimate_scales_linearly_with_batch_when_compute_bound():
    model = torch.nn.Sequential(
        torch.nn.Linear(4096, 16384, bias=False), torch.nn.Linear(16384, 4096, bias=False)
    ).to(device="meta", dtype=torch.bfloat16)
    times = {}
    for batch in (4096, 8192, 16384):
        x = torch.empty(batch, 4096, dtype=torch.bfloat16, device="meta")
        summary = torch_neuronx.estimate(model, x).summary("trn2")
        assert set(op["bound"] for op in summary["ops"].values()) == {"compute"}
        times[batch] = summary["step_time_s"]
    assert times[8192] == pytest.approx(2 * times[4096], rel=1e-12)
    assert times[16384] == pytest.approx(4 * times[4096], rel=1e-12)


def test_training_step_on_neuron_counts_forward_and_backward_flops_like_flop_counter_mode():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 8))
    x = torch.randn(32, 64)
    with FlopCounterMode(display=False) as reference:
        model(x).sum().backward()
    model.zero_grad()
    estimate = torch_neuronx.estimate(model.to("neuron"), x.to("neuron"), train=True)
    summary = estimate.summary("trn2")
    assert summary["flops"] == reference.get_total_flops() > 0
    classes = {row["class"] for row in estimate.rows("trn2")}
    assert {"matmul", "activation", "vector"} <= classes  # gelu on ScalarE, sums on VectorE


def test_compiled_model_is_estimated_as_its_eager_ops():
    model = torch.nn.Linear(64, 32).to("neuron")
    x = torch.randn(8, 64, device="neuron")
    eager = torch_neuronx.estimate(model, x)
    compiled = torch_neuronx.estimate(torch.compile(model), x)
    assert compiled.ops == eager.ops
    assert compiled.summary("trn2")["flops"] == 2 * 8 * 64 * 32


def test_sdpa_on_neuron_counts_torch_attention_flops():
    q = torch.randn(2, 4, 128, 32, device="neuron")
    estimate = torch_neuronx.estimate(
        torch.nn.functional.scaled_dot_product_attention, q, q, q, is_causal=True
    )
    (row,) = [r for r in estimate.rows("trn2") if r["class"] == "attention"]
    assert row["flops"] == sdpa_flop_count(q.shape, q.shape, q.shape)
    assert estimate.to_dict()["host_transfer_bytes"] == 0  # SDPA's result is not a transfer


def test_llama_style_model_on_meta_follows_the_six_n_tokens_rule():
    transformers = pytest.importorskip("transformers")
    config_ = transformers.LlamaConfig(
        vocab_size=1024,
        hidden_size=256,
        intermediate_size=1024,
        num_hidden_layers=3,
        num_attention_heads=8,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config_)
        tokens = torch.randint(0, 1024, (2, 128))
    estimate = torch_neuronx.estimate(model, input_ids=tokens, labels=tokens, train=True)
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    rows = estimate.rows("trn2")
    matmul = sum(r["flops"] for r in rows if r["class"] == "matmul")
    # Forward 2·N·T and backward 4·N·T for the weights of every linear layer (the LM head too).
    assert matmul == 6 * linear * tokens.numel()
    attention = sum(r["flops"] for r in rows if r["class"] == "attention")
    assert attention > 0  # SDPA on meta is estimated as the fused kernel the device runs


def test_nki_kernels_take_the_nki_cost_model_latency():
    sys.path.insert(0, os.path.join(EXAMPLES, "nki"))
    try:
        from tensor_add import tensor_add
    finally:
        sys.path.pop(0)

    @torch_neuronx.nki_op("estimate_test::tensor_add")
    def custom_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return tensor_add(a, b)

    a = torch.randn(256, 1024, device="neuron")
    meta = torch.empty(256, 1024, device="meta")
    calls = [(tensor_add, a), (torch_neuronx.wrap_nki(tensor_add), a), (custom_op, a)]
    for call, x in calls + [(tensor_add, meta), (custom_op, meta)]:
        estimate = torch_neuronx.estimate(call, x, x)
        for platform in PLATFORMS:
            row = _only(estimate, platform)
            expected = nki.estimate(tensor_add, a, a, target=platform).latency_us * 1e-6
            assert (row["engine"], row["bound"]) == ("NKI", "NKI cost model")
            assert row["time_s"] == pytest.approx(expected)


def test_collective_time_is_the_ring_bytes_over_the_documented_bandwidth():
    hw = roofline.HARDWARE["trn2"]
    size, world = 64 << 20, 2
    op = roofline.Op("c10d.allreduce_.default", roofline.LINK, "all_reduce", bytes=size)
    # Ranks on one chip: the cores' DMA engines (368 GB/s per core, nki_spec.md §4).
    seconds, bound = roofline.op_time(op, hw, lnc=2, world_size=world)
    assert bound == "interconnect"
    assert seconds == pytest.approx(size / (368e9 * 2))
    # More ranks than a chip's logical cores: the chip's NeuronLink, shared by its cores.
    seconds, _ = roofline.op_time(op, hw, lnc=2, world_size=16)
    assert seconds == pytest.approx(size / (1.28e12 / 4))


def test_price_gives_cost_per_step_and_epoch():
    a = torch.empty(4096, 4096, dtype=torch.bfloat16, device="meta")
    estimate = torch_neuronx.estimate(torch.mm, a, a, price_per_hour=36.0, steps_per_epoch=1000)
    summary = estimate.summary("trn3")
    replicas = summary["scopes"][-1]["logical_cores"]
    assert summary["cost_per_step"] == pytest.approx(
        36.0 / 3600 * summary["step_time_s"] / replicas
    )
    assert summary["cost_per_epoch"] == pytest.approx(1000 * summary["cost_per_step"])


def test_a_call_that_runs_nothing_on_the_device_is_refused():
    with pytest.raises(ValueError, match="no op on a neuron or meta tensor"):
        torch_neuronx.estimate(torch.mm, torch.ones(2, 2), torch.ones(2, 2))


TRAIN = """
import sys
import torch
torch.manual_seed(0)
model = torch.nn.Linear(128, 64, bias=False).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(int(sys.argv[1])):
    x = torch.randn(32, 128).to("neuron")
    model(x).square().mean().backward()
    opt.step()
    opt.zero_grad()
print("done")
"""

INFER = """
import torch
model = torch.nn.Linear(128, 64, bias=False).to("neuron")
with torch.no_grad():
    for _ in range(4):
        model(torch.ones(32, 128, device="neuron"))
"""


def _cli(tmp_path, source, *options, script_args=()):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "torch_neuronx",
            "estimate",
            *options,
            str(script),
            *script_args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_reports_the_last_training_step_of_a_script(tmp_path):
    proc = _cli(tmp_path, TRAIN, "--json", "--price-per-hour", "10", script_args=["3"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "done" in proc.stderr  # the script's output stays off the report
    data = json.loads(proc.stdout)
    assert data["schema"] == "torchneuron.estimate/1" and data["label"] == "ESTIMATE"
    assert data["step"].startswith("the last of 3 training step")
    trn2 = data["platforms"]["trn2"]
    # One step: the forward mm, and the weight gradient's mm (the input needs none).
    assert trn2["flops"] == 2 * (2 * 32 * 128 * 64)
    assert data["host_transfer_bytes"] == 32 * 128 * 4  # the batch, not in the estimate
    assert trn2["cost_per_step"] > 0


def test_cli_divides_a_run_without_optimizer_steps_by_steps(tmp_path):
    whole = _cli(tmp_path, INFER, "--json")
    divided = _cli(tmp_path, INFER, "--json", "--steps", "4")
    assert whole.returncode == divided.returncode == 0, divided.stderr[-2000:]
    whole, divided = json.loads(whole.stdout), json.loads(divided.stdout)
    assert whole["step"].startswith("the whole run")
    assert whole["platforms"]["trn2"]["flops"] == 4 * 2 * 32 * 128 * 64
    assert divided["platforms"]["trn2"]["flops"] == 2 * 32 * 128 * 64
    assert divided["platforms"]["trn3"]["step_time_s"] == pytest.approx(
        whole["platforms"]["trn3"]["step_time_s"] / 4
    )


def test_cli_markdown_is_labelled_and_draws_the_plot(tmp_path):
    pytest.importorskip("matplotlib")
    plot = tmp_path / "classes.png"
    proc = _cli(tmp_path, TRAIN, "--plot", str(plot), "--platform", "trn3", script_args=["2"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("# ESTIMATE")
    assert "## trn3: ESTIMATE time by op class" in proc.stdout and "trn2" not in proc.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_plot_without_matplotlib_says_how_to_get_it(tmp_path, monkeypatch, capsys):
    script = tmp_path / "script.py"
    script.write_text(TRAIN)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(SystemExit) as exit_:
        main(["estimate", "--plot", str(tmp_path / "p.png"), str(script), "1"])
    assert exit_.value.code == 2
    # Not `pip install 'torch-neuronx[tools]'`: from an index that name is AWS's package.
    assert "pip install matplotlib" in capsys.readouterr().err


def test_cli_script_without_device_work_exits_3(tmp_path):
    proc = _cli(tmp_path, "print(1 + 1)\n")
    assert proc.returncode == 3
    assert "ran nothing on a neuron or meta tensor" in proc.stderr


DDP = """
import torch
import torch.distributed as dist
dist.init_process_group("neuron")
torch.neuron.set_device(dist.get_rank())
model = torch.nn.Linear(1024, 1024, bias=False).to("neuron")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    model(torch.ones(64, 1024, device="neuron")).sum().backward()
    dist.all_reduce(model.weight.grad)
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
"""


def test_cli_under_torchrun_estimates_the_collectives_and_rank_0_reports(tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(DDP)
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    # A port of its own: torchrun's default (29500) may be another test's at the same time.
    command = [torchrun, "--nproc-per-node", "2", f"--master-port={free_port()}", "--no-python"]
    command += [sys.executable, "-m"]
    command += ["torch_neuronx", "estimate", "--json", str(script)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)  # one report: rank 0's
    assert data["world_size"] == 2
    grad = 1024 * 1024 * 4
    for platform in PLATFORMS:
        (allreduce,) = [
            r for r in data["platforms"][platform]["ops"].items() if "allreduce" in r[0]
        ]
        hw = roofline.HARDWARE[platform]
        # A ring all-reduce over 2 ranks sends the gradient once, by the cores' DMA engines.
        assert allreduce[1]["bytes"] == grad
        assert allreduce[1]["time_s"] == pytest.approx(grad / (hw.dma_gb_s * 1e9 * LNC))


def test_cli_script_that_fails_exits_1_with_the_estimate_of_what_ran(tmp_path):
    proc = _cli(tmp_path, TRAIN + "raise RuntimeError('out of data')\n", script_args=["2"])
    assert proc.returncode == 1
    assert proc.stdout.startswith("**The script failed** (RuntimeError: out of data)")
    assert "the last of 2 training step(s)" in proc.stdout
