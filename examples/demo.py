"""Trains a small GPT on the emulated neuron device and on the CPU from the same seed,
and shows that the two loss curves are identical."""

import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from tiny_gpt import train

STEPS = int(os.environ.get("DEMO_STEPS", "200"))


def adamw(params):
    return torch.optim.AdamW(params, lr=3e-3)


def main():
    print(
        f"torch {torch.__version__}; accelerator: {torch.accelerator.current_accelerator()} "
        f"({torch.neuron.device_count()} emulated {torch.neuron.get_device_properties().name} "
        "NeuronCores)"
    )
    for device in ("neuron", "cpu"):
        train(device, 5, adamw)  # warm-up, so that neither timing includes first-call costs
    t0 = time.perf_counter()
    neuron_losses, _ = train("neuron", STEPS, adamw)
    t1 = time.perf_counter()
    cpu_losses, _ = train("cpu", STEPS, adamw)
    t2 = time.perf_counter()
    print(f"\n{'step':>6} {'neuron loss':>14} {'cpu loss':>14}")
    for step in list(range(0, STEPS, max(1, STEPS // 20))) + [STEPS - 1]:
        print(f"{step:>6} {neuron_losses[step]:>14.8f} {cpu_losses[step]:>14.8f}")
    same = neuron_losses == cpu_losses
    worst = max(abs(a - b) for a, b in zip(neuron_losses, cpu_losses))
    print(f"\nneuron: {t1 - t0:.1f} s, cpu: {t2 - t1:.1f} s for {STEPS} steps each")
    print(
        "loss curves are IDENTICAL (bit for bit)"
        if same
        else f"loss curves DIFFER: max difference {worst:.3e}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
