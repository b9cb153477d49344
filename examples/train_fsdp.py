"""Sharded training of the tiny language model on tpu with FSDP2 (fully_shard), bf16 compute,
and a distributed checkpoint.

    .venv/bin/torchrun --standalone --nproc_per_node=2 examples/train_fsdp.py

Each transformer layer and the root are sharded across the ranks: every rank holds 1/world of
each parameter and its optimizer state, gathers a layer's weights just before using them, and
reduce-scatters the gradients. At the end the model and optimizer are saved with
torch.distributed.checkpoint and loaded back into a fresh sharded model.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from tiny_lm import CharacterCodec, LanguageModel, generated_corpus
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

import torch_tpu  # noqa: F401  (torch also imports it through its device-backend autoload)


def sharded_model(vocab: int, device: torch.device) -> LanguageModel:
    torch.manual_seed(0)
    model = LanguageModel(vocab, width=64, layers=2, context=32).to(device)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.layers.layers:
        fully_shard(layer, mp_policy=policy)
    return fully_shard(model, mp_policy=policy)


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
    vocab = len(codec.alphabet)
    model = sharded_model(vocab, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    shard = model.head.weight
    if rank == 0:
        print(f"head.weight: global {tuple(shard.shape)}, this rank holds {tuple(shard.to_local().shape)}")

    generator = torch.Generator().manual_seed(rank)
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        starts = torch.randint(0, len(tokens) - 33, (args.batch,), generator=generator)
        batch = torch.stack([tokens[s : s + 33] for s in starts.tolist()]).to(device)
        optimizer.zero_grad()
        loss = model.loss(batch)
        loss.backward()
        optimizer.step()
        if step % 10 == 0 or step == 1:
            mean_loss = loss.detach().float().clone()
            dist.all_reduce(mean_loss, op=dist.ReduceOp.AVG)
            if rank == 0:
                print(f"step {step:3d}  loss {mean_loss.item():.3f}  (mean over {world} ranks)", flush=True)
    torch.tpu.synchronize()
    elapsed = time.perf_counter() - start

    # Save the sharded state, then load it into a fresh model: every shard must come back.
    directory = [tempfile.mkdtemp(prefix="tpu_fsdp_ckpt_") if rank == 0 else None]
    dist.broadcast_object_list(directory, src=0)
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=directory[0])
    restored = sharded_model(vocab, device)
    restored_optimizer = torch.optim.AdamW(restored.parameters(), lr=3e-3)
    state = dict(zip(("model", "optim"), get_state_dict(restored, restored_optimizer), strict=True))
    dcp.load(state, checkpoint_id=directory[0])
    set_state_dict(restored, restored_optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    same = all(
        torch.equal(a.to_local(), b.to_local()) for a, b in zip(model.parameters(), restored.parameters(), strict=True)
    )
    same = torch.tensor(float(same), device=device)
    dist.all_reduce(same, op=dist.ReduceOp.MIN)
    if rank == 0:
        print(
            f"{args.steps} steps on {world} x {torch.tpu.get_device_name()} in {elapsed:.1f} s; "
            f"checkpoint in {directory[0]} restored exactly: {bool(same.item())}"
        )
    dist.destroy_process_group()
    if not same.item():
        raise SystemExit("the restored model differs from the saved one")


if __name__ == "__main__":
    main()
