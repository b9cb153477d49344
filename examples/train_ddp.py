"""Data-parallel training of the tiny language model on tpu with DistributedDataParallel.

    .venv/bin/torchrun --standalone --nproc_per_node=2 examples/train_ddp.py

One process per device: torchrun starts them, and each uses tpu:<local rank>. The script is
what it would be on CUDA with "cuda" replaced by "tpu": init_process_group() needs no backend
argument, because importing torch_tpu registers the "tpu" backend for the tpu device.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
from tiny_lm import CharacterCodec, LanguageModel, generated_corpus
from torch.nn.parallel import DistributedDataParallel

import torch_tpu  # noqa: F401  (torch also imports it through its device-backend autoload)


def batches(tokens: torch.Tensor, batch: int, context: int, seed: int):
    """Endless random windows of the corpus; every rank draws its own."""
    generator = torch.Generator().manual_seed(seed)
    while True:
        starts = torch.randint(0, len(tokens) - context - 1, (batch,), generator=generator)
        yield torch.stack([tokens[s : s + context + 1] for s in starts.tolist()])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=8, help="per rank")
    args = parser.parse_args()

    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("tpu", int(os.environ.get("LOCAL_RANK", 0)))
    torch.tpu.set_device(device)

    text = generated_corpus()
    codec = CharacterCodec(text)
    tokens = codec.encode(text)
    torch.manual_seed(0)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    model = DistributedDataParallel(LanguageModel(len(codec.alphabet), width=64, layers=2, context=32).to(device))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data = batches(tokens, args.batch, 32, seed=rank)

    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        batch = next(data).to(device)
        optimizer.zero_grad()
        # Through the DDP wrapper's forward, so the gradients are synchronized.
        logits = model(batch[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        if step % 10 == 0 or step == 1:
            mean_loss = loss.detach().clone()
            dist.all_reduce(mean_loss, op=dist.ReduceOp.AVG)
            if rank == 0:
                print(f"step {step:3d}  loss {mean_loss.item():.3f}  (mean over {world} ranks)", flush=True)
    torch.tpu.synchronize()
    elapsed = time.perf_counter() - start

    # DDP keeps the replicas identical: check it, as a user would after moving from CUDA.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    replicas = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(replicas, flat)
    identical = all(torch.equal(replicas[0], r) for r in replicas[1:])
    if rank == 0:
        print(
            f"{args.steps} steps on {world} x {torch.tpu.get_device_name()} in {elapsed:.1f} s; "
            f"replicas identical: {identical}"
        )
    dist.destroy_process_group()
    if not identical:
        raise SystemExit("the DDP replicas diverged")


if __name__ == "__main__":
    main()
