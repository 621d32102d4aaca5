"""DCGAN on 64x64 images prepared per sample in the training process, with the label tensors built on the
CPU and copied over every iteration, and both losses printed every iteration."""

import argparse

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Faces(Dataset):
    def __init__(self, length, size=64):
        self.length, self.size = length, size

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        rng = np.random.default_rng(index)
        raw = rng.integers(0, 256, (self.size * 2, self.size * 2, 3), dtype=np.uint8).astype(np.float32)
        image = raw.reshape(self.size, 2, self.size, 2, 3).mean(axis=(1, 3))  # a 2x box downscale
        return torch.from_numpy((image / 127.5 - 1.0).transpose(2, 0, 1).copy())


def generator(nz=100, ngf=64):
    return nn.Sequential(
        nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 8), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
        nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh(),
    )


def discriminator(ndf=64):
    return nn.Sequential(
        nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 8), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False), nn.Flatten(), nn.Sigmoid(),
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--nz", type=int, default=100)
    parser.add_argument("--iters", type=int, default=400)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(Faces(60_000), batch_size=args.batch_size, shuffle=True, drop_last=True)
    net_g, net_d = generator(args.nz).to(device), discriminator().to(device)
    criterion = nn.BCELoss()
    opt_d = torch.optim.Adam(net_d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(net_g.parameters(), lr=2e-4, betas=(0.5, 0.999))

    it = 0
    for epoch in range(25):
        for real in loader:
            real = real.to(device)
            b = real.size(0)
            real_label = torch.ones(b).to(device)
            fake_label = torch.zeros(b).to(device)

            net_d.zero_grad()
            err_real = criterion(net_d(real).view(-1), real_label)
            noise = torch.randn(b, args.nz, 1, 1, device=device)
            fake = net_g(noise)
            err_fake = criterion(net_d(fake.detach()).view(-1), fake_label)
            (err_real + err_fake).backward()
            opt_d.step()

            net_g.zero_grad()
            err_g = criterion(net_d(fake).view(-1), real_label)
            err_g.backward()
            opt_g.step()

            print(f"[{epoch}][{it}] loss_D {(err_real + err_fake).item():.4f} loss_G {err_g.item():.4f}", flush=True)
            it += 1
            if it == args.iters:
                return


if __name__ == "__main__":
    main()
