"""A learning-rate range test: one run of `--num_iter` (default 100) steps, then a plot."""
import argparse

import torch
from torch import nn

from data import train_loader

parser = argparse.ArgumentParser()
parser.add_argument("-num_iter", type=int, default=100)
args = parser.parse_args()

net = nn.Linear(32, 10).cuda()
optimizer = torch.optim.SGD(net.parameters(), lr=1e-7)
epochs = int(args.num_iter / len(train_loader)) + 1
n = 0
losses = []
for epoch in range(epochs):
    for batch_index, (images, labels) in enumerate(train_loader):
        if n > args.num_iter:
            break
        images, labels = images.cuda(), labels.cuda()
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(net(images), labels)
        if torch.isnan(loss).any():
            n += 1e8
            break
        loss.backward()
        optimizer.step()
        print(f"{n}: {loss.item():.4f}")
        losses.append(loss.item())
        n += 1
