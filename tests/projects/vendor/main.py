"""Entry point: parse options, build everything, train (the vendor-example `main.py`)."""

import argparse

import torch

from detection.datasets import build_loader
from detection.engine import evaluate, train_one_epoch
from detection.models import build_model


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--epochs", type=int, default=2)
    return parser.parse_args()


def criterion(outputs, targets):
    return {"box": outputs.abs().mean()}


def main(args) -> None:
    device = torch.device(args.device)
    model = build_model()
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    train_loader = build_loader("train")
    val_loader = build_loader("val")
    for epoch in range(args.epochs):
        train_one_epoch(model, criterion, train_loader, optimizer, device)
        evaluate(model, val_loader, device)


if __name__ == "__main__":
    main(get_args())
