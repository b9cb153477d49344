"""Execution modes side by side in one run: native CPU torch, tpu strict and tpu fused eager
(DeferAndFuse), as medians, on five workloads, plus the recording and flush costs of fused mode.

    .venv/bin/python benchmarks/bench_modes.py [--repeats 10] [--rounds 3] [--skip-generate] [--only generate]
        [--skip-native-compiled] [--fused-optimizer]

Workloads: a training step of a 2-layer GPT-style LM (width 128, context 64, batch 8, AdamW,
clipping); the MLP step TorchTPU's figures come from (256-512-256-10, GELU, LayerNorm, AdamW,
batch 64); a Hugging Face GPT-2 training step (2 layers, width 128, batch 8 x 64, dropout 0.1);
a chain of 150 elementwise ops on a 2048x2048 tensor; greedy generate() of 64 tokens on a
2-layer GPT-2 config. For each: time per step, programs run per step, programs compiled
after warm-up, PyTorch meta functions run per step, and the peak of torch.tpu.max_memory_allocated during the timed steps. The modes
take turns for --rounds rounds; times and ratios are medians over the rounds. Each round times
--repeats steps of a workload (the MLP's 20x as many, the chain's half as many).
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import resource
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TORCH_TPU_CACHE_DIR", tempfile.mkdtemp(prefix="bench_modes_"))

import torch  # noqa: E402
from torch._dynamo.backends.common import aot_autograd  # noqa: E402

import torch_tpu  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from tiny_lm import LanguageModel  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import median_seconds, sample_seconds  # noqa: E402
from bench_mlp_step import mlp  # noqa: E402

# --fused-optimizer: the training workloads' AdamW is fused=True (the default of Hugging Face's
# Trainer) in every mode, rather than foreach.
FUSED_OPTIMIZER = False


# "compiled" is torch.compile: Inductor on the CPU, the tpu backend on tpu.
def optimizer_flags(device, compiled):
    """Compiled on tpu, the optimizer keeps its step counts on the device (capturable), so its
    graph runs from a captured plan; CPU tensors read inside a graph make it record every call.
    The CPU does not support capturable."""
    flags = {"capturable": True} if compiled and device != "cpu" else {}
    return {**flags, "fused": True} if FUSED_OPTIMIZER else flags


MODES = ("cpu", "cpu compiled", "strict", "defer_and_fuse", "compiled")


def rotating_training_step(model, batches, loss_of, clip=False):
    """A training workload's builder: AdamW steps over `batches` in turn, `loss_of(model, batch)`
    giving the loss (and gradient clipping when `clip`)."""

    def build(device, compiled):
        m = copy.deepcopy(model).to(device)
        optimizer = torch.optim.AdamW(m.parameters(), lr=1e-3, **optimizer_flags(device, compiled))
        inputs = [b.to(device) for b in batches]
        state = {"i": 0}

        def train(batch):
            optimizer.zero_grad()
            loss = loss_of(m, batch)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            optimizer.step()
            return loss

        train = torch.compile(train) if compiled else train

        def step():
            batch = inputs[state["i"] % len(inputs)]
            state["i"] += 1
            return train(batch).item()

        return step

    return build


def train_lm():
    torch.manual_seed(0)
    model = LanguageModel(256, context=64)
    batches = [torch.randint(0, 256, (8, 65)) for _ in range(4)]
    return rotating_training_step(model, batches, lambda m, tokens: m.loss(tokens), clip=True)


def mlp_step():
    torch.manual_seed(0)
    model = mlp()
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))

    def build(device, compiled):
        m = copy.deepcopy(model).to(device)
        optimizer = torch.optim.AdamW(m.parameters(), lr=1e-3, **optimizer_flags(device, compiled))
        xd, yd = x.to(device), y.to(device)

        def train():
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(xd), yd)
            loss.backward()
            optimizer.step()
            return loss

        train = torch.compile(train) if compiled else train
        return lambda: train().item()

    return build


def elementwise_chain():
    x = torch.rand(2048, 2048)

    def build(device, compiled):
        xd = x.to(device)

        def chain(y):
            for i in range(75):  # 150 ops
                y = y * 0.999 if i % 2 else y + 0.001
                y = torch.sin(y) if i % 3 == 0 else y - 0.0005
            return y.sum()

        chain = torch.compile(chain) if compiled else chain
        return lambda: chain(xd).item()

    return build


def generate_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=512, n_positions=256)
    model = GPT2LMHeadModel(config).eval()
    prompt = torch.randint(0, 512, (1, 8))

    def build(device, compiled):
        del compiled  # generate() is measured in eager modes only
        m = copy.deepcopy(model).to(device)
        ids = prompt.to(device)

        def step():
            with torch.no_grad():
                out = m.generate(ids, max_new_tokens=64, min_new_tokens=64, do_sample=False, pad_token_id=0)
            return out.cpu()

        return step

    return build


def train_gpt2():
    """A Hugging Face GPT-2 training step with the config's default dropout (0.1): random ops in
    every layer, so a compiled graph draws new keys on each call."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=512, n_positions=128)
    model = GPT2LMHeadModel(config).train()
    batches = [torch.randint(0, 512, (8, 64)) for _ in range(4)]
    return rotating_training_step(model, batches, lambda m, ids: m(input_ids=ids, labels=ids).loss)


