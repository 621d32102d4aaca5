"""Real training and evaluation loops: their per-step reads stay reported."""
import argparse

import torch
from torch import nn

from data import test_loader, train_loader

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=100000)
parser.add_argument("--num_iter", type=int, default=100)
args = parser.parse_args()

model = nn.Linear(32, 10).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for epoch in range(100):
    for images, labels in train_loader:
        loss = nn.functional.cross_entropy(model(images.cuda()), labels.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.item())

batches = iter(train_loader)
for step in range(args.steps):
    images, labels = next(batches)
    loss = nn.functional.cross_entropy(model(images.cuda()), labels.cuda())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(loss.item())

n = 0
for images, labels in train_loader:
    if n == args.num_iter:
        break
    loss = nn.functional.cross_entropy(model(images.cuda()), labels.cuda())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(loss.item())
    if torch.isnan(loss):
        n += 7
    n += 1

predictions = []
with torch.no_grad():
    for images, _ in test_loader:
        predictions.append(model(images.cuda()).argmax(1).cpu())
