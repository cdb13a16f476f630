"""Start-up costs: what autoloading torchneuron adds to `import torch`, and (with --build) how
long a clean build of the C++ extension takes on this machine."""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_MEASURE = """
import time, torch
start = time.perf_counter()
import torch_neuronx
print(time.perf_counter() - start)
"""


def autoload_seconds(runs=7):
    """What autoload adds to `import torch`: importing torch_neuronx into a process whose torch
    was imported without it. Timed in-process, so interpreter start-up noise stays out."""
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    times = [
        float(
            subprocess.run(
                [sys.executable, "-c", _MEASURE],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        for _ in range(runs)
    ]
    return statistics.median(times)


def clean_build_seconds():
    build = tempfile.mkdtemp(prefix="torchneuron-build-")
    try:
        start = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "setup.py",
                "-q",
                "build_ext",
                "--build-temp",
                build,
                "--build-lib",
                build,
            ],
            cwd=ROOT,
            check=True,
            env=dict(os.environ, MAX_JOBS="2"),
            capture_output=True,
        )
        return time.perf_counter() - start
    finally:
        shutil.rmtree(build, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", action="store_true", help="also time a clean C++ build")
    args = parser.parse_args()
    print(
        f"autoload adds {autoload_seconds():.3f} s to `import torch` (median of 7 fresh "
        "processes; target <= 0.30 s)"
    )
    if args.build:
        print(
            f"clean build of the C++ extensions, 2 jobs: {clean_build_seconds():.0f} s "
            "(target <= 90 s)"
        )


if __name__ == "__main__":
    main()
