"""A side stream that reads a tensor the default stream is still writing: the result is wrong until the
side stream waits for the producer (GPU301's fix). Prints how many of the trials disagree with the reference."""

import sys

import torch


def side_sum(seed, side):
    torch.manual_seed(seed)
    a = torch.randn(4096, 4096, device="cuda")
    product = (a @ a) @ a
    with torch.cuda.stream(side):
        total = product.sum()
    return total


def main():
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    device = torch.device("cuda")
    side = torch.cuda.Stream()
    wrong = 0
    for trial in range(trials):
        total = side_sum(trial, side)
        torch.cuda.synchronize()
        torch.manual_seed(trial)
        a = torch.randn(4096, 4096, device=device)
        reference = ((a @ a) @ a).sum()
        if not torch.allclose(total, reference, rtol=1e-3, atol=1e-2):
            wrong += 1
    print(f"wrong results: {wrong} of {trials}")


if __name__ == "__main__":
    main()
