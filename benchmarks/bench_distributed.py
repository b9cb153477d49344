"""The cost of distributed training on tpu, measured side by side in one run.

    .venv/bin/python benchmarks/bench_distributed.py [--worlds 2 4] [--repeats 10]

1. all_reduce bus bandwidth (2 (n-1)/n x bytes / time) for 1 MB and 64 MB f32 tensors at each world
   size: tpu tensors through the tpu backend's host-staged transport, against CPU tensors through
   Gloo in the same processes. The ratio is the cost of staging through the host.
2. A DDP training step of the tiny LM at world 2 against the same per-rank step in one process.

Workers are launched as torchrun would (RANK, WORLD_SIZE, LOCAL_RANK, ... on loopback); the
medians are printed as a table. On a machine with fewer cores than ranks, the ranks share cores,
which the DDP ratio includes.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys

import torch
from _timing import median_seconds

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES_MB = (1, 64)


def launch(world: int, mode: str, repeats: int) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(world):
        env = dict(
            os.environ,
            RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_RANK=str(rank),
            LOCAL_WORLD_SIZE=str(world),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
        )
        env.pop("TORCH_TPU_NUM_DEVICES", None)
        procs.append(
            subprocess.Popen(
                [sys.executable, __file__, "--worker", mode, "--repeats", str(repeats)],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    outputs = [p.communicate(timeout=1800)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"a {mode} worker failed at world {world}")
    return json.loads(outputs[0].strip().splitlines()[-1])


def worker_all_reduce(repeats: int) -> dict:
    import torch.distributed as dist

    import torch_tpu  # noqa: F401

    dist.init_process_group()
    world = dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    tpu = torch.device("tpu", torch.tpu.current_device())
    result = {}
    for size in SIZES_MB:
        elements = size * 2**20 // 4
        on_tpu = torch.ones(elements, device=tpu)
        on_cpu = torch.ones(elements)
        t_tpu = median_seconds(lambda t=on_tpu: dist.all_reduce(t), torch.tpu.synchronize, repeats)
        t_cpu = median_seconds(lambda t=on_cpu: dist.all_reduce(t, group=gloo), lambda: None, repeats)
        factor = 2 * (world - 1) / world * elements * 4 / 1e9
        result[size] = {
            "tpu_GBps": factor / t_tpu,
            "gloo_GBps": factor / t_cpu,
            "tpu_ms": t_tpu * 1e3,
            "gloo_ms": t_cpu * 1e3,
        }
    dist.destroy_process_group()
    return result


def lm_step_setup(device):
    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    from tiny_lm import LanguageModel

    torch.manual_seed(0)
    model = LanguageModel(vocab=64, width=128, layers=2, context=64).to(device)
    batch = torch.randint(0, 64, (8, 65)).to(device)
    return model, batch


def worker_ddp(repeats: int) -> dict:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    import torch_tpu  # noqa: F401

    dist.init_process_group()
    device = torch.device("tpu", torch.tpu.current_device())
    model, batch = lm_step_setup(device)
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=1e-3)

    def step():
        optimizer.zero_grad()
        logits = ddp(batch[:, :-1])
        torch.nn.functional.cross_entropy(logits.reshape(-1, 64), batch[:, 1:].reshape(-1)).backward()
        optimizer.step()

    seconds = median_seconds(step, torch.tpu.synchronize, repeats)
    dist.destroy_process_group()
    return {"ddp_ms": seconds * 1e3}


def single_process_step(repeats: int) -> float:
    import torch_tpu  # noqa: F401

    device = torch.device("tpu")
    model, batch = lm_step_setup(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        optimizer.zero_grad()
        model.loss(batch).backward()
        optimizer.step()

    return median_seconds(step, torch.tpu.synchronize, repeats) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--worker", choices=["all_reduce", "ddp"])
    args = parser.parse_args()
    if args.worker:
        result = worker_all_reduce(args.repeats) if args.worker == "all_reduce" else worker_ddp(args.repeats)
        if os.environ["RANK"] == "0":
            print(json.dumps(result))
        return

    print(f"all_reduce bus bandwidth (GB/s, medians of {args.repeats}); tpu = host-staged tpu backend")
    print(f"{'world':>5} {'size':>6} {'tpu':>8} {'gloo cpu':>9} {'tpu/gloo':>9} {'tpu ms':>8} {'gloo ms':>8}")
    for world in args.worlds:
        for size, row in launch(world, "all_reduce", args.repeats).items():
            ratio = row["tpu_GBps"] / row["gloo_GBps"]
            print(
                f"{world:>5} {size + ' MB':>6} {row['tpu_GBps']:8.3f} {row['gloo_GBps']:9.3f} {ratio:9.2f} "
                f"{row['tpu_ms']:8.2f} {row['gloo_ms']:8.2f}"
            )
    single = single_process_step(args.repeats)
    ddp = launch(2, "ddp", args.repeats)["ddp_ms"]
    print(
        f"\nLM training step (batch 8 per rank): one process {single:.1f} ms, DDP world 2 {ddp:.1f} ms, "
        f"ratio {ddp / single:.2f}"
    )


if __name__ == "__main__":
    main()