def measure(build, mode, repeats, warmup):
    device = "cpu" if mode.startswith("cpu") else "tpu"
    compiled = mode.endswith("compiled")
    torch._dynamo.reset()
    # The previous measurement's model, optimizer and compiled graphs sit in reference cycles
    # until a collection: freed now, so that neither this measurement's peak memory (which counted
    # their tpu buffers) nor its time (a heap twice the size made the MLP step up to 2x slower in
    # both eager modes) pays for them.
    gc.collect()
    # torch.compile runs in the default mode, fused eager: each graph is a program of its own, and
    # the eager work between graphs is fused.
    with torch_tpu.execution_mode("strict" if mode == "strict" else "defer_and_fuse"):
        step = build(device, compiled)
        start = time.perf_counter()
        results = [step()]
        first = time.perf_counter() - start
        results += [step() for _ in range(warmup - 1)]
        torch.tpu.synchronize()
        torch_tpu.metrics.reset()
        torch.tpu.reset_peak_memory_stats()
        times = []
        cpu, faults = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(repeats):
            start = time.perf_counter()
            results.append(step())
            times.append(time.perf_counter() - start)
        torch.tpu.synchronize()
        cpu, faults = time.process_time() - cpu, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        figures = torch_tpu.metrics.snapshot()
    return {
        "first": first,
        "time": statistics.median(times),
        "cpu_per_step": cpu / repeats,
        "faults_per_step": faults / repeats,
        "programs": figures["executions"] / repeats,
        "compiles": figures["compiles"],
        # PyTorch meta functions run per step: a cache miss costs ~100 us (aten/meta_cache.h).
        "meta_runs": figures["meta_runs"] / repeats,
        "peak": torch.tpu.max_memory_allocated() if device == "tpu" else 0,
        "result": results[-1],
    }


def recording_costs(n_ops=1000, reps=15):
    """Per-op cost of recording in fused mode above native CPU dispatch of the same ops on 0-d
    tensors, and the host cost of a flush (cut, cache hit, launch; not the device's run) as
    intercept + slope over the op count. Native and recorded chains alternate, so that a noisy
    machine slows both alike; each figure is a median."""
    cpu = torch.ones(())
    tpu = torch.ones((), device="tpu")

    def chain(x, n):
        for _ in range(n):
            x = x + 1
        return x

    native_samples, record_samples = [], []
    flush_times = {}
    with torch_tpu.execution_mode("defer_and_fuse"):
        for n in (10, 100, n_ops):
            chain(tpu, n).cpu()  # compile once
            flush_times[n] = []
            for _ in range(reps):
                if n == n_ops:
                    start = time.perf_counter()
                    chain(cpu, n_ops)
                    native_samples.append((time.perf_counter() - start) / n_ops)
                start = time.perf_counter()
                y = chain(tpu, n)
                recorded = time.perf_counter()
                torch_tpu._C._launch_pending()
                done = time.perf_counter()
                torch.tpu.synchronize()
                if n == n_ops:
                    record_samples.append((recorded - start) / n)
                flush_times[n].append(done - recorded)
                del y
    native = statistics.median(native_samples)
    record = statistics.median(record_samples)
    flush = {n: statistics.median(v) for n, v in flush_times.items()}
    slope = (flush[n_ops] - flush[100]) / (n_ops - 100)
    intercept = flush[10] - 10 * slope
    return record - native, native, intercept, slope


def host_read_cost(reads=2000):
    """item() of a 0-d value that is already computed, with the device idle and while a program
    runs (a training loop's loss read during its optimizer step; on a small machine the program's
    threads also take the cores from the read). Beside it, item() of a CPU tensor. Medians."""
    cpu = torch.ones(())
    ready = torch.ones((), device="tpu") * 3
    ready.item()
    busy = torch.randn(512, 512, device="tpu")

    def no_wait():
        pass

    native, idle = (median_seconds(tensor.item, no_wait, reads) for tensor in (cpu, ready))
    during = []
    with torch_tpu.execution_mode("strict"):
        for _ in range(30):
            product = busy @ busy @ busy @ busy  # runs for about a millisecond
            during += sample_seconds(ready.item, no_wait, 1, warmup=0)
            torch.tpu.synchronize()
            del product
    return native, idle, statistics.median(during)


