import torch
from torch.utils.data import DataLoader

from utils import AverageMeter, ItemMeter, accuracy, log_scalars, loss_text, percent_text, report, lr_text
from utils.tensors import cuda_all, log_loss, masked_loss, padded_loss, positives, to_device


class Trainer:
    def __init__(self, model, dataset, writer, device):
        self.model = model.to(device)
        self.loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=8, pin_memory=True)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.writer = writer
        self.device = device
        self.losses = ItemMeter()
        self.smooth = AverageMeter()

    def train_one_epoch(self):
        self.model.train()
        for step, (images, labels) in enumerate(self.loader):
            images, labels = cuda_all((images, labels))
            logits = self.model(images)
            loss = masked_loss(logits, labels)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.losses.update(loss, images.size(0))
            self.smooth.update(loss.detach(), images.size(0))
            log_scalars(self.writer, loss, step)
            text = loss_text(loss) + percent_text(loss)
            report(loss, step)
            lr_text(0.1, step)
            if step % 100 == 0:
                log_loss(self.writer, loss, step)
        log_loss(self.writer, loss, 0)


def evaluate(model, dataset, device):
    loader = DataLoader(dataset, batch_size=256, num_workers=8, pin_memory=True)
    meter = ItemMeter()
    model.eval()
    with torch.no_grad():
        for batch in loader:
            images, labels = to_device(batch, device)
            logits = model(images)
            meter.update(padded_loss(logits, labels))
            acc = accuracy(logits, labels)
            hits = positives(logits)
    return meter.sum / meter.count
