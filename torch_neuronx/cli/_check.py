"""Runs a script unchanged on neuron and reports what will not port to Trainium."""

import argparse
import linecache
import sys

from torch_neuronx import _config as config
from torch_neuronx import _exclusions as exclusions
from torch_neuronx import adaptive_eager
from torch_neuronx.cli import _report as report
from torch_neuronx.cli import _runs as runs

EPILOG = """\
Runs SCRIPT as `python SCRIPT ARGS` would (or -m MODULE), with torchneuron's runtime reporting
every policy event, and reports: CPU-fallback ops (calls, bytes copied, host time and share,
your source line, eager or compiled), 64-bit data (float64 narrowing, int64 values that do not
fit int32), excluded features, torch.compile (graphs, graph breaks, recompiles and their cause,
compile time, cache hits), ops with no implementation, NKI kernels that failed validation, and
where and why the script failed. Verdict: ready, ready with warnings or blocked.

Exit status: 1 when the verdict reaches --fail-on (default: blocked), else 0; 2 for a usage
error. The JSON schema (torchneuron.check/1) is in docs/cli.md."""

SCHEMA = "torchneuron.check/1"
SEVERITIES = ("blocker", "warning", "info")
VERDICTS = {"blocker": "blocked", "warning": "ready with warnings", None: "ready"}

# What to do about each principle of the CPU-fallback tier (torch_neuronx/op_policy.json).
FALLBACK_ADVICE = {
    "data_dependent_shape": "use static shapes: `torch.where` with a mask, `nonzero_static`, "
    "integer indices",
    "linear_algebra": "keep it out of the training step, or compute it once on the host",
    "spectral": "write the transform as matmuls, or as an NKI kernel",
    "fp8_scaled_matmul": "use an NKI kernel",
    "boolean_mask": "index with integer indices (`nonzero_static`) or use `torch.where`",
    "library_ops": "give it a neuron kernel (an NKI kernel through `torch_neuronx.nki_op`), or "
    "keep it out of the hot loop",
}
INT32_RANGE = "[-2147483648, 2147483647]"
# Recompile causes, from Dynamo's guard-failure text.
RECOMPILE_CAUSES = (
    (
        "size mismatch",
        "new input shape",
        "shapes are static on Trainium: each new shape "
        "compiles a new graph; pad or bucket inputs to a few fixed shapes",
    ),
    (
        "stride mismatch",
        "new input strides",
        "pass inputs with the same layout each call (`.contiguous()`)",
    ),
    ("dtype mismatch", "new input dtype", "keep input dtypes the same from call to call"),
    (
        "requires_grad mismatch",
        "requires_grad changed",
        "keep `requires_grad` of inputs the same from call to call",
    ),
    ("grad_mode", "grad mode changed", "compile the training and the evaluation step separately"),
    (
        "___check_obj_id",
        "a different object",
        "compile once and reuse the compiled model; "
        "don't re-create modules or functions in the loop",
    ),
)


