"""A LightningModule classifier whose `train_dataloader` loads spectrogram-like features computed per sample
in numpy (an FFT of a synthetic waveform), trained with a plain `Trainer`."""

import lightning as L
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Spectrograms(Dataset):
    def __init__(self, length, samples=16000, frames=128, bins=128):
        self.length, self.samples, self.frames, self.bins = length, samples, frames, bins

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        rng = np.random.default_rng(index)
        wave = rng.standard_normal(self.samples).astype(np.float32)
        hop = self.samples // self.frames
        frames = np.lib.stride_tricks.sliding_window_view(wave, 2 * self.bins)[::hop][: self.frames]
        spec = np.log1p(np.abs(np.fft.rfft(frames * np.hanning(2 * self.bins), axis=1))[:, : self.bins])
        return torch.from_numpy(spec.astype(np.float32))[None], int(rng.integers(35))


class AudioClassifier(L.LightningModule):
    def __init__(self, classes=35, batch_size=128):
        super().__init__()
        self.batch_size = batch_size
        self.net = nn.Sequential(
            nn.Conv2d(1, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(128, 256, 3, padding=1), nn.BatchNorm2d(256), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
            nn.Flatten(), nn.Linear(256, classes),
        )

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)

    def train_dataloader(self):
        return DataLoader(Spectrograms(50_000), batch_size=self.batch_size, shuffle=True)


def main():
    torch.manual_seed(0)
    trainer = L.Trainer(max_steps=400, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(AudioClassifier())


if __name__ == "__main__":
    main()
