"""Collects ``torchneuron check``'s findings inside the user's process, from the runtime's own
mechanisms: the policy events of the C++ runtime (``neuron::observe``, csrc/aten/Policy.h),
torchneuron's counters and compile metrics, Dynamo's graph-break log and compilation metrics,
and NKI's validation errors. Each event is placed at the user's source line from the Python
stack at the moment it happens."""

import linecache
import logging
import re
import sys
import threading

import torch

import torch_neuronx

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# Dynamo logs each graph break here, with its location and reason, when the level is DEBUG.
GRAPH_BREAK_LOGGER = "torch._dynamo.symbolic_convert.__graph_breaks"
# The fields of Dynamo's CompilationMetrics that the report uses.
COMPILE_FIELDS = (
    "compile_id",
    "co_name",
    "co_filename",
    "co_firstlineno",
    "recompile_reason",
    "fail_type",
    "fail_reason",
    "fail_user_frame_filename",
    "fail_user_frame_lineno",
    "entire_frame_compile_time_s",
    "graph_op_count",
    "has_guarded_code",
)


class _GraphBreakHandler(logging.Handler):
    def __init__(self, records):
        super().__init__(logging.DEBUG)
        self.records = records

    def emit(self, record):
        self.records.append(record.getMessage())


class Observer:
    """Listens while the user's script runs; ``finish()`` returns what it saw, JSON-able."""

    def __init__(self, sources):
        self.sources = sources
        self._lock = threading.Lock()
        self._events = {}
        self._graph_break_messages = []
        self._nki_failures = []
        self._internal_errors = []
        self._library = None
        self._handler = None

    def start(self):
        """Starts listening: defines neuron::observe and turns the runtime's events on."""
        self._library = torch.library.Library("neuron", "FRAGMENT")
        self._library.define("observe(str kind, str op, str detail, int[] values) -> ()")
        self._library.impl("observe", self._on_event, "CompositeImplicitAutograd")
        torch.ops.neuron.set_observing(True)
        logger = logging.getLogger(GRAPH_BREAK_LOGGER)
        logger.setLevel(logging.DEBUG)
        # Kept out of the user's stderr unless they asked for it (TORCH_LOGS=graph_breaks).
        logger.propagate = False
        self._handler = _GraphBreakHandler(self._graph_break_messages)
        logger.addHandler(self._handler)
        import nki.listeners

        self._nki_subscription = nki.listeners.subscribe(failure=self._on_nki_failure)
        self._nki_subscription.__enter__()

    def _place(self, frame):
        """(site, via, phase) of the Python stack from ``frame`` outward."""
        via, phase = None, "forward"
        while frame is not None:
            code = frame.f_code
            kind = self.sources.kind(code.co_filename)
            if kind == "user":
                return (code.co_filename, frame.f_lineno, code.co_name), via, phase
            if kind == "library" and via is None:
                via = (code.co_filename, frame.f_lineno, code.co_name)
            elif kind == "core" and code.co_name == "backward":
                phase = "backward"
            frame = frame.f_back
        return None, via, phase

    def _on_event(self, kind, op, detail, values):
        # Runs inside the user's ops: it must never raise into them.
        try:
            site, via, phase = self._place(sys._getframe(1))
            key = (kind, op, detail, site, via, phase)
            with self._lock:
                agg = self._events.get(key)
                if agg is None:
                    agg = self._events[key] = {
                        "order": len(self._events),  # places in the order they were first met
                        "calls": 0,
                        "bytes": 0,
                        "host_ns": 0,
                        "values": 0,
                        "min": None,
                        "max": None,
                        "overflow_calls": 0,
                    }
                agg["calls"] += 1
                if kind == "fallback":
                    agg["bytes"] += values[0]
                    agg["host_ns"] += values[1]
                elif kind in ("float64", "random"):
                    agg["values"] += values[0]
                elif kind == "int64_random":
                    agg["values"] += values[0]
                    agg["min"], agg["max"] = values[1], values[2]
                elif kind == "int64":
                    numel, low, high = values
                    agg["values"] += numel
                    agg["min"] = low if agg["min"] is None else min(agg["min"], low)
                    agg["max"] = high if agg["max"] is None else max(agg["max"], high)
                    agg["overflow_calls"] += low < INT32_MIN or high > INT32_MAX
        except Exception as e:  # noqa: BLE001 - reported in the findings instead
            self._internal_errors.append(f"{kind} {op}: {type(e).__name__}: {e}")

    def _on_nki_failure(self, error):
        try:
            site, via, _ = self._place(sys._getframe(1))
            with self._lock:
                self._nki_failures.append(
                    {"message": str(error), "site": _frame(site), "via": _frame(via)}
                )
        except Exception as e:  # noqa: BLE001
            self._internal_errors.append(f"nki: {type(e).__name__}: {e}")

    def finish(self, wall_time_s):
        """Stops listening; returns the findings' raw data."""
        torch.ops.neuron.set_observing(False)
        logging.getLogger(GRAPH_BREAK_LOGGER).removeHandler(self._handler)
        self._nki_subscription.__exit__(None, None, None)
        with self._lock:
            events = [
                {
                    "kind": kind,
                    "op": op,
                    "detail": detail,
                    "phase": phase,
                    "site": _frame(site),
                    "via": _frame(via),
                    **agg,
                }
                for (kind, op, detail, site, via, phase), agg in self._events.items()
            ]
        return {
            "wall_time_s": wall_time_s,
            "events": events,
            "counters": {k: v for k, v in torch_neuronx.metrics.counters().items() if v},
            "policy_64bit": torch.ops.neuron.policy_64bit(),
            "graph_breaks": [self._graph_break(m) for m in self._graph_break_messages],
            "nki_failures": list(self._nki_failures),
            **_dynamo_data(),
            "internal_errors": list(self._internal_errors),
        }

    def _graph_break(self, message):
        """One graph break from Dynamo's log record: where, why, and the user's line."""
        found = _GRAPH_BREAK.search(message)
        if not found:
            return {
                "location": None,
                "reason": message.strip().splitlines()[0] if message.strip() else "",
                "explanation": "",
                "hints": [],
                "site": None,
            }
        lines = [line.strip() for line in found["reason"].strip().splitlines()]
        explained = next(
            (i for i, line in enumerate(lines) if line.startswith("Explanation:")), None
        )
        # Dynamo writes a context line, then the break's type, its explanation and hints.
        reason = lines[explained - 1] if explained else (lines[0] if lines else "")
        explanation = lines[explained][len("Explanation:") :].strip() if explained else ""
        hints = [line[len("Hint:") :].strip() for line in lines if line.startswith("Hint:")]
        frames = [
            (f, int(n), fn) for f, n, fn in _TRACEBACK_FRAME.findall(found["traceback"] or "")
        ]
        site, _ = self.sources.place(reversed(frames))
        location = (found["file"], int(found["line"]), "")
        return {
            "location": _frame(location),
            "reason": reason,
            "explanation": explanation,
            "hints": hints,
            "site": _frame(site) if site else _frame(location),
        }