def add_arguments(parser):
    """Adds this subcommand's options."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument(
        "--fail-on",
        choices=("warning", "blocked", "never"),
        default="blocked",
        help="exit with status 1 when the verdict is this bad or worse (default: blocked)",
    )
    parser.add_argument(
        "--compare-cpu",
        action="store_true",
        help="when the script fails on neuron, run it on the CPU too (torchneuron not loaded) "
        "to tell a porting problem from a bug in the script",
    )
    report.add_output_arguments(parser)
    runs.add_target_arguments(parser)


def run(args):
    """Runs the check; returns the exit code."""
    target = runs.target_from(args)
    print(f"torchneuron check: running `{target.command()}` on neuron", file=sys.stderr)
    neuron = runs.run(target, "neuron", observe=True, timeout=args.timeout)
    cpu = None
    if args.compare_cpu and neuron.status != "ok":
        print("torchneuron check: the script failed; running it on the CPU", file=sys.stderr)
        cpu = runs.run(target, "cpu", timeout=args.timeout)
    data = analyse(target, neuron, cpu)
    report.write(args, markdown(data), data)
    worst = {"blocked": 2, "ready with warnings": 1, "ready": 0}[data["verdict"]]
    threshold = {"blocked": 2, "warning": 1, "never": 3}[args.fail_on]
    return 1 if worst >= threshold else 0


def finding(*, kind: str, severity: str, title: str, advice: str, **details) -> dict:
    """One finding of the report (docs/cli.md's schema): what was found, how much it matters, what
    to do, and the details its kind carries (its sites, op, values, ...)."""
    if severity not in SEVERITIES:
        raise ValueError(f"a finding's severity is one of {SEVERITIES}, not {severity!r}")
    return {"kind": kind, "severity": severity, "title": title, "advice": advice, **details}


def analyse(target, neuron, cpu=None):
    """The report's data (the JSON document) from the neuron run and the optional CPU run."""
    raw = neuron.findings or {}
    failed = neuron.status != "ok"
    wall = raw.get("wall_time_s") or neuron.script_time_s or neuron.wall_time_s
    counters = raw.get("counters", {})
    findings = []
    findings += _fallback_findings(raw.get("events", []), counters, wall)
    ended = _ended_run(neuron)
    findings += _64bit_findings(raw.get("events", []), ended)
    findings += _random_findings(raw.get("events", []))
    findings += _refusal_findings(raw.get("events", []), ended)
    findings += _nki_findings(raw.get("nki_failures", []), ended)
    compile_summary, compile_findings = _compile_findings(raw, failed)
    findings += compile_findings
    if raw and not failed and not counters.get("DeviceAllocations"):
        findings.append(
            finding(
                kind="device_unused",
                severity="warning",
                title="Nothing ran on the neuron device",
                advice="the script never put a tensor on neuron: make it pick "
                "`torch.accelerator.current_accelerator()` (or pass its device option)",
            )
        )
    if failed:
        findings.insert(0, _failure_finding(neuron, cpu, findings))
    findings += _hardware_only_findings()
    for problem in raw.get("internal_errors", []):
        findings.append(
            finding(
                kind="internal",
                severity="info",
                title="torchneuron check could not record an event",
                advice=problem,
            )
        )
    findings.sort(key=lambda f: SEVERITIES.index(f["severity"]))
    worst = next((f["severity"] for f in findings if f["severity"] != "info"), None)
    return {
        "schema": SCHEMA,
        "command": target.command(),
        "verdict": VERDICTS[worst],
        "run": neuron.summary(),
        "cpu_run": cpu.summary() if cpu else None,
        "findings": findings,
        "actions": _actions(findings),
        "compile": compile_summary,
        "counters": counters,
        "adaptive_eager": _adaptive_eager(counters),
        "policy_64bit": raw.get("policy_64bit"),
    }


def _hardware_only_findings():
    """TorchNeuron's hardware-only variables set for the run: they change nothing here."""
    return [
        finding(
            kind="hardware_only",
            severity="info",
            title=f"`{name}={value}` has no effect on the emulator",
            advice=f"nothing: {config.HARDWARE_ONLY[name]}",
        )
        for name, value in config.hardware_only_set().items()
    ]


def _adaptive_eager(counters):
    """What adaptive eager execution did, or None when it queued nothing (it is off)."""
    if not counters.get("QueuedOps"):
        return None
    stats = adaptive_eager.stats_of(counters)
    runs = {k[len("runs.") :]: stats.pop(k) for k in list(stats) if k.startswith("runs.")}
    return {**stats, "runs": runs}


def _ended_run(neuron):
    """A predicate on the places of a refusal (an error the runtime raised): did it end the
    run? It did if the run failed there; elsewhere, the script caught it and carried on."""
    failed = neuron.status != "ok"
    where = (neuron.error or {}).get("where")

    def ended(places):
        return failed and (where is None or any(_same_place(p, where) for p in places))

    return ended


HANDLED = " (the script caught the error and carried on)"


def _site_row(event, **extra):
    return {
        "site": event["site"],
        "via": event["via"],
        "op": event["op"],
        "phase": event["phase"],
        "mode": "compiled" if event["detail"] == "compiled" else "eager",
        "calls": event["calls"],
        **extra,
    }


def _principles():
    """({op name: principle}, {principle: why}) for the CPU-fallback tier, from the op policy."""
    from torch_neuronx import _op_policy as op_policy

    names = {}
    for principle, ops in op_policy.cpu_fallback_ops_by_principle().items():
        names.update({f"aten::{op}": principle for op in ops})
    names.update({f"aten::{op}": "boolean_mask" for op in op_policy.boolean_mask_ops()})
    document = op_policy.policy()
    why = {name: rule["why"] for name, rule in document["cpu_fallback"].items()}
    why["boolean_mask"] = document["cpu_fallback_with_boolean_mask"]["why"]
    why["library_ops"] = document.get("library_ops", {}).get(
        "why", "another library's op with only a CPU kernel has no NeuronCore kernel"
    )
    return names, why


def _fallback_findings(events, counters, wall):
    principles, why = _principles()
    by_op = {}
    for e in events:
        if e["kind"] == "fallback":
            by_op.setdefault(e["op"], []).append(e)
    for name in counters:
        if name.startswith("FallbackOp::"):
            by_op.setdefault(name[len("FallbackOp::") :], [])
    findings = []
    for op, rows in by_op.items():
        compiled = counters.get(f"CompiledFallbackOp::{op}", 0)
        calls = counters.get(f"FallbackOp::{op}", sum(r["calls"] for r in rows))
        nbytes = sum(r["bytes"] for r in rows)
        host_s = sum(r["host_ns"] for r in rows) / 1e9
        share = host_s / wall if wall else None
        principle = principles.get(op, None if op.startswith("aten::") else "library_ops")
        mode = "compiled graph" if compiled == calls else "eager" if not compiled else "both"
        findings.append(
            finding(
                kind="cpu_fallback",
                severity="warning",
                title=f"`{op}` runs on the host (CPU fallback): {calls} calls, "
                f"{report.size(nbytes)} copied, {report.seconds(host_s)} "
                f"({_percent(share)} of the run)",
                advice=FALLBACK_ADVICE.get(principle, "avoid the op in the hot loop"),
                op=op,
                principle=principle,
                why=why.get(principle, "the op policy sends it to the host"),
                calls=calls,
                eager_calls=calls - compiled,
                compiled_calls=compiled,
                mode=mode,
                bytes=nbytes,
                host_time_s=host_s,
                host_share=share,
                sites=sorted(
                    (_site_row(r, bytes=r["bytes"], host_time_s=r["host_ns"] / 1e9) for r in rows),
                    key=lambda s: -s["calls"],
                ),
            )
        )
    findings.sort(key=lambda f: -f["host_time_s"])
    return findings


def _percent(share):
    return "n/a" if share is None else f"{100 * share:.1f}%"


def _64bit_findings(events, ended):
    overflow = [e for e in events if e["kind"] == "int64" and e["overflow_calls"]]
    narrowed = [e for e in events if e["kind"] == "float64"]
    fitting = [e for e in events if e["kind"] == "int64" and not e["overflow_calls"]]
    findings = []
    for e in overflow:
        value = e["min"] if e["min"] < -(2**31) else e["max"]
        fatal = ended([e["site"]])
        findings.append(
            finding(
                kind="int64_overflow",
                severity="blocker" if fatal else "warning",
                title=f"int64 value {value} from {e['op']} does not fit in int32 {INT32_RANGE}"
                + ("" if fatal else HANDLED),
                advice="keep int64 values within the int32 range (Trainium holds int64 as "
                "int32), e.g. compute them on the host or rescale them",
                value=value,
                sites=[_site_row(e, values=e["values"], min=e["min"], max=e["max"])],
            )
        )
    if narrowed:
        values = sum(e["values"] for e in narrowed)
        findings.append(
            finding(
                kind="float64",
                severity="warning",
                title=f"float64 data on the device: {values} values rounded to float32 "
                f"precision ({_places(len(narrowed))})",
                advice="use float32 (Trainium has no 64-bit arithmetic); results computed in "
                "float64 elsewhere will differ",
                values=values,
                sites=sorted(
                    (_site_row(e, values=e["values"]) for e in narrowed),
                    key=lambda s: -s["values"],
                ),
            )
        )
    if fitting:
        findings.append(
            finding(
                kind="int64",
                severity="info",
                title=f"int64 data reached the device in {_places(len(fitting))}; every value "
                "fits in int32",
                advice="nothing to change: Trainium holds int64 as int32, and these values "
                "fit (index tensors keep working)",
                sites=sorted(
                    (_site_row(e, values=e["values"], min=e["min"], max=e["max"]) for e in fitting),
                    key=lambda s: -s["calls"],
                ),
            )
        )
    return findings


def _random_findings(events):
    """Random numbers drawn on the device, and int64 draws folded into int32."""
    drawn = sorted(
        (e for e in events if e["kind"] == "random" and e["detail"] == "device"),
        key=lambda e: e["order"],
    )
    folded = [e for e in events if e["kind"] == "int64_random"]
    findings = []
    if drawn:
        findings.append(
            finding(
                kind="random",
                severity="info",
                title=f"Random ops on neuron tensors draw from the device's generators "
                f"({_places(len(drawn))}): the same seed gives other numbers than on the CPU",
                advice="nothing to change for Trainium, where they run on the device; to "
                "compare a run with the CPU's step by step, use `torchneuron parity` (which "
                "draws them from the CPU's stream) or set TORCH_NEURONX_RNG=cpu",
                sites=[_site_row(e, values=e["values"]) for e in drawn],
            )
        )
    for e in folded:
        findings.append(
            finding(
                kind="int64_random",
                severity="warning",
                title=f"{e['op']} drew int64 values in [{e['min']}, {e['max']}), beyond int32: "
                f"{e['values']} values were folded into the int32 part of the range",
                advice="draw within the int32 range (Trainium holds int64 as int32), e.g. "
                "`torch.randint(0, 2**31 - 1, ...)`, or draw on the CPU",
                op=e["op"],
                sites=[_site_row(e, values=e["values"])],
            )
        )
    return findings


def _refusal_findings(events, ended):
    """Excluded features and ops with no implementation: the runtime refused them."""
    groups = {}
    for e in events:
        if e["kind"] == "excluded":
            groups.setdefault(("excluded", e["detail"]), []).append(e)
        elif e["kind"] == "no_kernel":
            groups.setdefault(("no_kernel", e["op"]), []).append(e)
    findings = []
    for (kind, name), rows in groups.items():
        fatal = ended([r["site"] for r in rows])
        handled = "" if fatal else HANDLED
        if kind == "excluded":
            row = exclusions.get(name)
            title = f"Excluded feature: {row.feature} (`{rows[0]['op']}`){handled}"
            advice = row.way_out
            extra = {"feature": row.feature}
        else:
            title = f"`{name}` has no implementation on neuron (no neuron or CPU kernel){handled}"
            advice = "use an equivalent op that has a CPU implementation"
            extra = {"op": name}
        findings.append(
            finding(
                kind=kind,
                severity="blocker" if fatal else "warning",
                title=title,
                advice=advice,
                **extra,
                sites=[_site_row(r) for r in rows],
            )
        )
    return findings


def _nki_findings(failures, ended):
    groups = {}
    for f in failures:
        groups.setdefault((f["message"], report.place(f["site"])), []).append(f)
    findings = []
    for (message, _), rows in groups.items():
        fatal = ended([rows[0]["site"]])
        findings.append(
            finding(
                kind="nki_validation",
                severity="blocker" if fatal else "warning",
                title=f"NKI kernel failed validation: {report.first_line(message)}"
                + ("" if fatal else HANDLED),
                advice="fix the kernel at that line: the simulator checks the hardware's "
                "rules (partition, buffer and dtype limits)",
                message=message,
                sites=[{"site": rows[0]["site"], "via": rows[0]["via"], "calls": len(rows)}],
            )
        )
    return findings


def _recompile_cause(reason):
    for needle, cause, advice in RECOMPILE_CAUSES:
        if needle in (reason or ""):
            return cause, advice
    return "a guard failed", "see the reason; keep what the compiled code depends on stable"


def _compile_findings(raw, failed):
    compiles = raw.get("compiles") or []
    neuron = raw.get("neuron_compile")
    breaks = raw.get("graph_breaks") or []
    if not compiles and not (neuron or {}).get("num_graphs") and not breaks:
        return None, []
    findings = []
    grouped = {}
    for b in breaks:
        key = (report.place(b["location"]), b["reason"])
        grouped.setdefault(key, []).append(b)
    for (location, reason), rows in grouped.items():
        first = rows[0]
        advice = "; ".join(first["hints"][:2]) or "rewrite that line so that Dynamo can trace it"
        findings.append(
            finding(
                kind="graph_break",
                severity="warning",
                title=f"Graph break at `{location}`: {reason}"
                + (f" ({first['explanation']})" if first["explanation"] else ""),
                advice=advice,
                reason=reason,
                explanation=first["explanation"],
                location=first["location"],
                count=len(rows),
                sites=[{"site": first["site"], "via": None, "calls": len(rows)}],
            )
        )
    recompiles = {}
    for c in compiles:
        if c["recompile_reason"]:
            function = f"{c['co_name']} ({report.place(_code_frame(c))})"
            cause, advice = _recompile_cause(c["recompile_reason"])
            recompiles.setdefault((function, cause, advice), []).append(c)
    for (function, cause, advice), rows in recompiles.items():
        seconds = sum(r["entire_frame_compile_time_s"] or 0 for r in rows)
        reasons = sorted({r["recompile_reason"] for r in rows})
        findings.append(
            finding(
                kind="recompile",
                severity="warning",
                title=f"{len(rows)} recompile(s) of {function}: {cause} "
                f"({report.seconds(seconds)} compiling)",
                advice=advice,
                function=function,
                cause=cause,
                reasons=reasons,
                count=len(rows),
                compile_time_s=seconds,
                sites=[{"site": _code_frame(rows[0]), "via": None, "calls": len(rows)}],
            )
        )
    for c in compiles:
        if not c["fail_type"]:
            continue
        where = None
        if c["fail_user_frame_filename"]:
            where = {
                "file": c["fail_user_frame_filename"],
                "line": c["fail_user_frame_lineno"],
                "function": c["co_name"],
                "code": _source_line(c["fail_user_frame_filename"], c["fail_user_frame_lineno"]),
            }
        dynamic = "StaticShapeError" in (c["fail_reason"] or "")
        findings.append(
            finding(
                kind="excluded" if dynamic else "compile_failure",
                severity="blocker" if failed else "warning",
                title="Excluded feature: dynamic shapes in torch.compile"
                if dynamic
                else f"torch.compile failed on {c['co_name']}: {c['fail_type']}",
                advice=exclusions.get("dynamic_shapes").way_out
                if dynamic
                else "see the error; TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0 runs such "
                "graphs eagerly",
                **({"feature": exclusions.get("dynamic_shapes").feature} if dynamic else {}),
                function=c["co_name"],
                error=report.first_line(c["fail_reason"], 400),
                sites=[{"site": where or _code_frame(c), "via": None, "calls": 1}],
            )
        )
    graphs = (neuron or {}).get("graphs", [])
    for g in graphs:
        if g["fallback"]:
            findings.append(
                finding(
                    kind="eager_graph",
                    severity="warning",
                    title=f"Graph {g['name']} did not compile and runs eagerly",
                    advice="see the warning it printed; on Trainium this graph would not run",
                    graph=g["name"],
                )
            )
    summary = {
        "graphs": (neuron or {}).get("num_graphs", 0),
        "graph_breaks": sum(raw.get("graph_break_reasons", {}).values()) or len(breaks),
        "recompiles": sum(1 for c in compiles if c["recompile_reason"]),
        "compile_time_s": sum(c["entire_frame_compile_time_s"] or 0 for c in compiles),
        "backend_compile_time_s": (neuron or {}).get("compile_time_s", 0.0),
        "cache_hits": (neuron or {}).get("cache_hits", 0),
        "cache_misses": (neuron or {}).get("cache_misses", 0),
        "eager_fallbacks": (neuron or {}).get("num_fallbacks", 0),
    }
    return summary, findings


def _code_frame(c):
    return {
        "file": c["co_filename"],
        "line": c["co_firstlineno"],
        "function": c["co_name"],
        "code": _source_line(c["co_filename"], c["co_firstlineno"]),
    }


def _source_line(filename, line):
    return linecache.getline(filename or "", line or 0).strip()


def _failure_finding(neuron, cpu, findings):
    error = neuron.error or {}
    where = error.get("where")
    cause = next(
        (
            f["kind"]
            for f in findings
            if f["severity"] == "blocker"
            and where
            and any(_same_place(s.get("site"), where) for s in f.get("sites", []))
        ),
        None,
    )
    message = report.first_line(error.get("message"), 400)
    title = f"The script failed on neuron: {error.get('type', 'error')}: {message}"
    if neuron.status in ("crashed", "timed out"):
        title = f"The script {neuron.status} on neuron: {message}"
    elif not error:
        title = f"The script exited with status {neuron.exit_code} on neuron"
    if cpu is None:
        advice = "fix the error at that line" + (
            "" if cause else "; `--compare-cpu` tells whether it fails on the CPU too"
        )
    elif cpu.status == "ok":
        advice = "the script runs on the CPU: the failure is specific to neuron"
    else:
        cpu_error = cpu.error or {}
        advice = (
            "it fails on the CPU too "
            f"({cpu_error.get('type', cpu.status)}: "
            f"{report.first_line(cpu_error.get('message'), 200)}): fix the script first"
        )
    return finding(
        kind="script_failure",
        severity="blocker",
        title=title,
        advice=advice,
        error=error,
        cause=cause,
        fails_on_cpu=None if cpu is None else cpu.status != "ok",
        sites=[{"site": where, "via": error.get("via"), "calls": 1}],
    )


def _same_place(a, b):
    return bool(a and b) and a["file"] == b["file"] and a["line"] == b["line"]


def _actions(findings):
    """The "what to change" list: blockers first, then by the time each costs."""
    actions = []
    for f in findings:
        if f["severity"] == "info" or (f["kind"] == "script_failure" and f["cause"]):
            continue
        sites = f.get("sites") or []
        where = f" at {report.place(sites[0]['site'])}" if sites and sites[0]["site"] else ""
        impact = f.get("host_time_s", f.get("compile_time_s"))
        actions.append(
            {
                "severity": f["severity"],
                "kind": f["kind"],
                "text": f"{_action_subject(f)}{where}: {f['advice']}",
                "impact_s": impact,
            }
        )
    actions.sort(key=lambda a: (SEVERITIES.index(a["severity"]), -(a["impact_s"] or 0)))
    return actions


def _action_subject(f):
    kind = f["kind"]
    if kind == "cpu_fallback":
        return (
            f"Replace `{f['op']}` ({f['calls']} host calls, {_percent(f['host_share'])} of the run)"
        )
    if kind == "recompile":
        return f"Stop the recompiles of {f['function']} ({f['cause']})"
    if kind == "graph_break":
        return f"Remove the graph break ({f['reason']}, {f['count']}x)"
    if kind == "script_failure":
        return "Fix the failure"
    if kind == "float64":
        return f"Use float32, not float64 ({f['values']} values narrowed)"
    if kind == "int64_random":
        return f"Draw random integers within int32 ({f['op']})"
    if kind == "int64_overflow":
        return f"Keep int64 values within int32 ({f['value']} does not fit)"
    return f["title"]


def markdown(data):
    """The report for people."""
    out = [f"# torchneuron check: `{data['command']}`\n"]
    findings = data["findings"]
    counts = {s: sum(f["severity"] == s for f in findings) for s in SEVERITIES}
    run = data["run"]
    out.append(
        f"**Verdict: {data['verdict']}** ({counts['blocker']} blocker(s), "
        f"{counts['warning']} warning(s)). The script ran {report.seconds(run['script_time_s'])} "
        f"on neuron and {_ending(run)}.\n"
    )
    if data["actions"]:
        out.append("## What to change\n")
        out += [f"{i}. {a['text']}" for i, a in enumerate(data["actions"], 1)]
        out.append("")
    failure = next((f for f in findings if f["kind"] == "script_failure"), None)
    if failure:
        out.append(_failure_markdown(failure, data["cpu_run"]))
    sections = (
        ("CPU-fallback ops", ("cpu_fallback",), _fallback_markdown),
        ("64-bit data", ("int64_overflow", "int64_random", "float64", "int64"), _sites_markdown),
        ("Random numbers", ("random",), _sites_markdown),
        ("Excluded features and missing ops", ("excluded", "no_kernel"), _sites_markdown),
        ("NKI kernels", ("nki_validation",), _sites_markdown),
        (
            "torch.compile",
            ("graph_break", "recompile", "compile_failure", "eager_graph"),
            _sites_markdown,
        ),
        ("Other", ("device_unused", "internal", "hardware_only"), _sites_markdown),
    )
    for heading, kinds, render in sections:
        chosen = [f for f in findings if f["kind"] in kinds]
        if heading == "torch.compile" and data["compile"]:
            out.append(f"## {heading}\n")
            out.append(_compile_summary(data["compile"]))
            out += [render(f) for f in chosen]
        elif chosen:
            out.append(f"## {heading}\n")
            out += [render(f) for f in chosen]
    if not findings:
        out.append("No findings: everything ran natively on the device.\n")
    c = data["counters"]
    native = sum(v for k, v in c.items() if k.startswith("NativeOp::"))
    fallback = sum(v for k, v in c.items() if k.startswith("FallbackOp::"))
    out.append(
        f"---\n{native} native op calls, {fallback} CPU-fallback calls; host-to-device "
        f"{report.size(c.get('HostToDeviceBytes', 0))}, device-to-host "
        f"{report.size(c.get('DeviceToHostBytes', 0))}; 64-bit policy: "
        f"{data['policy_64bit']}.\n"
    )
    fusion = data["adaptive_eager"]
    if fusion:
        runs = ", ".join(f"{reason} {n}" for reason, n in sorted(fusion["runs"].items()))
        out.append(
            f"Adaptive eager: {fusion['queued_ops']} ops queued, {fusion['fused_ops']} of them "
            f"in {fusion['fused_kernels']} fused kernels ({fusion['cache_hits']} fusion-cache "
            f"hits); the queue ran at: {runs}.\n"
        )
    return "\n".join(out) + "\n"


def _ending(run):
    if run["status"] == "ok":
        return "finished"
    if run["status"] in ("crashed", "timed out"):
        return run["status"]
    return f"failed (exit status {run['exit_code']})"


def _failure_markdown(f, cpu_run):
    error = f["error"] or {}
    lines = ["## The script failed\n", f"**{f['title']}**\n"]
    if error.get("where"):
        lines.append(f"Where: {report.code_place(error['where'])}")
        if error.get("via"):
            lines.append(f"(in {report.code_place(error['via'])})")
        lines.append("")
    if error.get("message"):
        lines.append("```\n" + error["message"].strip()[:2000] + "\n```\n")
    if cpu_run is not None:
        lines.append(f"On the CPU (torchneuron not loaded): {f['advice']}.\n")
    return "\n".join(lines)


def _fallback_markdown(f):
    head = f"### `{f['op']}`\n\n{f['title']}: {f['why']}. To change: {_sentence(f['advice'])}\n"
    rows = [
        (
            report.code_place(s["site"]),
            report.place(s["via"]) if s["via"] else "",
            s["phase"],
            s["mode"],
            s["calls"],
            report.size(s["bytes"]),
            report.seconds(s["host_time_s"]) if s["mode"] == "eager" else "n/a",
        )
        for s in f["sites"]
    ]
    return (
        head
        + "\n"
        + report.table(("Your line", "Via", "Pass", "Mode", "Calls", "Copied", "Host time"), rows)
    )


def _sites_markdown(f, limit=10):
    text = f"### {f['title']}\n\nTo change: {_sentence(f['advice'])}\n"
    if f.get("reasons"):
        text += "\n" + "\n".join(f"- guard: `{r}`" for r in f["reasons"][:5]) + "\n"
    if f.get("error"):
        text += f"\n```\n{f['error']}\n```\n"
    sites = f.get("sites") or []
    if not sites:
        return text
    rows = [
        (
            report.code_place(s.get("site")),
            report.place(s["via"]) if s.get("via") else "",
            s.get("op", ""),
            s.get("calls", ""),
            _values(s),
        )
        for s in sites[:limit]
    ]
    more = (
        f"\n({len(sites) - limit} more places in the JSON report)\n" if len(sites) > limit else ""
    )
    return text + "\n" + report.table(("Your line", "Via", "Op", "Calls", "Values"), rows) + more


def _values(site):
    if "min" in site:
        return f"{site['values']} in [{site['min']}, {site['max']}]"
    return site.get("values", "")


def _compile_summary(c):
    return (
        f"{c['graphs']} graph(s) compiled by the neuron backend, {c['graph_breaks']} graph "
        f"break(s), {c['recompiles']} recompile(s); compile time "
        f"{report.seconds(c['compile_time_s'])} (neuron backend "
        f"{report.seconds(c['backend_compile_time_s'])}); compile cache: {c['cache_hits']} "
        f"hit(s), {c['cache_misses']} miss(es); {c['eager_fallbacks']} graph(s) run eagerly.\n"
    )


def _places(n):
    return "1 place" if n == 1 else f"{n} places"


def _sentence(text):
    return text if text.endswith(".") else text + "."
