"""The coverage sweep: PyTorch's own test samples, each run on neuron and on the CPU.

``plan`` turns the chosen databases, dtypes and name patterns into tasks (and the entries left
out, with why); ``sweep`` runs the tasks in crash-isolated worker processes and returns the
results per entry, which ``summarize`` totals. The ``torchneuron coverage`` command and the
test suite's OpInfo sweep (tests/test_opinfo.py) both run it.
"""

import collections
import fnmatch

from torch_neuronx.cli._sweep import _databases as databases
from torch_neuronx.cli._sweep import _outcomes as outcomes
from torch_neuronx.cli._sweep import _workers as workers
from torch_neuronx.cli._sweep._databases import DATABASES, DTYPES, SEED
from torch_neuronx.cli._sweep._outcomes import MATCHES, OUTCOMES
from torch_neuronx.cli._sweep._workers import WorkerStartError

__all__ = [
    "DATABASES",
    "DTYPES",
    "MATCHES",
    "OUTCOMES",
    "SEED",
    "WorkerStartError",
    "plan",
    "summarize",
    "sweep",
]


def _matches(name, patterns):
    """`name` ('op' or 'op[variant]') is one of the patterns, or its name or op matches one."""
    base = name.split("[")[0]
    return any(
        p in (name, base) or fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(base, p)
        for p in patterns
    )


def plan(database_names, dtype_names, grad, patterns=(), plugins=()):
    """(tasks, not swept): the workers' tasks, and [{database, name, dtype, reason}] for the
    entries that the databases leave out for a dtype (no CPU support, no gradient, ...)."""
    tasks, not_swept = [], []
    for database_name in database_names:
        database = DATABASES[database_name]
        for index, entry in enumerate(databases.load(database_name, plugins)):
            name = database.entry_name(entry)
            if patterns and not _matches(name, patterns):
                continue
            for dtype_name in dtype_names:
                reason = database.not_swept(entry, DTYPES[dtype_name], grad)
                if reason:
                    not_swept.append(
                        {
                            "database": database_name,
                            "name": name,
                            "dtype": dtype_name,
                            "reason": reason,
                        }
                    )
                else:
                    tasks.append(workers.Task(database_name, index, name, dtype_name, grad))
    return tasks, not_swept


def _entry(task):
    return {
        "database": task.database,
        "name": task.name,
        "dtype": task.dtype,
        "samples": 0,
        **dict.fromkeys(OUTCOMES, 0),
        **dict.fromkeys(MATCHES, 0),
        "excluded_by": {},
        "fallback_ops": {},
        # Every sample that is not a bit-identical pass on the native path, and what it was.
        "notes": [],
    }


def sweep(tasks, *, workers_count, plugins=(), timeout=300.0, progress=None):
    """Runs `tasks`; returns (entries, not swept) where entries are one dict per task that made
    samples (counts per outcome and match, exclusions and fallback ops by name, notes) and not
    swept lists the tasks whose sample generator failed. `progress(task, entry)` is called as
    each task finishes."""
    results = {task: _entry(task) for task in tasks}
    skipped = []
    fallback = {task: collections.Counter() for task in tasks}
    for task, kind, data in workers.run(
        tasks, workers=workers_count, plugins=plugins, timeout=timeout
    ):
        entry = results[task]
        if kind == workers.SAMPLES:
            entry["samples"] = data[0]
        elif kind == workers.SKIPPED:
            skipped.append(
                {
                    "database": task.database,
                    "name": task.name,
                    "dtype": task.dtype,
                    "reason": data[0],
                }
            )
        elif kind == workers.SAMPLE:
            index, verdict, fallback_ops, description = data
            _count(entry, index, verdict, description)
            fallback[task].update(fallback_ops)
        if kind in (workers.DONE, workers.SKIPPED):
            entry["fallback_ops"] = dict(sorted(fallback[task].items()))
            if progress:
                progress(task, entry)
    entries = [e for task, e in results.items() if e["samples"]]
    return entries, skipped


def _count(entry, index, verdict, description):
    outcome, match, detail = verdict["outcome"], verdict["match"], verdict["detail"]
    entry[outcome] += 1
    if outcome == outcomes.PASSED:
        entry[match] += 1
    if outcome == outcomes.EXCLUDED:
        entry["excluded_by"][detail] = entry["excluded_by"].get(detail, 0) + 1
    if outcome not in (outcomes.PASSED, outcomes.FALLBACK) or match != outcomes.BIT_IDENTICAL:
        note = {"sample": index, "outcome": outcome, "match": match, "detail": detail}
        if description:
            note["description"] = description
        entry["notes"].append(note)


def summarize(entries, not_swept):
    """Totals over `entries`: samples, each outcome and match, exclusions and fallback ops by
    name (in samples), entries swept and not swept (by reason)."""
    total = collections.Counter()
    excluded_by, fallback_ops, reasons = (collections.Counter() for _ in range(3))
    for entry in entries:
        total.update({k: entry[k] for k in ("samples", *OUTCOMES, *MATCHES)})
        excluded_by.update(entry["excluded_by"])
        fallback_ops.update(entry["fallback_ops"])
    for item in not_swept:
        reasons[item["reason"]] += 1
    return {
        "samples": total["samples"],
        **{k: total[k] for k in (*OUTCOMES, *MATCHES)},
        "entries": len(entries),
        "entries_failing": sum(1 for e in entries if e["failed"] or e["crashed"]),
        "not_swept": len(not_swept),
        "not_swept_by": dict(reasons.most_common()),
        "generator_failures": sum(
            1 for item in not_swept if item["reason"].startswith(outcomes.GENERATOR_FAILED)
        ),
        "excluded_by": dict(excluded_by.most_common()),
        "fallback_ops": dict(fallback_ops.most_common()),
    }
