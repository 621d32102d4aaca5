"""A correct CUDA prefetcher: copies on a side stream, waits before handing the batch out."""

import torch


class Prefetcher:
    def __init__(self, loader, device) -> None:
        self.loader = iter(loader)
        self.device = device
        self.stream = torch.cuda.Stream()
        self.preload()

    def preload(self) -> None:
        try:
            inputs, targets = next(self.loader)
        except StopIteration:
            self.next_batch = None
            return
        with torch.cuda.stream(self.stream):
            self.next_batch = (inputs.to(self.device, non_blocking=True), targets.to(self.device, non_blocking=True))

    def next(self):
        torch.cuda.current_stream().wait_stream(self.stream)
        batch = self.next_batch
        if batch is not None:
            for tensor in batch:
                tensor.record_stream(torch.cuda.current_stream())
        self.preload()
        return batch
