"""Run an nki-library checkout's own simulation tests against our ``nki``; print the table.

    python tools/nkilib_check/run.py /path/to/nki-library [--modules SUBSTR ...]
        [--platforms auto | trn2 trn3] [--test-timeout SECONDS] [--out DIR] [--parallel]
        [--sample N] [--report-only]

Per platform, one pytest session runs the checkout's ``test/integration`` modules as its
test/README.md says (``--test-mode simulation -m fast --platform-target P``; by default each
module once: on trn3 if it has trn3-only tests, else on the harness's default trn2), with the
stand-ins of this folder for AWS's internal packages on the path and ``harness.py`` loaded as a
plugin; a test that runs longer than ``--test-timeout`` is stopped and counted as timed out,
and after two such tests the rest of the module is not run; ``--sample n`` runs only each
module's first n tests (the suite's ~2,000 fast cases take hours on two cores).
Nothing is written into the checkout: the harness's artifacts go to ``--out``.  The table
(Markdown, also ``OUT/table.md``) gives per module and platform the passed, failed, errored,
timed-out, not-run, not-reached (the session stopped first) and skipped tests with the seconds
they took, and the first failure's message.
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PLATFORMS = ("trn2", "trn3")
OUTCOMES = (
    "passed", "failed", "error", "timeout", "not run", "not reached", "not sampled", "skipped"
)  # fmt: skip


def platform_of(checkout, module):
    """The harness's default platform (trn2), or trn3 for a module with trn3-only tests."""
    text = (checkout / module).read_text()
    return "trn3" if re.search(r"exclude=\[[^\]]*Platforms\.TRN2", text) else "trn2"


def modules(checkout, wanted):
    found = sorted((checkout / "test" / "integration").rglob("test_*.py"))
    rel = [p.relative_to(checkout).as_posix() for p in found]
    return [m for m in rel if not wanted or any(w in m for w in wanted)]


def start_platform(checkout, selected, platform, test_timeout, sample, out):
    """Start one pytest session over ``selected`` on ``platform``; ``finish`` waits for it."""
    work = out / platform
    work.mkdir(parents=True, exist_ok=True)
    results = work / "results.json"
    results.unlink(missing_ok=True)
    env = dict(os.environ)
    path = [str(HERE / "stand_ins"), str(HERE), str(checkout / "src"), str(checkout)]
    env["PYTHONPATH"] = os.pathsep.join(path + [env.get("PYTHONPATH", "")])
    env["NKILIB_CHECK_RESULTS"] = str(results)
    env["NKILIB_CHECK_TEST_TIMEOUT"] = str(int(test_timeout))
    env["NKILIB_CHECK_SAMPLE"] = str(sample)
    command = [
        sys.executable, "-m", "pytest", *selected, "-q", "-p", "harness",
        "-p", "no:cacheprovider", "--test-mode", "simulation", "-m", "fast",
        "--platform-target", platform, "--continue-on-collection-errors",
        "--disable-no-tests-failure", "--output-directory", str(work / "output"),
        "-o", f"artifacts_dir={work / 'artifacts'}",
    ]  # fmt: skip
    log = open(work / "pytest.log", "w")
    process = subprocess.Popen(command, cwd=checkout, env=env, stdout=log, stderr=log)
    return process, log, results, time.monotonic()


def finish(platform, process, log, results, start):
    """The session's results (the plugin's JSON) and its time."""
    process.wait()
    log.close()
    seconds = time.monotonic() - start
    if not results.exists():
        sys.exit(f"the {platform} session recorded nothing; see {log.name}")
    return json.loads(results.read_text()), seconds


