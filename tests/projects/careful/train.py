"""Training that keeps the GPU busy: nothing here should be reported."""

import torch
from torch import nn

from data import make_loader
from prefetch import Prefetcher
from utils import accuracy, detached, log_metrics, setup


def main(steps: int = 100, log_every: int = 25) -> None:
    device = torch.device("cuda")
    model = setup(nn.Linear(32, 4), device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    prefetcher = Prefetcher(make_loader(), device)
    running = torch.zeros((), device=device)
    for step in range(steps):
        batch = prefetcher.next()
        if batch is None:
            break
        inputs, targets = batch
        output = model(inputs)
        loss = nn.functional.cross_entropy(output, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        running += detached(loss)
        log_metrics(step, loss)
        if step % log_every == 0:
            print(f"accuracy {accuracy(output, targets):.3f}")
    print(f"mean loss {(running / steps).item():.4f}")


if __name__ == "__main__":
    main()
