"""A GAN whose latent walk renders ten images between two noise vectors for one saved grid."""
import torch
from torch import nn
from torchvision import utils


class GAN:
    def __init__(self):
        self.G = nn.Sequential(nn.Linear(100, 3 * 32 * 32), nn.Tanh()).cuda()

    def generate_latent_walk(self, number):
        number_int = 10
        z1 = torch.randn(1, 100, device="cuda")
        z2 = torch.randn(1, 100, device="cuda")
        images = []
        alpha = 1.0 / float(number_int + 1)
        for i in range(1, number_int + 1):
            fake = self.G(z1 * alpha + z2 * (1.0 - alpha))
            alpha += alpha
            images.append(fake.view(3, 32, 32).data.cpu())
        utils.save_image(utils.make_grid(images, nrow=number_int), f"walk_{number}.png")

    def sample_many(self, count=5000):
        images = []
        for i in range(count):
            images.append(self.G(torch.randn(1, 100, device="cuda")).view(3, 32, 32).cpu())
        return images


if __name__ == "__main__":
    gan = GAN()
    gan.generate_latent_walk(0)
    gan.sample_many()
