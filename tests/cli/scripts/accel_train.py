"""A pytorch/examples-style training script: `--accel` trains on torch.accelerator when there is
one. A small convolutional classifier on generated images."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--accel", action="store_true", help="use the accelerator if available")
    parser.add_argument("--steps", type=int, default=20, help="training steps")
    parser.add_argument("--lr", type=float, default=1.0, help="learning rate (Adadelta)")
    parser.add_argument("--dropout", type=float, default=0.0, help="dropout probability")
    parser.add_argument("--double", action="store_true", help="train in float64")
    args = parser.parse_args()
    if args.accel and torch.accelerator.is_available():
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")
    print("Using device:", device)

    torch.manual_seed(1)
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Dropout(args.dropout),
        nn.Linear(8 * 13 * 13, 10),
    ).to(device)
    dtype = torch.float64 if args.double else torch.float32
    model.to(dtype)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr)
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(args.steps, 16, 1, 28, 28, generator=generator)
    labels = torch.randint(0, 10, (args.steps, 16), generator=generator)
    model.train()
    for step in range(args.steps):
        data, target = images[step].to(device, dtype), labels[step].to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(F.log_softmax(model(data), dim=1), target)
        loss.backward()
        optimizer.step()
        print(f"Train step {step}\tLoss: {loss.item():.6f}")


if __name__ == "__main__":
    main()
