"""Runs PyTorch's own test samples on neuron and on the CPU and reports where they differ."""

import argparse
import contextlib
import json
import os
import pathlib
import sys
import time

from torch_neuronx.cli import _info as info
from torch_neuronx.cli import _report as report
from torch_neuronx.cli import _sweep as sweep
from torch_neuronx.cli._sweep import _outcomes as outcomes

SCHEMA = "torchneuron.coverage/1"
EPILOG = """\
Each sample of the chosen databases and dtypes runs on neuron and on the CPU, from the same
seed, in worker processes. Its outcome:
  passed     the same results as the CPU (bit-identical, or within torch.testing's tolerance
             for the dtype the device holds), or the same error as the CPU
  fallback   passed, but ran (partly) on the CPU-fallback tier: no native implementation
  excluded   raised a deliberate exclusion (docs/limitations.md), named: skipped by design
  failed     a result or an error that differs from the CPU's
  crashed    killed its worker process, or ran past --timeout; the sweep goes on
A forward sample calls the op as a function, and also in place and with out= tensors where
the op has those variants. The results, their strides and storage offsets, and the inputs as
the call left them must all match; an error must be the CPU's own, message and all. An entry
whose sample generator fails makes no samples: nothing of it was examined.

Exit status: 0 when no sample failed or crashed and every entry made its samples, 1 otherwise,
2 for a usage error. The JSON
schema (torchneuron.coverage/1) is in docs/cli.md."""
# Failed samples listed on the terminal; the --report file lists all.
FAILURES_SHOWN = 50
LABELS = {
    "samples": "Outcomes (samples run)",
    "passed": "Passed",
    "bit_identical": "· bit-identical to the CPU",
    "within_tolerance": "· within tolerance of the CPU",
    "same_error": "· the same error as the CPU",
    "fallback": "CPU-fallback tier (no native implementation)",
    "excluded": "Skipped by design (deliberate exclusions)",
    "failed": "Failed",
    "crashed": "Crashed",
}


