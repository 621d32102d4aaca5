"""Helpers the training loop calls every step."""


def to_device(batch, device):
    images, labels = batch
    return images.to(device), labels.to(device)


def accuracy(output, target) -> float:
    return (output.argmax(1) == target).float().mean().item()


def log_every(step: int, loss, every: int = 100) -> None:
    if step % every == 0:
        print(f"step {step}: loss {loss.item():.4f}")
