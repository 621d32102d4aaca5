import torch
from torchvision import datasets, transforms

train_set = datasets.CIFAR10("data", train=True, download=True, transform=transforms.ToTensor())
test_set = datasets.CIFAR10("data", train=False, download=True, transform=transforms.ToTensor())
train_loader = torch.utils.data.DataLoader(train_set, batch_size=128, shuffle=True, num_workers=4, pin_memory=True)
test_loader = torch.utils.data.DataLoader(test_set, batch_size=256, num_workers=4, pin_memory=True)
