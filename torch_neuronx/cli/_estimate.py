"""ESTIMATEs one step of a script on Trainium2 and Trainium3: a roofline over the ops it runs."""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from torch_neuronx.cli import _report as report
from torch_neuronx.cli import _runs as runs

EPILOG = """\
The script runs once on the neuron device (or on meta tensors, which cost no memory or time)
while every op it runs is recorded: FLOPs from torch.utils.flop_counter, HBM bytes, engine;
NKI kernels take the NKI cost model's latency, collectives (under torchrun) the documented
interconnect bandwidth. torch.compile is disabled for the run (TORCH_COMPILE_DISABLE=1):
compiled code is estimated as its eager ops, without fusion.

One step: each optimizer.step() over neuron (or meta) parameters ends a step, and the report
shows the last complete one. Under vLLM (in-process engine) each engine step ends a step and the
report shows the last decode step, with tokens/s. A script without steps is one step as a
whole; --steps N makes a step the whole run divided by N.

Every number is an ESTIMATE from documented peak rates (torch_neuronx/_platforms.py cites each),
not a measurement. Exit status: 0; 1 when the script failed (the estimate covers what ran);
3 when it ran nothing on the device; 2 for a usage error. Under torchrun
(`torchrun --nproc-per-node 2 --no-python torchneuron estimate train.py`) rank 0 reports.
The JSON schema (torchneuron.estimate/1) is in docs/cli.md."""


def add_arguments(parser):
    """Adds this subcommand's options."""
    from torch_neuronx._roofline import HARDWARE

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument(
        "--steps",
        type=report.positive_int,
        metavar="N",
        help="one step is the whole run divided by N (default: the last optimizer step)",
    )
    parser.add_argument(
        "--platform",
        choices=sorted(HARDWARE),
        action="append",
        help="estimate for this platform only (repeatable; default: all)",
    )
    parser.add_argument(
        "--lnc",
        type=int,
        choices=(1, 2),
        help="physical NeuronCores per logical core (default: NEURON_LOGICAL_NC_CONFIG)",
    )
    parser.add_argument(
        "--price-per-hour",
        type=float,
        metavar="PRICE",
        help="the instance's price per hour, for a cost per step (no price is built in)",
    )
    parser.add_argument(
        "--steps-per-epoch", type=report.positive_int, metavar="N", help="for a cost per epoch"
    )
    parser.add_argument(
        "--top", type=report.positive_int, default=12, help="ops to list (default 12)"
    )
    parser.add_argument(
        "--plot", metavar="FILE.png", help="draw the time by op class (needs matplotlib)"
    )
    report.add_output_arguments(parser)
    runs.add_target_arguments(parser)


def run(args):
    """Runs the script, recording its ops, and reports the estimate; returns the exit code."""
    from torch_neuronx import _config as config
    from torch_neuronx import _roofline as model

    target = runs.target_from(args)
    if args.plot:
        _check_matplotlib()
    recorded = _record(target, args)
    rank0 = os.environ.get("RANK", "0") == "0"
    if recorded is None or not recorded["ops"]:
        why = (
            "the script ran nothing on a neuron or meta tensor"
            if recorded
            else "the script ended without reporting (it crashed, was killed or timed out)"
        )
        print(f"torchneuron estimate: {why}; nothing to estimate", file=sys.stderr)
        return 3 if recorded and recorded["status"] == "ok" else 1
    result = model.Estimate(
        model.ops_from_json(recorded["ops"]),
        lnc=args.lnc or config.logical_core_size(),
        world_size=recorded["world_size"],
        step=recorded["step"],
        tokens_per_step=recorded["tokens_per_step"],
        price_per_hour=args.price_per_hour,
        steps_per_epoch=args.steps_per_epoch,
        platforms=tuple(args.platform or model.HARDWARE),
    )
    data = result.to_dict()
    data["command"] = target.command()
    data["run"] = {k: recorded[k] for k in ("status", "exit_code", "error")}
    if rank0:
        text = model.markdown(data, args.top)
        if recorded["status"] != "ok":
            error = recorded["error"] or {}
            text = (
                f"**The script failed** ({error.get('type', 'exit')}: "
                f"{report.first_line(error.get('message'))}); the estimate covers what ran.\n\n"
            ) + text
        if args.plot:
            model.plot(data, args.plot)
            text += f"\nPlot of the time by op class: {args.plot}\n"
        report.write(args, text, data)
    return 0 if recorded["status"] == "ok" else 1


def _check_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(
            "torchneuron estimate: --plot needs matplotlib: pip install matplotlib (in the "
            "torchneuron checkout: pip install --no-build-isolation -e '.[tools]'), or leave "
            "out --plot",
            file=sys.stderr,
        )
        raise SystemExit(2) from None


def _record(target, args):
    """Runs the script in a child process that records its ops; returns what it wrote."""
    with tempfile.TemporaryDirectory(prefix="torchneuron-estimate-") as tmp:
        out = os.path.join(tmp, "ops.json")
        command = [sys.executable, "-m", "torch_neuronx.cli._estimate", "--out", out]
        command += ["--steps", str(args.steps)] if args.steps else []
        command += ["-m"] * target.as_module + [target.name, *target.args]
        env = dict(os.environ, TORCH_COMPILE_DISABLE="1", TORCH_DEVICE_BACKEND_AUTOLOAD="1")
        try:
            # The script's output goes to stderr: stdout is the report's.
            subprocess.run(command, env=env, stdout=sys.stderr, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"torchneuron estimate: stopped after {args.timeout:g} s", file=sys.stderr)
        if not os.path.exists(out):
            return None
        with open(out) as f:
            return json.load(f)


def child(argv=None):
    """In the script's process: runs it under the recorder and writes the chosen step."""
    from torch_neuronx import _roofline as model
    from torch_neuronx.cli import _launch as launch

    parser = argparse.ArgumentParser(prog="torch_neuronx.cli._estimate")
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int)
    launch.add_child_target_arguments(parser)
    opts = parser.parse_args(argv)
    launch.set_argv_and_path(opts.target, opts.args, opts.as_module)
    sources = launch.SourceFiles()
    with model.Recorder(split_steps=not opts.steps) as recorder:
        code, error = launch.run_target(opts.target, opts.as_module)
    decode = [i for i, tokens in enumerate(recorder.step_tokens) if tokens]
    tokens = None
    if opts.steps:
        ops = model.scaled(recorder.run, opts.steps)
        step = f"the whole run divided by --steps {opts.steps}"
    elif decode:
        ops, tokens = recorder.steps[decode[-1]], recorder.step_tokens[decode[-1]]
        step = (
            f"the last of {len(decode)} decode step(s) of the serving engine, {tokens} "
            "sequence(s) producing a token each"
        )
    elif recorder.steps:
        ops = recorder.steps[-1]
        step = (
            f"the last of {len(recorder.steps)} training step(s), each ending at an "
            "optimizer.step() on neuron or meta parameters"
        ) + (" (the only step includes the script's setup)" if len(recorder.steps) == 1 else "")
    else:
        ops = recorder.run
        step = "the whole run (it made no optimizer.step() on neuron or meta parameters)"
    with open(opts.out, "w") as f:
        json.dump(
            {
                "status": "ok" if code == 0 else "failed",
                "exit_code": code,
                "error": launch.describe_exception(error, sources) if error else None,
                "step": step,
                "tokens_per_step": tokens,
                "ops": model.ops_to_json(ops),
                "world_size": recorder.world_size,
            },
            f,
        )
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(child())
