import torch

from engine import Trainer, evaluate


def main(model, train_set, val_set, writer, epochs=10):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    trainer = Trainer(model, train_set, writer, device)
    for _ in range(epochs):
        trainer.train_one_epoch()
        evaluate(trainer.model, val_set, device)
