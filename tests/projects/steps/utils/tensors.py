import torch


def to_device(batch, device):
    return [t.to(device) for t in batch]


def cuda_all(batch):
    return [t.cuda() for t in batch]


def positives(scores):
    return torch.nonzero(scores > 0.5)


def masked_loss(logits, labels):
    keep = labels != -100
    return torch.nn.functional.cross_entropy(logits[keep], labels[keep])


def log_loss(writer, loss, step):
    log_scalars_twice(writer, loss, step)


def log_scalars_twice(writer, loss, step):
    writer.add_scalar("loss", loss, step)
    writer.add_scalar("loss/smoothed", loss, step)


def padded_loss(logits, labels):
    return torch.nn.functional.cross_entropy(logits, labels, ignore_index=-100)