def forward_flush_cost(reps=30):
    """The flush of a real program: the 2-layer LM's forward and loss (no grad), recorded in fused
    mode, then cut, found in the cache and launched. Returns its op count and the median host time
    of the flush; the count is read once, from the profiler's name for the program. Beside the wall
    time: the calling thread's CPU time (on a small machine, the plugin's threads starting the
    program take the core from the flush) and the part spent in the plugin's execute call."""
    torch.manual_seed(0)
    model = LanguageModel(256, context=64).to("tpu")
    tokens = torch.randint(0, 256, (8, 65), device="tpu")
    samples, thread_samples, launches = [], [], []
    with torch.no_grad(), torch_tpu.execution_mode("defer_and_fuse"):
        for _ in range(reps):
            loss = model.loss(tokens)
            torch_tpu.metrics.reset()
            start, thread_start = time.perf_counter(), time.thread_time()
            torch_tpu._C._launch_pending()
            samples.append(time.perf_counter() - start)
            thread_samples.append(time.thread_time() - thread_start)
            launches.append(torch_tpu.metrics.snapshot()["execute_time_s"])
            torch.tpu.synchronize()
            del loss
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.PrivateUse1]) as profile:
            loss = model.loss(tokens)  # noqa: F841 - kept alive: a pending value nobody holds is not run
            torch_tpu._C._launch_pending()
            torch.tpu.synchronize()
    names = [event.name for event in profile.events() if event.name.startswith("program ")]
    ops = int(names[0].split("(")[1].split()[0])
    return ops, statistics.median(samples[3:]), statistics.median(thread_samples[3:]), statistics.median(launches[3:])


