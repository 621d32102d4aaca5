"""Re-record cpu_train_trace.json: a real torch.profiler trace of a tiny CPU training loop.

The loop reads the loss with .item() every step (a scalar read) and fetches from a DataLoader, so the
trace has ProfilerStep, DataLoader and aten::_local_scalar_dense events. Run:
    python tests/profile/data/record_cpu_trace.py
"""

import json
import pathlib
import tempfile

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.data import DataLoader, TensorDataset

OUT = pathlib.Path(__file__).with_name("cpu_train_trace.json")
ACTIVE = 5


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    data = TensorDataset(torch.randn(512, 16), torch.randint(0, 2, (512,)))
    loader = DataLoader(data, batch_size=16)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    tmp = pathlib.Path(tempfile.mkdtemp()) / "trace.json"
    prof = profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=ACTIVE, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(tmp)),
    )
    prof.start()
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        loss.item()  # one scalar read per step
        prof.step()
        if i >= ACTIVE + 1:
            break
    prof.stop()
    trace = json.loads(tmp.read_text())
    OUT.write_text(json.dumps(trace, separators=(",", ":")))  # same events, no indentation
    print(f"wrote {OUT} ({OUT.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
