"""A nanoGPT-shaped character/token LM: batches cut from a token array in host memory each iteration,
copied to the GPU, the loss read every iteration for logging."""

import math
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

block_size = 256
batch_size = 64
n_layer, n_head, n_embd = 6, 6, 384
vocab_size = 8192
max_iters = 400
learning_rate = 6e-4
device = "cuda" if torch.cuda.is_available() else "cpu"


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.attn(self.ln_1(x)).split(n_embd, dim=2)
        q, k, v = (z.view(b, t, n_head, c // n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList(Block() for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


data = np.random.default_rng(0).integers(0, vocab_size, 20_000_000, dtype=np.uint16)


def get_batch():
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy(data[i:i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + block_size].astype(np.int64)) for i in ix])
    x, y = x.to(device), y.to(device)
    return x, y


model = GPT().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, 0.95), weight_decay=0.1)
t0 = time.time()
for it in range(max_iters):
    lr = learning_rate * 0.5 * (1 + math.cos(math.pi * it / max_iters))
    for group in optimizer.param_groups:
        group["lr"] = lr
    X, Y = get_batch()
    loss = model(X, Y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    lossf = loss.item()
    if it % 20 == 0:
        print(f"iter {it}: loss {lossf:.4f}, {(time.time() - t0) * 1000 / (it + 1):.1f} ms/iter", flush=True)