def compiled_call_overhead(arg_counts=(1, 100), calls=200, one_result=False):
    """Host time of one call of a compiled graph over 0-d arguments: Dynamo's guards, aot_autograd's
    wrappers and this backend's launch from its plan, and the release of the previous call's
    outputs. The graph adds 1 to each argument (a result per argument), or with `one_result` sums
    them (one result): each result is a buffer the plugin allocates and frees, and a tensor made
    for Python, so the two shapes separate what an argument costs from what a result costs.
    Beside it, two parts that are not this backend's: the same call with an aot_autograd compiler
    that returns ready outputs (Dynamo and aot_autograd alone), and the plugin's execute call
    (metrics' execute_time_s per launch)."""

    def median_call(fn, inputs):
        for _ in range(3):
            fn(*inputs)
        torch.tpu.synchronize()
        torch_tpu.metrics.reset()
        samples = []
        for _ in range(calls):
            start = time.perf_counter()
            fn(*inputs)
            samples.append(time.perf_counter() - start)
        torch.tpu.synchronize()
        figures = torch_tpu.metrics.snapshot()
        launch = figures["execute_time_s"] / figures["executions"] if figures["executions"] else 0.0
        return statistics.median(samples), launch

    def add_one(*xs):
        return [x + 1 for x in xs]

    def sum_all(*xs):
        return sum(xs)

    def returning(ready):
        """An aot_autograd compiler whose graph returns `ready` without running anything."""

        def compiler(graph_module, example_inputs):
            def run(args):
                args.clear()
                return list(ready)

            run._boxed_call = True
            return run

        return aot_autograd(fw_compiler=compiler)

    graph = sum_all if one_result else add_one
    figures = []
    for n_args in arg_counts:
        inputs = [torch.zeros((), device="tpu") for _ in range(n_args)]
        torch._dynamo.reset()
        seconds, launch = median_call(torch.compile(graph, backend="tpu"), inputs)
        torch._dynamo.reset()
        ready = [torch.ones((), device="tpu") for _ in range(1 if one_result else n_args)]
        floor, _ = median_call(torch.compile(graph, backend=returning(ready)), inputs)
        figures.append((n_args, seconds, floor, launch))
    return figures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--skip-generate", action="store_true")
    parser.add_argument("--only", default="", help="run the workloads whose name contains this text")
    parser.add_argument(
        "--rounds", type=int, default=3, help="each workload's modes are measured this many times in turn"
    )
    parser.add_argument(
        "--skip-native-compiled", action="store_true", help="leave out the CPU's torch.compile (Inductor)"
    )
    parser.add_argument("--fused-optimizer", action="store_true", help="AdamW with fused=True, not foreach")
    args = parser.parse_args()
    global FUSED_OPTIMIZER
    FUSED_OPTIMIZER = args.fused_optimizer
    all_modes = tuple(mode for mode in MODES if not (args.skip_native_compiled and mode == "cpu compiled"))
    torch.set_num_threads(max(1, torch.get_num_threads()))
    print(f"torch {torch.__version__}; tpu backed by {torch_tpu.platform()}; precision {torch.tpu.precision().name}")
    # The per-op and per-call costs first, in a fresh process: after the workloads, a heap grown by
    # 2048x2048 tensors and a model makes every small allocation (the host's and XLA's) dearer.
    for one_result, arg_counts in ((False, (1, 100)), (True, (100,))):
        for n_args, seconds, floor, launch in compiled_call_overhead(arg_counts, one_result=one_result):
            results = 1 if one_result else n_args
            print(
                f"compiled graph call, {n_args:3d} arguments, {results:3d} results: {seconds * 1e6:.1f} us per call "
                f"(host side); of which Dynamo and aot_autograd with a compiler returning ready outputs "
                f"{floor * 1e6:.1f} us, the plugin's execute call {launch * 1e6:.1f} us"
            )
    extra, native, intercept, slope = recording_costs()
    print(
        f"recording: {extra * 1e6:.2f} us per op above native CPU dispatch ({native * 1e6:.2f} us); "
        f"flush (cache hit, host side): {intercept * 1e6:.1f} us + {slope * 1e9:.0f} ns per op"
    )
    native, idle, during = host_read_cost()
    print(
        f"item() of a computed 0-d value: {idle * 1e6:.1f} us, {during * 1e6:.1f} us while a program "
        f"runs (a CPU tensor's: {native * 1e6:.1f} us)"
    )
    ops, seconds, thread_seconds, launch = forward_flush_cost()
    print(
        f"flush of the LM's forward ({ops} ops, cache hit, host side): {seconds * 1e6:.1f} us; "
        f"the thread's CPU time {thread_seconds * 1e6:.1f} us; the plugin's execute call {launch * 1e6:.1f} us"
    )
    eager_modes = tuple(mode for mode in all_modes if not mode.endswith("compiled"))
    workloads = [
        ("LM training step", train_lm(), args.repeats, 3, all_modes),
        # A 2 ms step: 10 steps' median moved fused/strict between 1.05 and 1.20 from run to run on
        # the same code, so it takes 20x the steps (about 8 s more in all).
        ("MLP training step", mlp_step(), 20 * args.repeats, 3, all_modes),
        ("GPT-2 training step, dropout 0.1", train_gpt2(), args.repeats, 3, all_modes),
        ("150-op elementwise chain, 2048x2048", elementwise_chain(), max(3, args.repeats // 2), 2, all_modes),
    ]
    if not args.skip_generate:
        workloads.append(("GPT-2 generate, 64 tokens", generate_gpt2(), 3, 1, eager_modes))
    workloads = [workload for workload in workloads if args.only.lower() in workload[0].lower()]
    header = (
        f"{'workload':38} {'mode':15} {'median ms':>10} {'x cpu':>7} {'programs/step':>14} {'compiles':>9} "
        f"{'meta runs/step':>15} {'peak MiB':>9} {'first step s':>13}"
    )
    print(header)
    for name, build, repeats, warmup, modes in workloads:
        # The modes take turns, round after round: this machine's speed drifts over seconds, so
        # each ratio is taken within a round and the median over rounds reported.
        rounds = [{mode: measure(build, mode, repeats, warmup) for mode in modes} for _ in range(args.rounds)]

        def median_over_rounds(figure, rounds=rounds):
            return statistics.median(figure(rows) for rows in rounds)

        first = rounds[0]  # programs, compiles, memory and first-step time: the first round's
        for mode in modes:
            time = median_over_rounds(lambda rows, mode=mode: rows[mode]["time"])
            ratio = median_over_rounds(lambda rows, mode=mode: rows[mode]["time"] / rows["cpu"]["time"])
            row = first[mode]
            print(
                f"{name:38} {mode:15} {time * 1e3:10.1f} {ratio:7.2f} "
                f"{row['programs'] if not mode.startswith('cpu') else 0:14.1f} {row['compiles']:9d} "
                f"{row['meta_runs'] if not mode.startswith('cpu') else 0:15.1f} {row['peak'] / 2**20:9.1f} {row['first']:13.2f}"
            )
        pairs = [("fused/strict", "defer_and_fuse")] + (
            [("compiled/strict", "compiled")] if "compiled" in modes else []
        )
        ratios = [
            f"{label} {median_over_rounds(lambda rows, mode=mode: rows[mode]['time'] / rows['strict']['time']):.2f}"
            for label, mode in pairs
        ]
        print(f"{'':38} time {', '.join(ratios)} (medians of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
