"""A training loop that times its own steps by hand, for bench/profile_overhead.py.

`python hand_timed_loop.py OUT FIRST COUNT [--step-ms MS]`: `time.perf_counter()` right after every
`optimizer.step()`; once steps FIRST .. FIRST+COUNT are done, their durations are written to OUT (one per line),
the same way whether or not gpulint is profiling the run. `--step-ms` adds host work per step (a sleep standing in
for a GPU's share of a real step) so a slower, more typical step can be measured too.
"""

import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    out, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    step_s = float(sys.argv[sys.argv.index("--step-ms") + 1]) / 1000 if "--step-ms" in sys.argv else 0.0
    torch.manual_seed(0)
    torch.set_num_threads(1)
    data = TensorDataset(torch.randn(64 * 1000, 64), torch.randint(0, 10, (64 * 1000,)))
    loader = DataLoader(data, batch_size=64)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    ticks = []
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        if step_s:
            time.sleep(step_s)
        ticks.append(time.perf_counter())
        if len(ticks) == first + count + 1:
            with open(out, "w") as f:
                f.write("\n".join(f"{b - a:.9f}" for a, b in zip(ticks[first:], ticks[first + 1 :])) + "\n")


if __name__ == "__main__":
    main()