def per_module(data):
    """{module path: {"counts", "seconds", "first"}} from one session's results (node ids are
    relative to the harness's rootdir, test/, where its pytest.ini is)."""
    table = collections.defaultdict(
        lambda: {"counts": collections.Counter(), "seconds": 0.0, "first": "", "import": ""}
    )
    for nodeid, entry in data["tests"].items():
        row = table["test/" + nodeid.split("::")[0]]
        row["counts"][entry["outcome"]] += 1
        row["seconds"] += entry["seconds"]
        if not row["first"] and entry["outcome"] in ("failed", "error", "timeout"):
            row["first"] = entry["message"]
    for nodeid in data.get("collected", ()):
        if nodeid not in data["tests"]:
            table["test/" + nodeid.split("::")[0]]["counts"]["not reached"] += 1
    for nodeid, message in data["collection_errors"].items():
        table["test/" + nodeid.split("::")[0]]["import"] = message
    return table


def cell(row):
    if row is None:
        return "–"
    if row["import"]:
        return "import error"
    counts = row["counts"]
    if not any(counts.values()):
        return "–"
    parts = [f"{counts[k]} {k}" for k in OUTCOMES if counts[k]]
    return ", ".join(parts) + f" ({row['seconds']:.0f} s)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="an nki-library checkout")
    parser.add_argument("--modules", nargs="*", default=[], help="run modules whose path holds one")
    parser.add_argument(
        "--platforms",
        nargs="+",
        default=["auto"],
        help="platforms to run every module on; auto (the default): each module once, on trn3 if "
        "it has trn3-only tests, else on trn2",
    )
    parser.add_argument("--test-timeout", type=float, default=600, help="seconds per test")
    parser.add_argument("--out", type=Path, default=Path("build/nkilib-check"))
    parser.add_argument("--parallel", action="store_true", help="run the platforms at once")
    parser.add_argument(
        "--sample", type=int, default=0, help="run only the first n tests of each module"
    )
    parser.add_argument(
        "--report-only", action="store_true", help="tabulate the results already in --out"
    )
    args = parser.parse_args()
    checkout = args.checkout.resolve()
    if not (checkout / "test" / "integration").is_dir():
        sys.exit(f"{checkout} is not an nki-library checkout (no test/integration)")
    out = args.out.resolve()
    selected = modules(checkout, args.modules)
    if args.platforms == ["auto"]:
        plan = {p: [m for m in selected if platform_of(checkout, m) == p] for p in PLATFORMS}
    else:
        plan = {p: selected for p in args.platforms}
    plan = {p: ms for p, ms in plan.items() if ms}
    tables, times, running = {}, {}, {}
    if args.report_only:
        for platform in plan:
            data = json.loads((out / platform / "results.json").read_text())
            tables[platform], times[platform] = per_module(data), data["seconds"]
    for platform in [] if args.report_only else plan:
        selection = plan[platform]
        running[platform] = start_platform(
            checkout, selection, platform, args.test_timeout, args.sample, out
        )
        if not args.parallel:
            data, times[platform] = finish(platform, *running.pop(platform))
            tables[platform] = per_module(data)
    for platform, session in running.items():
        data, times[platform] = finish(platform, *session)
        tables[platform] = per_module(data)
    header = ["module"] + list(plan) + ["first failure"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    shown = 0
    for module in selected:
        rows = [tables[p].get(module) for p in plan]
        cells = [cell(r) for r in rows]
        if all(c == "–" for c in cells):
            continue  # no test in this file (a helper module)
        shown += 1
        messages = [r["import"] or r["first"] for r in rows if r]
        first = next((m for m in messages if m), "")
        first = first.replace("|", "\\|").replace("`", "'")
        name = module.removeprefix("test/integration/nkilib/").removesuffix(".py")
        lines.append("| " + " | ".join([name] + cells + [f"`{first}`" if first else "–"]) + " |")
    spent = ", ".join(f"{p} {times[p] / 60:.1f} min" for p in plan)
    summary = f"{shown} modules with tests (of {len(selected)} test_*.py files); sessions: {spent}"
    text = "\n".join(lines) + "\n\n" + summary + "\n"
    (out / "table.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
