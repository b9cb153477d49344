"""A small GPT-style language model (pre-norm transformer, causal attention) and a generated
character corpus, shared by the demo and the training benchmark."""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from torch import nn


class LanguageModel(nn.Module):
    def __init__(self, vocab: int, width: int = 128, heads: int = 4, layers: int = 2, context: int = 64):
        super().__init__()
        self.vocab, self.context = vocab, context
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.randn(context, width) * 0.02)
        layer = nn.TransformerEncoderLayer(
            width, heads, 4 * width, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.layers = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        length = tokens.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(length, device=tokens.device)
        x = self.embed(tokens) + self.position[:length]
        return self.head(self.layers(x, mask=mask, is_causal=True))

    def loss(self, tokens):
        logits = self(tokens[:, :-1])
        return F.cross_entropy(logits.reshape(-1, self.vocab), tokens[:, 1:].reshape(-1))

    @torch.no_grad()
    def generate(self, prompt, new_tokens: int):
        """Greedy continuation of a prompt of exactly `context` tokens. The window keeps its
        length, so every step reuses the same compiled programs."""
        assert prompt.shape[1] == self.context, "the prompt must fill the context"
        tokens = prompt
        for _ in range(new_tokens):
            logits = self(tokens[:, -self.context :])[:, -1]
            tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)
        return tokens[:, self.context :]


def generated_corpus(sentences: int = 2000, seed: int = 0) -> str:
    """Sentences from a tiny grammar: enough structure for a small model to learn in a minute."""
    rng = random.Random(seed)
    subjects = ["the cat", "a dog", "the old man", "my sister", "the robot", "a small bird"]
    verbs = ["sees", "likes", "follows", "paints", "finds", "remembers"]
    objects = ["the river", "a red ball", "the moon", "an apple", "the garden", "a quiet song"]
    endings = [".", " today.", " again.", " at night."]
    return " ".join(
        f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}{rng.choice(endings)}"
        for _ in range(sentences)
    )


class CharacterCodec:
    def __init__(self, text: str):
        self.alphabet = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.alphabet)}

    def encode(self, text: str) -> torch.Tensor:
        return torch.tensor([self.index[c] for c in text], dtype=torch.long)

    def decode(self, tokens) -> str:
        return "".join(self.alphabet[int(t)] for t in tokens)
