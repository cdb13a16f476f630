"""The report: an ``Estimate`` of a step's ops on each platform, as data, Markdown and a plot."""

import collections
import dataclasses

from torch_neuronx._markdown import table
from torch_neuronx._platforms import SDK, SOURCES

from .model import HARDWARE, HOST, LINK, NKI, TENSOR, op_time

LABEL = "ESTIMATE"
DISCLAIMER = (
    "ESTIMATE: a roofline from the documented peak rates of Trainium, not a measurement. "
    "Ops run back to back at their engine's peak or at full HBM bandwidth, without fusion, "
    "overlap or latency overheads."
)


@dataclasses.dataclass
class Estimate:
    """The ESTIMATE of one step on each Trainium generation; ``print(e)`` shows the report."""

    ops: collections.Counter  # Op -> calls in one step
    lnc: int = 2
    world_size: int = 1
    step: str = "one call"  # how the step was delimited
    tokens_per_step: int | None = None  # the tokens a decode step produced
    price_per_hour: float | None = None
    steps_per_epoch: int | None = None
    platforms: tuple = tuple(HARDWARE)

    def rows(self, platform):
        """One dict per distinct op call: calls, FLOPs, bytes, engine, time and bound."""
        hw = HARDWARE[platform]
        rows = []
        for op, calls in self.ops.items():
            if op.engine == HOST:
                continue
            seconds, bound = op_time(op, hw, self.lnc, self.world_size)
            rows.append(
                {
                    "op": op.name,
                    "class": op.op_class,
                    "engine": op.engine,
                    "dtype": op.dtype,
                    "shapes": op.shapes,
                    "calls": calls,
                    "flops": op.flops * calls,
                    "bytes": op.bytes * calls,
                    "time_s": seconds * calls,
                    "bound": bound,
                }
            )
        return sorted(rows, key=lambda r: -r["time_s"])

    def summary(self, platform):
        """Step time, MFU, the time by class and by op, and the per-scope view."""
        hw = HARDWARE[platform]
        rows = self.rows(platform)
        step = sum(r["time_s"] for r in rows)
        flops = sum(r["flops"] for r in rows)
        by_dtype = collections.Counter()
        for r in rows:
            if r["engine"] == TENSOR:
                by_dtype[r["dtype"]] += r["flops"]
        dtype = by_dtype.most_common(1)[0][0] if by_dtype else "16bit"
        peak = hw.tensor_tflops[dtype] * 1e12 * self.lnc
        by_class = collections.Counter()
        by_op = collections.defaultdict(lambda: {"calls": 0, "time_s": 0.0, "flops": 0})
        bounds = collections.defaultdict(collections.Counter)
        for r in rows:
            by_class[r["class"]] += r["time_s"]
            agg = by_op[r["op"]]
            agg["calls"] += r["calls"]
            agg["time_s"] += r["time_s"]
            agg["flops"] += r["flops"]
            agg["bytes"] = agg.get("bytes", 0) + r["bytes"]
            agg["engine"] = r["engine"]
            bounds[r["op"]][r["bound"]] += r["time_s"]
        for name, agg in by_op.items():
            agg["bound"] = bounds[name].most_common(1)[0][0]
            agg["share"] = agg["time_s"] / step if step else 0.0
        cores_per_chip = hw.physical_cores // self.lnc
        scopes = []
        for scope, cores in (
            ("NeuronCore", 1),
            ("chip", cores_per_chip),
            (f"instance ({hw.instance})", cores_per_chip * hw.instance_chips),
        ):
            scopes.append(
                {
                    "scope": scope,
                    "logical_cores": cores,
                    "peak_tflops": peak * cores / 1e12,
                    "hbm_tb_s": hw.hbm_bytes_per_s(self.lnc) * cores / 1e12,
                    "steps_per_s": cores / step if step else None,
                    "tokens_per_s": cores * self.tokens_per_step / step
                    if step and self.tokens_per_step
                    else None,
                }
            )
        data = {
            "platform": platform,
            "core": f"NeuronCore-v{hw.core_version}",
            "step_time_s": step,
            "flops": flops,
            "hbm_bytes": sum(r["bytes"] for r in rows if r["engine"] not in (LINK, NKI)),
            "mfu": flops / (step * peak) if step else None,
            "mfu_dtype": dtype,
            "time_by_class_s": dict(by_class.most_common()),
            "ops": dict(sorted(by_op.items(), key=lambda kv: -kv[1]["time_s"])),
            "scopes": scopes,
        }
        if self.price_per_hour is not None and step:
            per_step = self.price_per_hour / 3600 * step / scopes[-1]["logical_cores"]
            data["cost_per_step"] = per_step
            if self.steps_per_epoch:
                data["cost_per_epoch"] = per_step * self.steps_per_epoch
        return data

    def to_dict(self):
        """A JSON-able report (schema ``torchneuron.estimate/1``)."""
        return {
            "schema": "torchneuron.estimate/1",
            "label": LABEL,
            "disclaimer": DISCLAIMER,
            "step": self.step,
            "tokens_per_step": self.tokens_per_step,
            "lnc": self.lnc,
            "world_size": self.world_size,
            "host_transfer_bytes": sum(
                o.bytes * n for o, n in self.ops.items() if o.engine == HOST
            ),
            "price_per_hour": self.price_per_hour,
            "steps_per_epoch": self.steps_per_epoch,
            "platforms": {p: self.summary(p) for p in self.platforms},
            "hardware": {p: _hardware_dict(HARDWARE[p]) for p in self.platforms},
        }

    def markdown(self, top=12):
        """The report for people."""
        return markdown(self.to_dict(), top)

    def __str__(self):
        return self.markdown()

    def plot(self, path):
        """Draws the estimated time by op class on each platform into ``path``."""
        plot(self.to_dict(), path)