# Dynamo's graph-break record (torch/_dynamo/symbolic_convert.py, log_graph_break).
_GRAPH_BREAK = re.compile(
    r"in user code at (?P<file>.+?):(?P<line>\d+)\s*\nGraph Break Reason: (?P<reason>.*?)"
    r"(?:\n\s*\nUser code traceback:(?P<traceback>.*))?$",
    re.S,
)
_TRACEBACK_FRAME = re.compile(r'File "(.+?)", line (\d+), in (\S+)')


def _frame(place):
    if place is None:
        return None
    filename, line, function = place
    return {
        "file": filename,
        "line": line,
        "function": function,
        "code": linecache.getline(filename, line).strip(),
    }


def _dynamo_data():
    """Dynamo's compilation metrics and graph-break counts, when the script compiled."""
    if "torch._dynamo" not in sys.modules:
        return {"compiles": [], "graph_break_reasons": {}, "neuron_compile": None}
    from torch._dynamo import utils

    compiles = [
        {field: _jsonable(getattr(m, field, None)) for field in COMPILE_FIELDS}
        for m in utils.get_compilation_metrics()
    ]
    return {
        "compiles": compiles,
        "graph_break_reasons": dict(utils.counters["graph_break"]),
        "neuron_compile": torch_neuronx.get_dynamo_metrics(),
    }


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