def add_arguments(parser):
    """Adds this subcommand's options."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument(
        "--db",
        nargs="+",
        choices=(*sweep.DATABASES, "all"),
        default=["ops"],
        metavar="DB",
        help="the databases to sweep: ops (OpInfo), modules (ModuleInfo), optimizers "
        "(OptimizerInfo) or all (default: ops)",
    )
    parser.add_argument(
        "--dtype",
        nargs="+",
        choices=sweep.DTYPES,
        default=["float32"],
        metavar="DTYPE",
        help=f"the dtypes of the samples: {', '.join(sweep.DTYPES)} (default: float32)",
    )
    parser.add_argument(
        "--grad",
        action="store_true",
        help="also run backward and compare the gradients (ops and modules with a gradient "
        "for the dtype; optimizers always step on gradients)",
    )
    parser.add_argument(
        "--ops",
        metavar="PATTERN",
        help="only entries whose name matches one of these comma-separated shell patterns, "
        "e.g. 'add,nn.functional.*,nn.Linear,optim.Adam*'",
    )
    parser.add_argument(
        "--workers",
        type=report.positive_int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="worker processes (default: the number of CPUs)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="a sample running longer is recorded as crashed (default: 300)",
    )
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE",
        help="a module name or .py file imported in every process first; its op_db, "
        "module_db and optim_db lists join the databases (your own ops' OpInfos)",
    )
    report.add_output_arguments(parser)


def run(args):
    """Runs the sweep; returns the exit code."""
    databases = list(sweep.DATABASES) if "all" in args.db else list(dict.fromkeys(args.db))
    dtypes = list(dict.fromkeys(args.dtype))
    if args.grad and not any(sweep.DTYPES[d].is_floating_point for d in dtypes):
        return _usage_error("--grad needs a floating dtype (float32, bfloat16 or float16)")
    patterns = [p.strip() for p in (args.ops or "").split(",") if p.strip()]
    device = info.device()
    if "error" in device:
        return _usage_error(f"no usable neuron device: {device['error']}")
    start = time.monotonic()
    try:
        tasks, not_swept = sweep.plan(databases, dtypes, args.grad, patterns, args.plugin)
    except (ImportError, OSError) as e:
        return _usage_error(f"--plugin {' '.join(args.plugin)}: {type(e).__name__}: {e}")
    if not tasks and not not_swept:
        return _usage_error(
            f"no entry of {', '.join(databases)} matches --ops {args.ops!r}; names look like "
            "'add', 'softmax[with_dtype]', 'nn.functional.conv2d', 'nn.Linear', 'optim.Adam'"
        )
    try:
        with _progress(len(tasks)) as update:
            entries, skipped = sweep.sweep(
                tasks,
                workers_count=args.workers,
                plugins=args.plugin,
                timeout=args.timeout,
                progress=update,
            )
    except sweep.WorkerStartError as e:
        print(f"torchneuron coverage: error: {e}", file=sys.stderr)
        return 1
    not_swept += skipped
    data = {
        "schema": SCHEMA,
        "versions": info.versions(),
        "device": {k: device[k] for k in ("platform", "lnc", "policy_64bit")},
        "settings": {
            "databases": databases,
            "dtypes": dtypes,
            "grad": args.grad,
            "ops": patterns,
            "plugins": args.plugin,
            "workers": args.workers,
            "timeout": args.timeout,
            "seed": sweep.SEED,
        },
        "seconds": round(time.monotonic() - start, 1),
        "summary": sweep.summarize(entries, not_swept),
        "groups": [
            {
                "database": database,
                "dtype": dtype,
                **sweep.summarize(
                    [e for e in entries if (e["database"], e["dtype"]) == (database, dtype)],
                    [e for e in not_swept if (e["database"], e["dtype"]) == (database, dtype)],
                ),
            }
            for database in databases
            for dtype in dtypes
        ],
        "entries": entries,
        "not_swept": not_swept,
    }
    _write(args, data)
    summary = data["summary"]
    failing = summary["failed"] + summary["crashed"] + summary["generator_failures"]
    return 1 if failing else 0


def _usage_error(message):
    print(f"torchneuron coverage: error: {message}", file=sys.stderr)
    return 2


@contextlib.contextmanager
def _progress(total):
    """Yields the sweep's progress callback: a tqdm bar over the entries, when tqdm (the tools
    extra) is installed and stderr is a terminal."""
    try:
        from tqdm import tqdm
    except ImportError:
        yield lambda task, entry: None
        return
    failing = 0

    def update(task, entry):
        nonlocal failing
        failing += bool(entry["failed"] or entry["crashed"])
        bar.set_postfix_str(f"{task.name} {task.dtype}, {failing} failing", refresh=False)
        bar.update()

    with tqdm(total=total, desc="coverage", unit="entry", disable=None, file=sys.stderr) as bar:
        yield update


def _write(args, data):
    """JSON (--json) or the summary and the entries with findings (Markdown) to stdout; the
    Markdown report with every entry to --report's file."""
    if args.report:
        path = pathlib.Path(args.report)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(markdown(data, every_entry=True))
    sys.stdout.write(json.dumps(data, indent=1) + "\n" if args.json else markdown(data, False))
    sys.stdout.flush()


def _number(value):
    return f"{value:,}"


def _share(part, whole):
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _title(settings):
    titles = [sweep.DATABASES[d].title for d in settings["databases"]]
    mode = "forward and backward" if settings["grad"] else "forward"
    return f"{', '.join(titles)}, {mode}, {', '.join(settings['dtypes'])}"