def _hardware_dict(hw):
    data = dataclasses.asdict(hw)
    data["sources"] = {k: SOURCES[v] for k, v in hw.sources.items()}
    return data


def _seconds(value):
    if value is None:
        return "n/a"
    for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value * 1e9:.3g} ns"


def _count(value, unit=""):
    for suffix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {suffix}{unit}"
    return f"{value:.3g} {unit}".strip()


def markdown(data, top=12):
    """Markdown of a ``to_dict()`` report."""
    platforms = data["platforms"]
    ranks = f"; {data['world_size']} ranks" if data["world_size"] > 1 else ""
    blocks = [
        f"# {LABEL}: one step on Trainium",
        f"> {data['disclaimer']}",
        f"Step: {data['step']}. One logical NeuronCore = LNC {data['lnc']} physical cores{ranks}.",
    ]
    headers = ["platform", f"{LABEL} step time", "FLOPs", "HBM bytes", "MFU"]
    rows = []
    for p, s in platforms.items():
        mfu = f"{s['mfu']:.1%} of {s['mfu_dtype']} peak" if s["mfu"] is not None else "n/a"
        rows.append(
            [
                f"{p} ({s['core']})",
                _seconds(s["step_time_s"]),
                _count(s["flops"], "FLOP"),
                _count(s["hbm_bytes"], "B"),
                mfu,
            ]
            + ([f"{s['cost_per_step']:.3g}"] if "cost_per_step" in s else [])
        )
    if data["price_per_hour"] is not None:
        headers.append("cost per step")
    blocks.append(table(headers, rows))
    if data["host_transfer_bytes"]:
        blocks.append(
            f"Host↔device copies ({_count(data['host_transfer_bytes'], 'B')} per step) are not "
            "in the estimate: the hardware references document no host-link bandwidth."
        )
    for p, s in platforms.items():
        step = s["step_time_s"] or 1.0
        classes = [[c, _seconds(t), f"{t / step:.1%}"] for c, t in s["time_by_class_s"].items()]
        ops = [
            [
                name,
                o["engine"],
                f"{o['calls']:.4g}",
                _count(o["flops"], "FLOP") if o["flops"] else "",
                _count(o["bytes"], "B"),
                o["bound"],
                _seconds(o["time_s"]),
                f"{o['share']:.1%}",
            ]
            for name, o in list(s["ops"].items())[:top]
        ]
        scopes = [
            [
                sc["scope"],
                sc["logical_cores"],
                f"{sc['peak_tflops']:.0f} ({s['mfu_dtype']})",
                f"{sc['hbm_tb_s']:.2f}",
                f"{sc['steps_per_s']:.4g}" if sc["steps_per_s"] else "n/a",
            ]
            + ([f"{sc['tokens_per_s']:.4g}"] if data["tokens_per_step"] else [])
            for sc in s["scopes"]
        ]
        scope_headers = ["scope", "logical cores", "peak TFLOPS", "HBM TB/s", "steps/s"]
        scope_headers += ["tokens/s"] if data["tokens_per_step"] else []
        blocks += [
            f"## {p}: {LABEL} time by op class",
            table(["class", "time", "share"], classes),
            f"## {p}: the ops that dominate ({LABEL})",
            table(["op", "engine", "calls", "FLOPs", "HBM bytes", "bound", "time", "share"], ops),
            f"{p} per scope, one replica of this step on each logical core (data parallel; "
            "the gradient all-reduce between replicas is included only when the script ran "
            "it under torchrun):",
            table(scope_headers, scopes),
        ]
        if "cost_per_epoch" in s:
            blocks.append(
                f"{p}: {s['cost_per_epoch']:.4g} per epoch of {data['steps_per_epoch']} steps."
            )
    if data["price_per_hour"] is not None:
        blocks.append(
            f"Cost at {data['price_per_hour']} per instance-hour (your price; none is built "
            "in), with every logical core of the instance running a replica."
        )
    blocks.append("## Hardware numbers used")
    blocks.append(f"Sources: files of {SDK}")
    blocks.append(
        table(
            ["platform", "constant", "value", "source"],
            [
                [p, name, value, data["hardware"][p]["sources"][key].removeprefix(SDK)]
                for p in platforms
                for name, value, key in _constants(data["hardware"][p])
            ],
        )
    )
    return "\n\n".join(b.rstrip("\n") for b in blocks) + "\n"


