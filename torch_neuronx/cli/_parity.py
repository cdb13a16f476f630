"""Runs a script unchanged on the CPU and on neuron and compares the two loss curves."""

import argparse
import math
import os
import re
import shlex
import sys

from torch_neuronx.cli import _report as report
from torch_neuronx.cli import _runs as runs

EPILOG = """\
The neuron run is the script as you run it. The CPU run sets TORCH_DEVICE_BACKEND_AUTOLOAD=0,
so torchneuron is not loaded: scripts that use torch.accelerator when it is available (the
--accel convention, Hugging Face) run on the CPU with no edits; scripts with an explicit device
option take --cpu-args and --neuron-args. A script that itself trains on both devices (as
examples/demo.py does) is compared within its one neuron run.

The curve is the scalar passed to each backward() on a 0-dim tensor, or with --metric REGEX the
numbers REGEX finds in the script's stdout (its first group, or the whole match).

Random numbers: by default, random ops on neuron tensors draw from the CPU's default generator
(TORCH_NEURONX_RNG=cpu), the stream the CPU run draws from in the same program order, so dropout
and on-device randn see the CPU's numbers and the curves compare step by step. --device-rng
draws them from the device's own generators, as on Trainium: the curves then differ by chance,
and the verdict compares their statistics instead of their steps. What chance alone gives is
measured: when the steps differ, a second CPU run draws other random numbers (torch's seeds
offset by one, as another seed would), and each windowed mean of the neuron curve must lie
within three errors of the CPU curve's, an error combining the curves' step noise with how far
the two CPU runs' means are apart.

Verdict: bit-identical, within tolerance (|neuron - cpu| <= atol + rtol * |cpu| at every step),
statistically equivalent (--device-rng only) or diverged. Exit status: 0, or 1 when the verdict
reaches --fail-on (default: diverged); 3 when the curves could not be compared (a run failed or
recorded nothing); 2 for a usage error. The JSON schema (torchneuron.parity/1) is in
docs/cli.md."""

SCHEMA = "torchneuron.parity/1"
VERDICTS = ("bit-identical", "within tolerance", "statistically equivalent", "diverged")
NOT_COMPARED = "not compared"
# The statistical comparison (--device-rng): at most this many windows, each mean within this
# many standard errors of the other curve's.
WINDOWS = 5
STANDARD_ERRORS = 3.0