def markdown(data, every_entry):
    """The report for people: the summary, failures, and a table of entries (those with
    findings, or `every_entry`)."""
    s, v, d = data["summary"], data["versions"], data["device"]
    where = f"{d['platform']}, LNC={d['lnc']}, 64-bit {d['policy_64bit']}"
    lines = [
        "# torchneuron coverage",
        "",
        f"PyTorch's own test samples on neuron against the CPU: {_title(data['settings'])}. "
        f"torchneuron {v['torchneuron']}, torch {v['torch']}, Python {v['python']} ({where}); "
        f"seed {data['settings']['seed']}, {data['settings']['workers']} workers, "
        f"{data['seconds']:.0f} s.",
        "",
        "## Summary",
        "",
    ]
    groups = [g for g in data["groups"] if g["samples"] or g["not_swept"]]
    columns = [(f"{g['database']} {g['dtype']}", g) for g in groups]
    if len(columns) != 1:
        columns.append(("Total", s))
    headers = ["Outcome", *(name for name, _ in columns), "Share"]
    rows = [
        [LABELS[key], *(_number(g[key]) for _, g in columns), _share(s[key], s["samples"])]
        for key in LABELS
    ]
    rows.append(["Entries swept", *(_number(g["entries"]) for _, g in columns), ""])
    rows.append(["Entries not swept", *(_number(g["not_swept"]) for _, g in columns), ""])
    lines += [report.table(headers, rows)]
    if s["not_swept_by"]:
        reasons = "; ".join(f"{why}: {n}" for why, n in s["not_swept_by"].items())
        lines += [f"Not swept: {reasons}.", ""]
    if s["excluded_by"]:
        named = ", ".join(f"{name} ({_number(n)})" for name, n in s["excluded_by"].items())
        lines += [f"Skipped by design, by exclusion (samples): {named}.", ""]
    if s["fallback_ops"]:
        named = ", ".join(f"`{op}` ({_number(n)})" for op, n in s["fallback_ops"].items())
        lines += [f"Ops on the CPU-fallback tier (samples): {named}.", ""]
    unexamined = [
        (item["name"], item["dtype"], item["reason"])
        for item in data["not_swept"]
        if item["reason"].startswith(outcomes.GENERATOR_FAILED)
    ]
    if unexamined:
        lines += ["## Entries that made no samples (not examined)", ""]
        lines += [report.table(("Entry", "dtype", "Reason"), unexamined)]
    failures = [
        (e["name"], e["dtype"], note)
        for e in data["entries"]
        for note in e["notes"]
        if note["outcome"] in ("failed", "crashed")
    ]
    if failures:
        shown = failures if every_entry else failures[:FAILURES_SHOWN]
        rows = [(name, dtype, _sample(n), n["outcome"], n["detail"]) for name, dtype, n in shown]
        lines += ["## Failed and crashed samples", ""]
        lines += [report.table(("Entry", "dtype", "Sample", "Outcome", "Detail"), rows)]
        if len(shown) < len(failures):
            lines += [f"… and {len(failures) - len(shown):,} more (--report FILE lists all).", ""]
    entries = data["entries"]
    if not every_entry:
        entries = [e for e in entries if e["notes"] or e["fallback"]]
    title = "Entries" if every_entry else "Entries with findings"
    if entries:
        rows = [
            (
                e["name"],
                e["dtype"],
                *(_number(e[k]) for k in ("samples", *sweep.OUTCOMES)),
                _notes(e),
            )
            for e in sorted(entries, key=_severity)
        ]
        headers = (
            "Entry",
            "dtype",
            "Samples",
            "Passed",
            "Fallback",
            "Excluded",
            "Failed",
            "Crashed",
            "Notes",
        )
        lines += [f"## {title}", "", report.table(headers, rows)]
    return "\n".join(lines).rstrip("\n") + "\n"


def _sample(note):
    if note["sample"] is None:
        return "-"
    described = note.get("description")
    return f"{note['sample']}: {described}" if described else str(note["sample"])


def _severity(entry):
    return (
        -(entry["failed"] + entry["crashed"]),
        -entry["excluded"],
        -entry["fallback"],
        entry["database"],
        entry["name"],
        entry["dtype"],
    )


def _notes(entry):
    notes = []
    if entry["within_tolerance"]:
        narrowed = any(n["detail"] for n in entry["notes"] if n["match"] == "within_tolerance")
        why = " (64-bit values held at 32-bit precision)" if narrowed else ""
        notes.append(f"{entry['within_tolerance']} within tolerance{why}")
    if entry["same_error"]:
        notes.append(f"{entry['same_error']} raise as on the CPU")
    for name, n in entry["excluded_by"].items():
        notes.append(f"{name}: {n}")
    if entry["fallback_ops"]:
        notes.append("fallback: " + ", ".join(f"`{op}`" for op in entry["fallback_ops"]))
    first = next((n for n in entry["notes"] if n["outcome"] in ("failed", "crashed")), None)
    if first:
        notes.append(f"first {first['outcome']}: {report.first_line(first['detail'], 120)}")
    return "; ".join(notes)
