"""How the serving tests run vLLM: each run a process of its own, bounded in time."""

import contextlib
import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request

SUPPORT = pathlib.Path(__file__).parent
# Every run is bounded: a hung engine fails its test instead of stalling the suite.
RUN_TIMEOUT_S = 600

# Both runs: one engine process (in-process core), 1 GiB of KV cache (VLLM_CPU_KVCACHE_SPACE,
# vLLM's own setting), no thread pinning (the machine is shared), nothing downloaded.
BASE_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
}
# Stock vLLM on the CPU: no plugin loaded (VLLM_PLUGINS names none), so torchneuron is not
# loaded either (nor by import torch).
STOCK_ENV = {"VLLM_PLUGINS": "", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}


def vllm_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "TORCHNEURON_"))}
    env.update(BASE_ENV)
    env.update(extra)
    env["PYTHONPATH"] = os.pathsep.join([str(SUPPORT), env.get("PYTHONPATH", "")])
    return env


def run_vllm(*args, **env):
    """Runs tests/support/vllm_generate.py with `args`; its result."""
    proc = subprocess.run(
        [sys.executable, str(SUPPORT / "vllm_generate.py"), *map(str, args)],
        env=vllm_env(**env),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"vLLM run {args} failed:\n{proc.stderr[-6000:]}"
    return json.loads(lines[-1][len("RESULT ") :])


SERVER_STARTUP_TIMEOUT_S = 300
REQUEST_TIMEOUT_S = 120


def post(url, body):
    """POSTs `body` as JSON; the open response."""
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    return urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S)


@contextlib.contextmanager
def openai_server(model, log, *args, **env):
    """vLLM's OpenAI server for `model` on a free loopback port, its output in `log`; yields
    its base URL and stops it on exit. `env` as for run_vllm (STOCK_ENV for stock vLLM)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server_env = vllm_env(**env)
    # The server's engine runs in a process of its own, as in production.
    server_env.pop("VLLM_ENABLE_V1_MULTIPROCESSING")
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
               "--max-model-len", "256", "--enforce-eager", "--seed", "0",
               "--host", "127.0.0.1", "--port", str(port), *args]  # fmt: skip
    with open(log, "w") as out:
        proc = subprocess.Popen(command, env=server_env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the server exited:\n{pathlib.Path(log).read_text()[-6000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no server after {SERVER_STARTUP_TIMEOUT_S} s")
            try:
                if urllib.request.urlopen(base + "/health", timeout=5).status == 200:
                    break
            except OSError:
                time.sleep(1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
