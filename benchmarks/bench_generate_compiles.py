"""Programs compiled by Hugging Face generate() on tpu, from an empty cache, for 8 and for 64 new
tokens, in strict and fused mode: what the growing-shape buckets (csrc/exec/bucketing.h) save.

    .venv/bin/python benchmarks/bench_generate_compiles.py [--new-tokens 8 64] [--only beam]

Cases, on a 2-layer GPT-2 config with the default DynamicCache: greedy decoding of one prompt, a
batch of two with an all-ones attention mask, beam search (2 beams), and a batch whose first
prompt is left-padded (its 4-D attention mask is rebuilt at the true length every step). Each
count is compiles plus disk-cache loads (the disk cache is a fresh directory), and each run's
tokens are checked against the CPU's.
"""

from __future__ import annotations

import argparse
import os
import tempfile

os.environ["TORCH_TPU_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_generate_")

import torch  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

import torch_tpu  # noqa: E402
import torch_tpu.metrics  # noqa: E402

VOCAB, PAD, EOS = 100, 0, 99


def model() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=128, bos_token_id=EOS, eos_token_id=EOS
    )
    return GPT2LMHeadModel(config).eval()


def case_inputs(name: str):
    generator = torch.Generator().manual_seed(6)
    batch = 1 if name in ("greedy", "beam") else 2
    ids = torch.randint(1, EOS, (batch, 8), generator=generator)
    options = {"num_beams": 2} if name == "beam" else {}
    if name == "masked batch":
        options["attention_mask"] = torch.ones_like(ids)
    if name == "left-padded batch":
        mask = torch.ones_like(ids)
        mask[0, :3] = 0
        ids[0, :3] = PAD
        options["attention_mask"] = mask
    return ids, options


def programs(device_model, ids, options, new_tokens: int, mode: str, expected) -> int:
    torch_tpu._C._clear_memory_cache()
    torch_tpu.metrics.reset()
    device_options = {k: v.to("tpu") if isinstance(v, torch.Tensor) else v for k, v in options.items()}
    with torch_tpu.execution_mode(mode):
        out = device_model.generate(
            ids.to("tpu"),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            pad_token_id=PAD,
            **device_options,
        )
    if not torch.equal(out.cpu(), expected[:, : ids.shape[1] + new_tokens]):
        raise AssertionError(f"tokens differ from the CPU's ({mode}, {new_tokens} new tokens)")
    snapshot = torch_tpu.metrics.snapshot()
    return snapshot["compiles"] + snapshot["disk_cache_hits"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--new-tokens", type=int, nargs=2, default=[8, 64])
    parser.add_argument("--only", default="", help="run the cases whose name contains this text")
    args = parser.parse_args()
    short, long = args.new_tokens
    cpu = model()
    device_model = type(cpu)(cpu.config).eval()
    device_model.load_state_dict(cpu.state_dict())
    device_model.to("tpu")
    print(f"programs compiled from an empty cache; GPT-2 (2 layers), {short} and {long} new tokens")
    print(f"{'case':20} {'mode':15} {short:>6} {long:>6} {'ratio':>6}")
    for name in ("greedy", "masked batch", "beam", "left-padded batch"):
        if args.only.lower() not in name:
            continue
        ids, options = case_inputs(name)
        expected = cpu.generate(
            ids, max_new_tokens=long, min_new_tokens=long, do_sample=False, pad_token_id=PAD, **options
        )
        for mode in ("strict", "defer_and_fuse"):
            few = programs(device_model, ids, options, short, mode, expected)
            many = programs(device_model, ids, options, long, mode, expected)
            print(f"{name:20} {mode:15} {few:6d} {many:6d} {many / few:6.2f}", flush=True)


if __name__ == "__main__":
    main()
