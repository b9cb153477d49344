"""Small real models train on tpu: the loss curve matches the CPU's and falls (HIGHEST precision,
torch's default float32 matmul precision, so the comparison can be tight)."""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

STEPS = 20


class Block(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attention.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.norm2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 64, width: int = 32, heads: int = 4, layers: int = 2, context: int = 16):
        super().__init__()
        self.token = nn.Embedding(vocab, width)
        self.position = nn.Embedding(context, width)
        self.blocks = nn.Sequential(*[Block(width, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.token(tokens) + self.position(positions)
        return self.head(self.norm(self.blocks(x)))


def train(model, batches, device, make_optimizer, loss_fn, clip=None):
    model = copy.deepcopy(model).to(device)
    optimizer = make_optimizer(model.parameters())
    losses = []
    for inputs, targets in batches:
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        losses.append(loss.item())
    return losses, model


def check_training(model, batches, make_optimizer, loss_fn, rtol, clip=None, compare_parameters=True):
    cpu_losses, cpu_model = train(model, batches, "cpu", make_optimizer, loss_fn, clip)
    tpu_losses, tpu_model = train(model, batches, "tpu", make_optimizer, loss_fn, clip)
    assert all(math.isfinite(v) for v in tpu_losses)
    for step, (a, b) in enumerate(zip(tpu_losses, cpu_losses, strict=True)):
        assert abs(a - b) <= rtol * abs(b) + 1e-5, f"step {step}: tpu {a} vs cpu {b}"
    assert sum(tpu_losses[-3:]) < sum(tpu_losses[:3]), f"loss did not fall: {tpu_losses}"
    if not compare_parameters:
        return
    for (name, p_tpu), p_cpu in zip(tpu_model.named_parameters(), cpu_model.parameters(), strict=True):
        assert p_tpu.device.type == "tpu"
        torch.testing.assert_close(p_tpu.detach().cpu(), p_cpu.detach(), rtol=rtol, atol=1e-4, msg=name)
    for (name, b_tpu), b_cpu in zip(tpu_model.named_buffers(), cpu_model.buffers(), strict=True):
        torch.testing.assert_close(b_tpu.cpu(), b_cpu, rtol=rtol, atol=1e-4, msg=name)  # batch-norm stats


def test_mlp_classifier_trains_like_the_cpu():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 5))
    centers = torch.randn(5, 20) * 2
    batches = []
    for _ in range(STEPS):
        labels = torch.randint(0, 5, (32,))
        batches.append((centers[labels] + torch.randn(32, 20), labels))
    check_training(model, batches, lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), F.cross_entropy, rtol=1e-4)


def test_gpt_style_transformer_trains_like_the_cpu():
    torch.manual_seed(0)
    model = TinyGPT()
    # A learnable sequence task: each next token is the previous one plus one (mod vocab).
    batches = []
    for _ in range(STEPS):
        start = torch.randint(0, 64, (8, 1))
        sequence = (start + torch.arange(17)) % 64
        batches.append((sequence[:, :-1], sequence[:, 1:]))

    def loss_fn(logits, targets):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    check_training(
        model,
        batches,
        lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.01),
        loss_fn,
        rtol=2e-3,
        clip=1.0,
        # Not the parameters: attention is invariant to the key bias, so its true gradient is 0 and
        # Adam scales the rounding noise there to steps of size lr, differently on each device.
        compare_parameters=False,
    )


def test_small_cnn_with_batchnorm_and_pooling_trains_like_the_cpu():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 4),
    )
    # Four classes told apart by which image quadrant is bright.
    batches = []
    for _ in range(STEPS):
        labels = torch.randint(0, 4, (16,))
        images = torch.randn(16, 3, 12, 12) * 0.5
        for i, label in enumerate(labels.tolist()):
            row, col = divmod(label, 2)
            images[i, :, row * 6 : row * 6 + 6, col * 6 : col * 6 + 6] += 1.5
        batches.append((images, labels))
    check_training(model, batches, lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), F.cross_entropy, rtol=1e-3)