def add_arguments(parser):
    """Adds this subcommand's options."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument(
        "--cpu-args",
        default="",
        metavar="ARGS",
        help="extra arguments for the CPU run, e.g. --cpu-args='--device cpu'",
    )
    parser.add_argument(
        "--neuron-args",
        default="",
        metavar="ARGS",
        help="extra arguments for the neuron run, e.g. --neuron-args='--device neuron'",
    )
    parser.add_argument(
        "--metric",
        metavar="REGEX",
        help="read the curve from stdout: each match of REGEX is one step (its first group, "
        "or the whole match, is the value)",
    )
    parser.add_argument(
        "--rtol", type=float, default=1e-4, help="relative tolerance (default: 1e-4)"
    )
    parser.add_argument(
        "--atol", type=float, default=1e-6, help="absolute tolerance (default: 1e-6)"
    )
    parser.add_argument(
        "--device-rng",
        action="store_true",
        help="draw random numbers on neuron from the device's generators (as on Trainium) "
        "instead of the CPU's stream, and compare the curves' statistics",
    )
    parser.add_argument("--plot", metavar="FILE.png", help="draw both curves and their difference")
    parser.add_argument(
        "--fail-on",
        choices=("diverged", "differs", "never"),
        default="diverged",
        help="exit with status 1 when the curves diverge (default), or differ at all",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="show the script's output as it runs"
    )
    report.add_output_arguments(parser)
    runs.add_target_arguments(parser)


def run(args):
    """Runs both sides and compares them; returns the exit code."""
    target = runs.target_from(args)
    metric = _compile_metric(args.metric)
    neuron = _run_with_progress(target, "neuron", args, metric, total=None)
    neuron_curve, own_cpu_curve = _curves(neuron, metric)
    rng = "device" if args.device_rng else "cpu"
    same_run = metric is None and _compares_itself(neuron_curve, own_cpu_curve, args)
    cpu, cpu_curve = None, []
    if same_run:
        cpu_curve = own_cpu_curve
    elif neuron.status == "ok" and neuron_curve:
        cpu = _run_with_progress(target, "cpu", args, metric, total=len(neuron_curve))
        cpu_curve = _curves(cpu, metric)[0 if metric else 1]
    runs_data = {"neuron": neuron.summary(), "cpu": cpu.summary() if cpu else None}
    for name, result in (("neuron", neuron), ("cpu", cpu)):
        if result is not None:
            runs_data[name]["loss_devices"] = sorted({device for _, device in result.losses})
    data = {
        "schema": SCHEMA,
        "command": target.command(),
        "source": "metric" if metric else "backward",
        "metric": args.metric,
        "same_run": same_run,
        **compare(neuron_curve, cpu_curve, args.rtol, args.atol),
        "rng": _random_ops(neuron, rng),
        "statistics": None,
        "runs": runs_data,
        "plot": None,
    }
    reference = None
    if _judged_by_statistics(data, neuron_curve, cpu_curve):
        spread = _run_with_progress(
            target, "cpu", args, metric, total=len(cpu_curve), seed_offset=1
        )
        reference = _curves(spread, metric)[0 if metric else 1]
        runs_data["cpu_other_seed"] = spread.summary()
    _explain_randomness(data, neuron_curve, cpu_curve, reference)
    _explain_missing(data, neuron, cpu, neuron_curve, cpu_curve)
    data["curves"] = {"neuron": neuron_curve, "cpu": cpu_curve}
    if args.plot and data["steps"]:
        plot(data, args.plot)
        data["plot"] = args.plot
    report.write(args, markdown(data, args.report), data)
    if data["verdict"] == NOT_COMPARED:
        return 3
    failing = {
        "diverged": ("diverged",),
        "differs": ("diverged", "statistically equivalent", "within tolerance"),
        "never": (),
    }[args.fail_on]
    return 1 if data["verdict"] in failing else 0


def _compile_metric(pattern):
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except re.error as e:
        raise SystemExit(f"torchneuron parity: --metric {pattern!r} is not a regex: {e}") from e


def _compares_itself(neuron_curve, own_cpu_curve, args):
    # A script that trains on both devices in one run (examples/demo.py) records equally long
    # curves on each; an incidental CPU backward does not make it one.
    return (
        not args.cpu_args
        and not args.neuron_args
        and bool(own_cpu_curve)
        and len(own_cpu_curve) == len(neuron_curve)
    )


def _run_with_progress(target, device, args, metric, total, seed_offset=0):
    from tqdm import tqdm

    extra = shlex.split(args.cpu_args if device == "cpu" else args.neuron_args)
    label = f"{device} run" + (" (other seed)" if seed_offset else "")
    bar = tqdm(total=total, desc=label, unit="step", disable=None, file=sys.stderr)

    def progress(result):
        steps = len(_metric_values(result.stdout, metric)) if metric else len(result.losses)
        bar.update(steps - bar.n)

    try:
        return runs.run(
            target,
            device,
            extra_args=extra,
            observe=device == "neuron",
            rng="device" if args.device_rng else "cpu",
            seed_offset=seed_offset,
            record_losses=metric is None,
            capture=True,
            echo=args.verbose,
            timeout=args.timeout,
            on_progress=progress,
        )
    finally:
        bar.close()


def _metric_values(lines, metric):
    values = []
    for line in lines:
        for found in metric.finditer(line):
            text = found.group(1) if found.groups() else found.group(0)
            try:
                values.append(float(text))
            except ValueError:
                continue
    return values


def _curves(result, metric):
    """(curve on neuron, curve on the CPU) of one run; with a metric, (values, values)."""
    if metric is not None:
        values = _metric_values(result.stdout, metric)
        return values, values
    return (
        [v for v, device in result.losses if device == "neuron"],
        [v for v, device in result.losses if device == "cpu"],
    )


def compare(neuron, cpu, rtol, atol):
    """The verdict and the differences between two curves, step by step."""
    steps = min(len(neuron), len(cpu))
    data = {
        "verdict": NOT_COMPARED,
        "reason": None,
        "rtol": rtol,
        "atol": atol,
        "steps": steps,
        "neuron_steps": len(neuron),
        "cpu_steps": len(cpu),
        "max_abs_diff": None,
        "max_rel_diff": None,
        "first_difference": None,
        "first_divergence": None,
    }
    if steps == 0:
        return data
    max_abs = max_rel = 0.0
    for i, (a, b) in enumerate(zip(neuron, cpu)):
        same = a == b or (math.isnan(a) and math.isnan(b))
        if same:
            continue
        diff = abs(a - b)
        if data["first_difference"] is None:
            data["first_difference"] = i
        close = diff <= atol + rtol * abs(b)
        if not close and data["first_divergence"] is None:
            data["first_divergence"] = i
        if not math.isnan(diff):
            max_abs = max(max_abs, diff)
            max_rel = max(max_rel, diff / abs(b) if b else math.inf)
    data["max_abs_diff"], data["max_rel_diff"] = max_abs, max_rel
    if len(neuron) != len(cpu):
        data["verdict"] = "diverged"
        data["reason"] = f"the neuron run recorded {len(neuron)} steps, the CPU run {len(cpu)}"
        if data["first_divergence"] is None:
            data["first_divergence"] = steps
    elif data["first_difference"] is None:
        data["verdict"] = "bit-identical"
    elif data["first_divergence"] is None:
        data["verdict"] = "within tolerance"
    else:
        data["verdict"] = "diverged"
    return data


def _random_ops(neuron, source):
    """Where the neuron run's random numbers came from, and its random ops on neuron tensors,
    in the order the run first met them."""
    events = [e for e in (neuron.findings or {}).get("events", []) if e["kind"] == "random"]
    events.sort(key=lambda e: e["order"])
    ops = [
        {
            "op": e["op"],
            "source": e["detail"],
            "calls": e["calls"],
            "elements": e["values"],
            "site": e["site"],
            "via": e["via"],
        }
        for e in events
    ]
    device_ops = [o for o in ops if o["source"] == "device"]
    return {
        "source": source,
        "ops": ops,
        "first_device_op": device_ops[0] if device_ops else None,
    }


def compare_statistics(neuron, cpu, reference=None, windows=WINDOWS, errors=STANDARD_ERRORS):
    """Whether two curves learned the same things at the same rate: each has the other's mean in
    every window (consecutive steps, at most `windows` of them) within `errors` errors.
    A curve's noise is estimated from its step-to-step differences (var(diff) / 2), which keeps
    trends out of it; a window's standard error is that of the difference of its two means.
    `reference`, a second run of `cpu`'s side with other random numbers (another seed), shows
    what chance alone does to a window's mean as training goes on (trajectories drift apart,
    and each step's data can differ, which step noise does not measure): its difference from
    `cpu` joins the error in quadrature."""
    steps = min(len(neuron), len(cpu), *([len(reference)] if reference else []))
    count = max(1, min(windows, steps // 2))
    noise = (_step_noise(neuron[:steps]) + _step_noise(cpu[:steps])) / 2
    bounds = [round(i * steps / count) for i in range(count + 1)]
    rows = []
    for low, high in zip(bounds, bounds[1:]):
        a, b = neuron[low:high], cpu[low:high]
        difference = sum(a) / len(a) - sum(b) / len(b)
        standard_error = math.sqrt(2 * noise / len(a))
        drift = None
        if reference:
            c = reference[low:high]
            drift = sum(b) / len(b) - sum(c) / len(c)
        error = math.hypot(standard_error, drift or 0.0)
        rows.append(
            {
                "steps": [low, high],
                "neuron_mean": sum(a) / len(a),
                "cpu_mean": sum(b) / len(b),
                "difference": difference,
                "standard_error": standard_error,
                "reference_difference": drift,
                "error": error,
                "within": abs(difference) <= errors * error,
            }
        )
    return {
        "windows": rows,
        "standard_errors": errors,
        "noise_std": math.sqrt(noise),
        "reference": reference is not None,
        "equivalent": all(r["within"] for r in rows),
    }


def _step_noise(curve):
    diffs = [b - a for a, b in zip(curve, curve[1:])]
    if len(diffs) < 2:
        return 0.0
    mean = sum(diffs) / len(diffs)
    return sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1) / 2


def _judged_by_statistics(data, neuron_curve, cpu_curve):
    """Curves that differ only because the device drew its own random numbers, long enough to
    compare their statistics."""
    return (
        data["rng"]["source"] == "device"
        and data["rng"]["first_device_op"] is not None
        and data["verdict"] == "diverged"
        and len(neuron_curve) == len(cpu_curve)
        and data["steps"] >= 4
    )


def _explain_randomness(data, neuron_curve, cpu_curve, reference=None):
    """With the device's generators, curves that differ are judged by their statistics, and the
    reason names the random ops that made them differ."""
    first = data["rng"]["first_device_op"]
    if data["rng"]["source"] != "device" or first is None or data["verdict"] != "diverged":
        return
    device_ops = [o for o in data["rng"]["ops"] if o["source"] == "device"]
    where = report.code_place(first["site"]) if first["site"] else "(no line of yours)"
    cause = (
        f"random ops at {len(device_ops)} place(s) drew from the device's generators, not the "
        f"CPU's stream (first: `{first['op']}` at {where})"
    )
    if len(neuron_curve) != len(cpu_curve) or data["steps"] < 4:
        data["reason"] = f"{cause}; too few steps to compare the curves' statistics"
        return
    stats = data["statistics"] = compare_statistics(neuron_curve, cpu_curve, reference)
    if stats["equivalent"]:
        data["verdict"] = "statistically equivalent"
        data["reason"] = (
            f"{cause}, so the steps differ by chance; every windowed mean agrees within "
            f"{stats['standard_errors']:g} errors of what chance gives"
        )
    else:
        bad = next(r for r in stats["windows"] if not r["within"])
        data["reason"] = (
            f"{cause}, but chance does not explain the difference: over steps "
            f"{bad['steps'][0]}-{bad['steps'][1] - 1} the means differ by "
            f"{bad['difference']:.4g}, beyond {stats['standard_errors']:g} errors "
            f"({bad['error']:.3g})"
        )


def _explain_missing(data, neuron, cpu, neuron_curve, cpu_curve):
    """A run that failed, or recorded no curve, leaves nothing to judge: says why."""
    problems = []
    for name, result, curve in (("neuron", neuron, neuron_curve), ("cpu", cpu, cpu_curve)):
        if result is None:
            continue
        if result.status != "ok":
            error = result.error or {}
            where = f" at {report.place(error['where'])}" if error.get("where") else ""
            problems.append(
                f"the {name} run {result.status}{where}: {error.get('type', '')}: "
                f"{report.first_line(error.get('message'), 300)}"
            )
        elif not curve:
            recorded = sorted({device for _, device in result.losses})
            problems.append(
                f"the {name} run recorded no curve"
                + (
                    f" on {name} (its losses were on {', '.join(recorded)}: pass "
                    f"--{name}-args to choose its device)"
                    if recorded
                    else " (no backward() on a 0-dim tensor; use --metric REGEX)"
                )
            )
    if problems:
        data["verdict"] = NOT_COMPARED
        data["reason"] = "; ".join(problems)


def plot(data, path):
    """Draws both curves and their difference to a PNG file."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    neuron, cpu = data["curves"]["neuron"], data["curves"]["cpu"]
    steps = data["steps"]
    figure, (top, bottom) = pyplot.subplots(
        2, 1, figsize=(8, 6), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    top.plot(range(len(cpu)), cpu, label="CPU", color="tab:blue", linewidth=2.5, alpha=0.6)
    top.plot(range(len(neuron)), neuron, label="neuron", color="tab:orange", linewidth=1)
    top.set_ylabel("metric" if data["source"] == "metric" else "loss")
    top.set_title(f"{data['command']}: {data['verdict']}")
    top.legend()
    bottom.plot(range(steps), [neuron[i] - cpu[i] for i in range(steps)], color="tab:red")
    bottom.axhline(0, color="gray", linewidth=0.5)
    bottom.set_ylabel("neuron − CPU")
    bottom.set_xlabel("step")
    figure.tight_layout()
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    figure.savefig(path, dpi=100)
    pyplot.close(figure)


def markdown(data, report_path=None):
    """The report for people."""
    out = [f"# torchneuron parity: `{data['command']}`\n"]
    out.append(f"**Verdict: {data['verdict']}**. {_verdict_sentence(data)}\n")
    if data["reason"]:
        out.append(f"Why: {data['reason']}.\n")
    neuron, cpu = data["runs"]["neuron"], data["runs"]["cpu"]
    source = (
        f"numbers matching `{data['metric']}` on stdout"
        if data["source"] == "metric"
        else "the loss passed to each `backward()`"
    )
    if data["same_run"]:
        out.append(
            "The script trains on both devices itself, so one run gave both curves "
            f"(neuron: `{neuron['command']}`). Curve: {source}.\n"
        )
    else:
        out.append(f"Curve: {source}. The CPU run had torchneuron unloaded and no accelerator.\n")
    out.append(_rng_sentence(data["rng"]) + "\n")
    rows = [("Command", f"`{neuron['command']}`", f"`{cpu['command']}`" if cpu else "(same run)")]
    rows.append(("Status", neuron["status"], cpu["status"] if cpu else ""))
    rows.append(
        (
            "Time",
            report.seconds(neuron["script_time_s"]),
            report.seconds(cpu["script_time_s"]) if cpu else "",
        )
    )
    if data["source"] == "backward":
        rows.append(
            (
                "Losses computed on",
                ", ".join(neuron["loss_devices"]) or "(none)",
                ", ".join(cpu["loss_devices"]) or "(none)" if cpu else "",
            )
        )
    rows.append(("Steps", data["neuron_steps"], data["cpu_steps"]))
    out.append(report.table(("", "neuron", "CPU"), rows))
    if data["steps"]:
        out.append(
            f"Max abs difference {_number(data['max_abs_diff'])}, max relative difference "
            f"{_number(data['max_rel_diff'])}; first step that differs: "
            f"{_step(data['first_difference'])}; first beyond tolerance (atol {data['atol']:g}, "
            f"rtol {data['rtol']:g}): {_step(data['first_divergence'])}.\n"
        )
        out.append(_sample_table(data))
    if data["statistics"]:
        out.append(_statistics_table(data["statistics"]))
    if data["plot"]:
        link = data["plot"]
        if report_path:
            link = os.path.relpath(data["plot"], os.path.dirname(os.path.abspath(report_path)))
        out.append(f"![neuron and CPU curves]({link})\n")
    return "\n".join(out)


def _rng_sentence(rng):
    ops = rng["ops"]
    if rng["source"] == "cpu":
        drew = f" (random ops at {len(ops)} place(s) on neuron tensors)" if ops else ""
        return (
            "Random numbers on neuron came from the CPU's default generator, the stream the CPU "
            f"run draws from (TORCH_NEURONX_RNG=cpu){drew}; `--device-rng` uses the device's "
            "generators, as on Trainium."
        )
    if not ops:
        return "Random numbers on neuron: the device's generators; the run drew none on neuron."
    rows = [
        (
            f"`{o['op']}`",
            o["source"],
            o["calls"],
            report.code_place(o["site"]) if o["site"] else "",
        )
        for o in ops[:10]
    ]
    return (
        "Random numbers on neuron came from the device's generators (--device-rng), as on "
        "Trainium: the same seed gives other numbers than on the CPU.\n\n"
        + report.table(("Random op", "Source", "Calls", "Your line"), rows)
    )


def _statistics_table(stats):
    rows = [
        (
            f"{r['steps'][0]}-{r['steps'][1] - 1}",
            f"{r['neuron_mean']:.6g}",
            f"{r['cpu_mean']:.6g}",
            f"{r['difference']:.3g}",
            f"{r['standard_error']:.3g}",
            _number(r["reference_difference"]),
            f"{r['error']:.3g}",
            "yes" if r["within"] else "**no**",
        )
        for r in stats["windows"]
    ]
    reference = (
        "; a second CPU run with another seed shows what chance alone does to each mean"
        if stats["reference"]
        else ""
    )
    headers = ("Steps", "neuron mean", "CPU mean", "Difference", "Std. error")
    return (
        f"Statistics (windowed means within {stats['standard_errors']:g} errors; step noise "
        f"{stats['noise_std']:.3g}{reference}):\n\n"
        + report.table((*headers, "CPU vs CPU, other seed", "Error", "Within"), rows)
    )


def _verdict_sentence(data):
    verdict, steps = data["verdict"], data["steps"]
    if verdict == "bit-identical":
        return f"All {steps} steps are equal bit for bit."
    if verdict == "within tolerance":
        return (
            f"All {steps} steps agree within tolerance; the first difference is at step "
            f"{data['first_difference']}."
        )
    if verdict == "statistically equivalent":
        return (
            f"The steps differ from step {data['first_difference']}, by chance: the curves "
            "learned at the same rate."
        )
    if verdict == "diverged":
        return f"The curves part at step {data['first_divergence']}."
    return "Nothing to compare."


def _number(value):
    return "n/a" if value is None else f"{value:.3g}"


def _step(step):
    return "none" if step is None else str(step)


def _sample_table(data, rows=12):
    neuron, cpu, steps = data["curves"]["neuron"], data["curves"]["cpu"], data["steps"]
    picks = sorted(
        {*range(0, steps, max(1, steps // (rows - 1))), steps - 1}
        | ({data["first_difference"]} if data["first_difference"] is not None else set())
    )
    return report.table(
        ("Step", "neuron", "CPU", "neuron − CPU"),
        [(i, f"{neuron[i]:.8g}", f"{cpu[i]:.8g}", f"{neuron[i] - cpu[i]:.3g}") for i in picks],
    )
