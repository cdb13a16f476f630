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


def import_seconds(autoload, runs=5):
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="1" if autoload else "0")
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], env=env, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def clean_build_seconds():
    build = tempfile.mkdtemp(prefix="torchneuron-build-")
    try:
        start = time.perf_counter()
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-temp", build,
                        "--build-lib", build], cwd=ROOT, check=True,
                       env=dict(os.environ, MAX_JOBS="2"), capture_output=True)
        return time.perf_counter() - start
    finally:
        shutil.rmtree(build, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", action="store_true", help="also time a clean C++ build")
    args = parser.parse_args()
    plain, loaded = import_seconds(False), import_seconds(True)
    print(f"import torch: {plain:.2f} s without torchneuron, {loaded:.2f} s with autoload; "
          f"autoload adds {loaded - plain:.2f} s (target <= 0.30 s)")
    if args.build:
        print(f"clean build of the C++ extensions, 2 jobs: {clean_build_seconds():.0f} s "
              "(target <= 90 s)")


if __name__ == "__main__":
    main()
