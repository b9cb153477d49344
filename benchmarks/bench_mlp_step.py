"""The MLP training step of TorchTPU's published figures (256-512-256-10, GELU, LayerNorm, AdamW,
batch 64), written against TorchTPU 0.2.0's API, which torch_tpu also provides, so the same file
runs on either package for a side-by-side comparison on the same machine and plugin:

    .venv/bin/python benchmarks/bench_mlp_step.py
    TPU_LIBRARY_PATH=<xla_cpu_pjrt.so> <venv with torch-tpu 0.2.0>/bin/python benchmarks/bench_mlp_step.py

Prints the median step time (loss read back each step) in each eager mode, and for torch_tpu where
a fused step's time goes: recording, the host side of the launch, and the wait for the program;
then each of the step's three programs (forward, backward, optimizer) recorded and run alone, beside
the same phase in native CPU torch, which shows whether the host or the device bounds the step.
"""

from __future__ import annotations

import statistics
import time

import torch

import torch_tpu

if hasattr(torch_tpu, "_loader"):  # Google's TorchTPU: the device starts explicitly
    torch_tpu._loader._init_device("tpu")


def mlp() -> torch.nn.Module:
    """The model of TorchTPU's MLP figures (bench_modes.py uses it too)."""
    return torch.nn.Sequential(
        torch.nn.Linear(256, 512),
        torch.nn.GELU(),
        torch.nn.LayerNorm(512),
        torch.nn.Linear(512, 256),
        torch.nn.GELU(),
        torch.nn.Linear(256, 10),
    )


def setup(device: str):
    """The model, its AdamW optimizer and one batch on `device`, from the same seed each time."""
    torch.manual_seed(0)
    model = mlp().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, optimizer, torch.randn(64, 256).to(device), torch.randint(0, 10, (64,)).to(device)


def main(steps: int = 30, warmup: int = 5) -> None:
    model, optimizer, x, y = setup("tpu")

    def record():
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    def step():
        return record().item()

    package = "TorchTPU" if hasattr(torch_tpu, "_loader") else "torch_tpu (ours)"
    for mode in ("DEFER_NEVER", "DEFER_AND_FUSE"):
        torch.tpu.set_eager_mode(getattr(torch.tpu.EagerMode, mode))
        for _ in range(warmup):
            step()
        torch.accelerator.synchronize()
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            step()
            torch.accelerator.synchronize()
            times.append(time.perf_counter() - start)
        print(f"{package:18} {mode:15} median {statistics.median(times) * 1e3:.2f} ms")
    if hasattr(torch_tpu, "_C") and hasattr(torch_tpu._C, "_launch_pending"):
        record, launch, wait = fused_step_phases(record, steps)
        print(
            f"{package:18} {'fused phases':15} record {record:.2f} ms, launch {launch:.2f} ms (host), "
            f"then waiting for the program {wait:.2f} ms"
        )
        print(f"{'':18} {'phases alone':15} {isolated_phases(steps)}")
    torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_NEVER)


def isolated_phases(steps):
    """Fused mode, ours only: each phase of the step recorded, then its program run with nothing
    else in flight (medians, ms), and the same phase in native CPU torch. A fused step overlaps
    one phase's program with the next phase's recording, so its time is about the larger of the
    recording and program sums."""

    def phases(device):
        model, optimizer, x, y = setup(device)
        wait = torch.accelerator.synchronize if device != "cpu" else lambda: None
        losses = []

        def forward():
            optimizer.zero_grad()
            losses[:] = [torch.nn.functional.cross_entropy(model(x), y)]

        work = {"forward": forward, "backward": lambda: losses[0].backward(), "optimizer": optimizer.step}
        times = {(name, part): [] for name in work for part in ("record", "program")}
        for step in range(steps + 5):
            for name, run in work.items():
                wait()
                start = time.perf_counter()
                run()
                recorded = time.perf_counter()
                if device != "cpu":
                    torch_tpu._C._launch_pending()
                    wait()
                if step >= 5:
                    times[name, "record"].append(recorded - start)
                    times[name, "program"].append(time.perf_counter() - recorded)
        return {key: statistics.median(v) * 1e3 for key, v in times.items()}

    torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE)
    tpu, cpu = phases("tpu"), phases("cpu")
    return "; ".join(
        f"{name}: record {tpu[name, 'record']:.2f} + program {tpu[name, 'program']:.2f} "
        f"(CPU torch {cpu[name, 'record']:.2f})"
        for name in ("forward", "backward", "optimizer")
    )


def fused_step_phases(record_step, steps):
    """Where a fused step's time goes (ours only): recording its ops, the host side of cutting and
    launching its program, and waiting for the program to run."""
    record, launch, wait = [], [], []
    for _ in range(steps):
        start = time.perf_counter()
        loss = record_step()
        recorded = time.perf_counter()
        torch_tpu._C._launch_pending()
        launched = time.perf_counter()
        loss.item()
        torch.accelerator.synchronize()
        done = time.perf_counter()
        record.append(recorded - start)
        launch.append(launched - recorded)
        wait.append(done - launched)
    return (statistics.median(times) * 1e3 for times in (record, launch, wait))


if __name__ == "__main__":
    main()