def _constants(hw):
    """(name, value, source key) of each documented number the model uses."""
    tensor = ", ".join(f"{k} {v:g}" for k, v in hw["tensor_tflops"].items())
    return [
        ("NeuronCores per chip", hw["physical_cores"], "cores"),
        ("TensorE dense TFLOPS per core", tensor, "tensor"),
        (
            "VectorE elements/cycle (2-byte, other) @ GHz",
            f"{hw['vector_elements']} @ {hw['vector_ghz']}",
            "vector",
        ),
        (
            "ScalarE elements/cycle (2-byte, other) @ GHz",
            f"{hw['scalar_elements']} @ {hw['scalar_ghz']}",
            "scalar",
        ),
        ("HBM TB/s per chip", hw["hbm_tb_s"], "hbm"),
        ("DMA GB/s per core (collectives within a chip)", hw["dma_gb_s"], "dma"),
        ("NeuronLink TB/s per chip", hw["link_tb_s"], "link"),
        (f"chips per {hw['instance']}", hw["instance_chips"], "instance"),
    ]


def plot(data, path):
    """A bar chart of the estimated time by op class on each platform."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt
    except ImportError:
        raise SystemExit(
            "torchneuron estimate: --plot needs matplotlib; install it with "
            "`pip install matplotlib` (in the torchneuron checkout: "
            "`pip install --no-build-isolation -e '.[tools]'`)"
        ) from None
    platforms = data["platforms"]
    classes = sorted({c for s in platforms.values() for c in s["time_by_class_s"]})
    longest = max(s["step_time_s"] for s in platforms.values())
    unit, scale = ("s", 1.0) if longest >= 1 else ("ms", 1e3) if longest >= 1e-3 else ("µs", 1e6)
    fig, ax = plt.subplots(figsize=(8.5, 1.2 + 0.7 * len(platforms)))
    left = [0.0] * len(platforms)
    names = list(platforms)
    for c in classes:
        widths = [platforms[p]["time_by_class_s"].get(c, 0.0) * scale for p in names]
        ax.barh(names, widths, left=left, label=c)
        left = [a + b for a, b in zip(left, widths)]
    ax.set_xlabel(f"{LABEL}: time per step ({unit})")
    ax.set_title(f"{LABEL}: time by op class (roofline, not measured)")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
