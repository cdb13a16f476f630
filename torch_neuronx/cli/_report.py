"""What ``check`` and ``parity`` share to write their reports: Markdown for people (stdout, and
``--report FILE``), JSON for machines (``--json``), and how places and sizes read."""

import argparse
import json
import os
import sys

from torch_neuronx._markdown import table  # noqa: F401 - the reports' tables


def add_output_arguments(parser):
    """Adds --report and --json."""
    parser.add_argument("--report", metavar="FILE", help="also write the Markdown report to FILE")
    parser.add_argument(
        "--json", action="store_true", help="print the report as JSON instead of Markdown"
    )


def positive_int(text):
    """An argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def write(args, markdown, data):
    """Prints the report (JSON with --json, else Markdown) and writes --report's file."""
    if args.report:
        _write_file(args.report, markdown)
    sys.stdout.write(json.dumps(data, indent=2) + "\n" if args.json else markdown)
    sys.stdout.flush()


def _write_file(path, text):
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def place(frame):
    """``file:line`` of a frame record, relative to the working directory when inside it."""
    if not frame:
        return "(unknown)"
    path = frame["file"]
    installed = os.sep + "site-packages" + os.sep
    if installed in path:
        path = path.split(installed, 1)[1]  # another library: its module path reads best
    elif os.path.isabs(path):
        relative = os.path.relpath(path)
        if not relative.startswith(".."):
            path = relative
    return f"{path}:{frame['line']}"


def code_place(frame):
    """A place with the source line, as Markdown: `file:line` `code`."""
    if not frame:
        return "(unknown)"
    code = frame.get("code")
    return f"`{place(frame)}`" + (f" `{code}`" if code else "")


def size(nbytes):
    """Bytes in a readable unit."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def seconds(value):
    """Seconds in a readable unit."""
    if value is None:
        return "n/a"
    if value < 1e-3:
        return f"{value * 1e6:.0f} µs"
    if value < 1:
        return f"{value * 1e3:.1f} ms"
    return f"{value:.2f} s"


def first_line(text, limit=160):
    """The first line of a message, shortened to ``limit`` characters."""
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"
