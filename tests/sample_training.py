"""A short training script with a finding of each kind the editor and pull-request tests need: an unsafe fix
with two edits and a related argparse default (GPU101), a finding without a fix in a loop, after a four-byte
character (GPU303), and a safe fix (GPU402)."""

TRAIN = """\
import argparse

import torch
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--workers", type=int, default=0)
args = parser.parse_args()
device = torch.device("cuda")


def train(model, dataset, optimizer):
    loader = DataLoader(dataset, batch_size=64, num_workers=args.workers, pin_memory=True)
    for x in loader:
        loss = model(x.to(device, non_blocking=True)).sum()
        loss.backward()
        optimizer.step()
        print("loss 𐐀", loss.item())
    print(torch.cuda.memory_cached())
"""
