"""Fused eager (DeferAndFuse) and batched programs: stable cuts that compile once, Python scalars
that never recompile, _foreach_* ops and optimizer steps as one program in every mode, donation
that leaves views and clones intact, and a fuzzer of random programs against the CPU."""

from __future__ import annotations

import copy
import gc
import json
import threading

import pytest
import torch
from conftest import TPU, assert_close, make, run_python
from fuzz_programs import generate, run

import torch_tpu


def counters():
    torch.tpu.synchronize()
    return torch_tpu.metrics.snapshot()


def delta(before, key):
    return torch_tpu.metrics.snapshot()[key] - before[key]


def block(x, w, scale):
    """A few layers of work with many live intermediates, so results outnumber one."""
    outputs = []
    for _ in range(4):
        x = torch.tanh(x @ w) * scale + 1
        outputs.append(x.sum(0))
    return x, outputs


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_repeating_the_same_work_compiles_nothing(mode):
    w = make((8, 8))
    with torch_tpu.execution_mode(mode):
        for step in range(4):
            x = make((5, 8))
            # Unrelated allocations between steps move storages around in memory: the cut must not
            # depend on addresses.
            padding = [torch.empty(7 * (step + 1), device=TPU) for _ in range(step)]
            before = counters()
            got, got_outputs = block(x.to(TPU), w.to(TPU), 0.5)
            got_cpu = got.cpu()
            compiles = delta(before, "compiles")
            expected, expected_outputs = block(x, w, 0.5)
            assert_close(got, expected, rtol=1e-5, atol=1e-5)
            for g, e in zip(got_outputs, expected_outputs, strict=True):
                assert_close(g, e, rtol=1e-5, atol=1e-4)
            assert got_cpu.shape == (5, 8)
            if step > 0:
                assert compiles == 0, f"step {step} compiled {compiles} programs"
            del padding


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_python_scalars_never_recompile(mode):
    x = make((6, 3))
    with torch_tpu.execution_mode(mode):
        t = x.to(TPU)
        for step in range(1, 6):
            before = counters()
            lr, eps = 0.01 * step, 10.0**-step
            got = (t * lr + eps).div(1 - 0.9**step).clamp(min=-lr)
            assert_close(got, (x * lr + eps).div(1 - 0.9**step).clamp(min=-lr))
            if step > 1:
                assert delta(before, "compiles") == 0, f"step {step} recompiled"


def test_fused_mode_runs_one_program_at_a_host_read():
    x = make((16, 16))
    with torch_tpu.execution_mode("defer_and_fuse"):
        t = x.to(TPU)
        before = counters()
        y = t
        for _ in range(20):
            y = y * 1.01 + 0.5
        assert delta(before, "executions") == 0
        assert torch_tpu._C._pending_count() >= 1
        got = y.cpu()
        assert delta(before, "executions") == 1
    expected = x
    for _ in range(20):
        expected = expected * 1.01 + 0.5
    torch.testing.assert_close(got, expected)


# name -> (fn, foreach ops it calls)
FOREACH_CASES = {
    "add_list": (lambda xs, ys: torch._foreach_add(xs, ys, alpha=0.5), 1),
    "mul_scalar_": (lambda xs, ys: torch._foreach_mul_(xs, 1.5), 1),
    "addcmul_": (lambda xs, ys: torch._foreach_addcmul_(xs, ys, ys, value=0.3), 1),
    "lerp_": (lambda xs, ys: torch._foreach_lerp_(xs, ys, 0.1), 1),
    "sqrt_abs": (lambda xs, ys: torch._foreach_sqrt(torch._foreach_abs(xs)), 2),
    "norm": (lambda xs, ys: torch._foreach_norm(xs), 1),
    "div_scalarlist_": (lambda xs, ys: torch._foreach_div_(xs, [1.0, 2.0, 3.0, 4.0]), 1),
}


@pytest.mark.execution_mode("strict")
@pytest.mark.parametrize("name", sorted(FOREACH_CASES))
def test_foreach_op_is_one_program_in_strict_mode(name):
    fn, ops = FOREACH_CASES[name]
    shapes = [(3,), (4, 5), (2, 3, 2), ()]
    xs, ys = [make(s) for s in shapes], [make(s) for s in shapes]
    txs, tys = [x.to(TPU) for x in xs], [y.to(TPU) for y in ys]
    before = counters()
    got = fn(txs, tys)
    assert delta(before, "executions") == ops
    expected = fn(xs, ys)
    for g, e in zip(got if got is not None else txs, expected if expected is not None else xs, strict=True):
        assert_close(g, e)
    for t, x in zip(txs, xs, strict=True):  # in-place variants wrote the inputs
        assert_close(t, x)


# Batched ops that record each entry's single op straight through its lowering (no meta function,
# no dispatch per tensor; csrc/aten/foreach.cc), against the CPU's generic per-tensor loop.
# name -> fn(selves, others, zero_d): others match selves entry by entry; zero_d is a 0-d tensor.
ENTRYWISE_CASES = {
    "add_list_alpha_": lambda xs, ys, z: torch._foreach_add_(xs, ys, alpha=-0.5),
    "add_scalar": lambda xs, ys, z: torch._foreach_add(xs, 2),
    "sub_scalarlist_": lambda xs, ys, z: torch._foreach_sub_(xs, [0.5, -1.0, 2.0]),
    "mul_0d_tensor_": lambda xs, ys, z: torch._foreach_mul_(xs, z),
    "div_list": lambda xs, ys, z: torch._foreach_div(xs, ys),
    "lerp_scalar_": lambda xs, ys, z: torch._foreach_lerp_(xs, ys, 0.7),
    "lerp_list_": lambda xs, ys, z: torch._foreach_lerp_(xs, ys, [y.sigmoid() for y in ys]),
    "addcmul_": lambda xs, ys, z: torch._foreach_addcmul_(xs, ys, ys, value=-0.25),
    "addcdiv_scalarlist_": lambda xs, ys, z: torch._foreach_addcdiv_(
        xs, ys, [y.abs() + 1 for y in ys], [0.1, 0.2, 0.3]
    ),
    "sqrt_of_abs": lambda xs, ys, z: torch._foreach_sqrt(torch._foreach_abs(xs)),
    "clamp_min_list_": lambda xs, ys, z: torch._foreach_clamp_min_(xs, ys),
    "exp_neg_": lambda xs, ys, z: torch._foreach_exp_(torch._foreach_neg(xs)),
    "rsqrt_reciprocal_log": lambda xs, ys, z: torch._foreach_log(
        torch._foreach_reciprocal(torch._foreach_rsqrt(torch._foreach_add(xs, 4.0)))
    ),
    "sigmoid_tanh_sign": lambda xs, ys, z: torch._foreach_sigmoid(xs)
    + torch._foreach_tanh(xs)
    + torch._foreach_sign(xs),
    "sin_cos_clamp_max": lambda xs, ys, z: torch._foreach_sin(xs)
    + torch._foreach_cos(xs)
    + torch._foreach_clamp_max(xs, 0.5),
}


def _entrywise_inputs(device, dtype, seed):
    # Shapes no other test uses, so the meta cache holds nothing for them; the selves are
    # contiguous views into one flat tensor, as parameters flattened into a buffer are.
    torch.manual_seed(seed)
    shapes = [(7, 3), (11,), (2, 5, 3)]
    flat = make((sum(torch.Size(s).numel() for s in shapes) + 4,), dtype)
    ys = [make(s, dtype) for s in shapes]
    z = make((), dtype)
    flat, ys, z = flat.to(device), [y.to(device) for y in ys], z.to(device)
    xs, start = [], 2
    for s in shapes:
        n = torch.Size(s).numel()
        xs.append(flat[start : start + n].view(s))
        start += n
    return flat, xs, ys, z


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(ENTRYWISE_CASES))
def test_batched_entries_match_the_cpu_without_meta_runs(name, dtype):
    fn = ENTRYWISE_CASES[name]
    flat, xs, ys, z = _entrywise_inputs("cpu", torch.float32, seed=len(name))
    expected = fn(xs, ys, z)
    tflat, txs, tys, tz = _entrywise_inputs(TPU, dtype, seed=len(name))
    before = counters()
    got = fn(txs, tys, tz)
    if name not in ("lerp_list_", "addcdiv_scalarlist_"):  # those build their lists with other ops
        assert delta(before, "meta_runs") == 0
    tolerance = {} if dtype == torch.float32 else dict(rtol=2**-7, atol=1e-2)
    # bf16 against the CPU in f32, rounded: the CPU's own bf16 kernels differ between processors.
    for g, e in zip(got if got is not None else txs, expected if expected is not None else xs, strict=True):
        assert_close(g, e.to(dtype), **tolerance)
    assert_close(tflat, flat.to(dtype), **tolerance)  # written through the views, nothing else


def test_batched_entries_outside_the_fast_case_match_the_cpu():
    # Mixed dtypes, a transposed entry and integers take PyTorch's per-tensor loop; self read as
    # its own partner reads each value before writing it. All give the CPU's results.
    def mixed(xs):
        torch._foreach_mul_(xs, 0.5)

    def transposed(xs):
        torch._foreach_add_([xs[0].t()], [xs[1]])

    def integers(xs):
        torch._foreach_add_(xs, 3)

    def own_partner(xs):
        torch._foreach_addcmul_(xs, xs, xs, value=2.0)

    cases = [
        (mixed, [make((3, 4)), make((5,), torch.float64)]),
        (transposed, [make((4, 3)), make((3, 4))]),
        (integers, [make((6,), torch.int64), make((2,), torch.int32)]),
        (own_partner, [make((3,)), make((2, 2))]),
    ]
    for case, xs in cases:
        txs = [x.to(TPU) for x in xs]
        case(xs)
        case(txs)
        for t, x in zip(txs, xs, strict=True):
            assert_close(t, x)
    # A partner that partly overlaps its self is refused, as on the CPU.
    for device in ("cpu", TPU):
        x = torch.arange(8.0, device=device)
        with pytest.raises(RuntimeError, match="unsupported operation"):
            torch._foreach_add_([x[0:4]], [x[2:6]])


def test_foreach_errors_are_the_cpu_errors():
    for device in ("cpu", TPU):
        xs = [torch.zeros(3, device=device), torch.zeros(4, device=device)]
        with pytest.raises(RuntimeError, match="Tensor lists must have the same number of tensors"):
            torch._foreach_add(xs, xs[:1])
    # The failed op left nothing pending: the next op runs at once.
    x = torch.ones(2, device=TPU)
    before = counters()
    assert_close(x + 1, torch.full((2,), 2.0))
    assert delta(before, "executions") == 1


OPTIMIZERS = {
    "adamw": lambda params: torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1),
    "adam_amsgrad": lambda params: torch.optim.Adam(params, lr=1e-2, amsgrad=True),
    "sgd_momentum": lambda params: torch.optim.SGD(params, lr=1e-2, momentum=0.9, nesterov=True),
    "rmsprop": lambda params: torch.optim.RMSprop(params, lr=1e-3),
}


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_step_is_one_program(name, mode):
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    tpu_model = copy.deepcopy(cpu_model).to(TPU)
    cpu_opt, tpu_opt = OPTIMIZERS[name](cpu_model.parameters()), OPTIMIZERS[name](tpu_model.parameters())
    with torch_tpu.execution_mode(mode):
        for step in range(4):
            x = make((5, 6))
            for model, optimizer, device in ((cpu_model, cpu_opt, "cpu"), (tpu_model, tpu_opt, TPU)):
                optimizer.zero_grad()
                model(x.to(device)).square().mean().backward()
                for group in optimizer.param_groups:
                    group["lr"] = 1e-2 / (step + 1)  # a new Python scalar each step
                before = counters()
                optimizer.step()
                if device == TPU:
                    torch.tpu.synchronize()  # fused mode runs the step here
                    assert delta(before, "executions") == 1, "the step ran as more than one program"
                    if step >= 2:
                        assert delta(before, "compiles") == 0
    for p, q in zip(tpu_model.parameters(), cpu_model.parameters(), strict=True):
        assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-5)
    for tpu_state, cpu_state in zip(tpu_opt.state.values(), cpu_opt.state.values(), strict=True):
        for key, expected in cpu_state.items():
            if tpu_state[key].device.type == "tpu":
                assert_close(tpu_state[key], expected, rtol=1e-5, atol=1e-5)
            else:  # Adam's step count stays on the host, as on the CPU
                torch.testing.assert_close(tpu_state[key], expected)


@pytest.mark.execution_mode("strict")
def test_a_raising_optimizer_step_leaves_strict_mode_strict():
    param = torch.nn.Parameter(torch.ones(3, device=TPU))
    optimizer = torch.optim.SGD([param], lr=0.1)

    def closure():
        raise ValueError("from the closure")

    with pytest.raises(ValueError, match="from the closure"):
        optimizer.step(closure)
    param.grad = torch.ones(3, device=TPU)
    optimizer.step()  # closes the stale scope, then runs as one program
    before = counters()
    y = param.detach() * 2
    assert delta(before, "executions") == 1 and torch_tpu._C._pending_count() == 0
    assert_close(y, torch.full((3,), 1.8))


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_donation_leaves_views_and_clones_intact(mode):
    x = make((6, 4))
    with torch_tpu.execution_mode(mode):
        param = x.to(TPU)
        view = param[1:3]
        clone = param.clone()
        alias = param.view(-1)
        before = counters()
        param.mul_(2).add_(1)  # donates the old buffer where nothing else holds it
        torch.tpu.synchronize()
        assert_close(view, x[1:3] * 2 + 1)
        assert_close(alias, (x * 2 + 1).view(-1))
        assert_close(clone, x)
        assert_close(param, x * 2 + 1)
        # An optimizer-like update in place: donated, and the old values are gone only there.
        del view, alias, clone
        param.sub_(0.5)
        torch.tpu.synchronize()
        assert_close(param, x * 2 + 0.5)
        assert delta(before, "donated_buffers") >= 1


def adamw_step_peak(mode):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)).to(TPU)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(32, 64, device=TPU)
    with torch_tpu.execution_mode(mode):
        for _ in range(3):
            optimizer.zero_grad()
            model(x).square().mean().backward()
            torch.tpu.synchronize()
            torch.tpu.reset_peak_memory_stats()
            baseline = torch.tpu.memory_allocated()
            optimizer.step()
            torch.tpu.synchronize()
    return torch.tpu.max_memory_allocated() - baseline


def test_fused_optimizer_step_peak_memory_is_at_most_strict():
    strict, fused = adamw_step_peak("strict"), adamw_step_peak("defer_and_fuse")
    assert fused <= strict, f"fused peak {fused} bytes above strict {strict}"


LOOP_OPS = [torch.sin, torch.cos, torch.tanh, torch.sigmoid, torch.neg, torch.abs, lambda x: x * 0.9, lambda x: x + 0.1]


def loop_step(x, body=130):
    """One iteration of a loop body of `body` elementwise ops, in an order without short repeats."""
    import random

    order = random.Random(0)
    for _ in range(body):
        x = order.choice(LOOP_OPS)(x)
    return x


def fused_iterations(x, step, iterations):
    """`iterations` of `step` from x in fused mode, with no host read: (result, executions)."""
    with torch_tpu.execution_mode("defer_and_fuse"):
        torch.tpu.synchronize()
        before = torch_tpu.metrics.snapshot()
        for _ in range(iterations):
            x = step(x)
        torch.tpu.synchronize()
        return x, delta(before, "executions")


def on_cpu(x, step, iterations):
    for _ in range(iterations):
        x = step(x)
    return x


def test_a_loop_without_host_reads_is_cut_at_its_body():
    # Pending work that repeats is cut at the repeat: the first cut holds two iterations, then
    # each iteration is one program, compiled once; without the cut it would all wait for the
    # host read (or the size bound, at an arbitrary point of the loop).
    x0 = make((16, 16), low=-1, high=1)
    before = torch_tpu.metrics.snapshot()
    x, executions = fused_iterations(x0.to(TPU), loop_step, 12)
    assert executions == 11  # 2 iterations, then 10 of one
    assert delta(before, "compiles") + delta(before, "disk_cache_hits") <= 2
    before = torch_tpu.metrics.snapshot()
    x, _ = fused_iterations(x, loop_step, 12)
    assert delta(before, "compiles") == 0
    torch.testing.assert_close(x.cpu(), on_cpu(x0, loop_step, 24), rtol=1e-4, atol=1e-5)


def test_short_repeats_and_chains_stay_one_program():
    # A chain repeating a few ops (shorter than TORCH_TPU_FUSE_MIN_LOOP_OPS, 128) is not a loop
    # body: 120 ops of a period of 4 fuse whole.
    def step(x):
        return torch.tanh(x * 0.5 + 0.1).abs()

    x0 = make((16, 16), low=-1, high=1)
    x, executions = fused_iterations(x0.to(TPU), step, 30)
    assert executions == 1
    torch.testing.assert_close(x.cpu(), on_cpu(x0, step, 30), rtol=1e-5, atol=1e-6)


def test_memory_is_steady_over_a_1000_step_soak_and_returns_to_baseline_after_del():
    # Earlier tests' garbage (tensors held by an exception's traceback cycle) is freed first: the
    # collector freeing it mid-soak moved the stats between two checks.
    gc.collect()
    torch.tpu.synchronize()
    baseline = torch.tpu.memory_allocated()
    with torch_tpu.execution_mode("defer_and_fuse"):
        model = torch.nn.Linear(32, 32).to(TPU)
        optimizer = torch.optim.AdamW(model.parameters())
        steady = None
        for step in range(1000):
            optimizer.zero_grad()
            model(torch.randn(8, 32, device=TPU)).sum().backward()
            optimizer.step()
            if step % 100 == 99:
                torch.tpu.synchronize()
                # After the first steps (AdamW's state appears), every step leaves the same bytes.
                steady = steady or torch.tpu.memory_allocated()
                assert torch.tpu.memory_allocated() == steady, f"step {step}"
        del model, optimizer
        torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() == baseline


FUZZ_SEEDS = range(24)


@pytest.mark.parametrize("seed", FUZZ_SEEDS)
def test_fuzz_random_programs_match_the_cpu_in_every_mode(seed):
    steps = generate(seed)
    draws, host_reads = [], {"cpu": [], "strict": [], "fused": []}
    torch.tpu.manual_seed(seed)
    strict = run(steps, TPU, draws, "record", host_reads["strict"], seed)
    torch.tpu.manual_seed(seed)
    with torch_tpu.execution_mode("defer_and_fuse"):
        fused = run(steps, TPU, draws, "check", host_reads["fused"], seed)
        fused = [t.cpu() for t in fused]
    expected = run(steps, "cpu", draws, "replay", host_reads["cpu"], seed)
    tolerance = dict(rtol=1e-4, atol=1e-4)
    for name, pool in (("strict", strict), ("fused", fused)):
        assert len(pool) == len(expected)
        for i, (got, want) in enumerate(zip(pool, expected, strict=True)):
            assert got.dtype == want.dtype, f"{name} tensor {i}"
            if want.dtype == torch.bfloat16:
                torch.testing.assert_close(
                    got.cpu().float(),
                    want.float(),
                    rtol=2e-2,
                    atol=2e-2,
                    msg=lambda m, name=name, i=i: f"{name} tensor {i}: {m}",
                )
            elif want.dtype == torch.int64:
                # Casts of values within rounding of an integer may land either side.
                assert (got.cpu() - want).abs().max() <= 1, f"{name} tensor {i}"
            else:
                torch.testing.assert_close(
                    got.cpu(), want, **tolerance, msg=lambda m, name=name, i=i: f"{name} tensor {i}: {m}"
                )
        for got, want in zip(host_reads[name], host_reads["cpu"], strict=True):
            assert got.shape == want.shape and got.dtype == want.dtype


@pytest.mark.parametrize("seed", range(6))
def test_fuzz_random_flushes_change_no_result(seed):
    """The same program in fused mode, with a flush forced after random steps."""
    import random

    steps = generate(100 + seed)
    rng = random.Random(seed)
    flushed = []
    for step in steps:
        flushed.append(step)
        if rng.random() < 0.3 and step[0] != "del":
            flushed.append(("flush", 0))
    torch.tpu.manual_seed(seed)
    with torch_tpu.execution_mode("defer_and_fuse"):
        plain = [t.cpu() for t in run(steps, TPU, [], "record", [], seed)]
    torch.tpu.manual_seed(seed)
    with torch_tpu.execution_mode("defer_and_fuse"):
        cut = [t.cpu() for t in run(flushed, TPU, [], "record", [], seed)]
    for a, b in zip(plain, cut, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_a_failing_fused_program_names_the_op_and_the_line_that_recorded_it():
    code = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (32 << 30, 32 << 30))
import torch, torch_tpu
with torch_tpu.execution_mode("defer_and_fuse"):
    x = torch.arange(4.0, device="tpu") * 2
    try:
        huge = torch.ones(2**38, device="tpu")  # past the size bound: cut here, with x's op
        total = huge.sum() + x.sum()
        total.item()
    except torch.OutOfMemoryError as error:
        print("ERROR", error)
    print((x + 1).cpu().tolist())
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    message = result.stdout
    assert "ERROR" in message, message
    assert "The failing op: aten::fill_.Scalar at <string>:8" in message, message
    assert "[1.0, 3.0, 5.0, 7.0]" in message  # the device still works


def test_the_failing_op_is_named_at_its_own_line_among_the_same_op_on_other_lines():
    # Source lines are interned per code object and instruction: the same op recorded from two
    # lines of one function, in one program, is named at the line that failed.
    code = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (32 << 30, 32 << 30))
import torch, torch_tpu
def step(n):
    small = torch.ones(4, device="tpu")
    huge = torch.ones(n, device="tpu")
    return (small.sum() + huge.sum()).item()
with torch_tpu.execution_mode("defer_and_fuse"):
    for n in (8, 2**38):
        try:
            print("OK", step(n))
        except torch.OutOfMemoryError as error:
            print("ERROR", error)
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    message = result.stdout
    assert "OK 12.0" in message, message
    assert "The failing op: aten::fill_.Scalar at <string>:7" in message, message


def test_a_shape_that_grows_every_cut_is_detected_counted_and_named():
    with torch_tpu.execution_mode("defer_and_fuse"):
        before = counters()
        with pytest.warns(UserWarning, match="compiled 8 times with only its shapes changed"):
            for length in range(1, 13):
                # (A range that grows like this is padded to buckets instead: test_growing.py.)
                grown = torch.full((length,), float(length), device=TPU).mul(3).add(1)
                assert_close(grown, torch.full((length,), float(length)).mul(3).add(1))
        assert delta(before, "volatile_programs") == 1  # one site, counted once
        # The same work on one shape is not volatile.
        before = counters()
        for _ in range(12):
            (torch.ones(5, device=TPU) * 3 + 1).cpu()
        assert delta(before, "volatile_programs") == 0


def test_batches_of_changing_sizes_are_detected_and_the_warning_names_the_remedy():
    """Padding each batch to its longest sequence gives every step new shapes: the same training
    step compiles again for each. The warning says so and names static padding as the remedy."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(32, 8), torch.nn.Linear(8, 4))
    reference = copy.deepcopy(model)
    model.to(TPU)
    with torch_tpu.execution_mode("defer_and_fuse"):
        before = counters()
        with pytest.warns(UserWarning, match=r"(?s)inputs whose sizes change from batch to batch.*pad_to_multiple_of"):
            for length in range(3, 15):
                tokens = torch.randint(0, 32, (2, length))
                loss = model(tokens.to(TPU)).square().mean()
                loss.backward()
                expected = reference(tokens).square().mean()
                expected.backward()
                assert_close(loss, expected.detach())
        assert delta(before, "volatile_programs") >= 1
    for ours, theirs in zip(model.parameters(), reference.parameters(), strict=True):
        assert_close(ours.grad, theirs.grad)


def test_size_bound_counts_only_pending_work():
    """Strict ops before a fused region ran as their own programs: they do not count toward the
    next cut's size bound, so a small fused region is still one program."""
    code = """
import json, torch, torch_tpu
x = torch.randn(64, device="tpu")
with torch_tpu.execution_mode("strict"):
    for _ in range(40):  # records far more nodes than the bound below
        x = torch.sin(x) + 1
with torch_tpu.execution_mode("defer_and_fuse"):
    torch_tpu.metrics.reset()
    y = (x * 2).exp().sum()
    y.item()
    print(json.dumps(torch_tpu.metrics.snapshot()["sync_reasons"]))
"""
    result = run_python(code, TORCH_TPU_FUSE_MAX_OPS="3")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"host read": 1}


def test_size_cuts_of_a_loop_that_never_syncs_settle_on_its_steps():
    """A training loop that never reads a pending value back is one stream of ops, cut for size
    at places that move from step to step. The loop detector sees through those cuts, finds the
    step, and cuts at its boundaries; each size cut then falls at the same place in every step,
    so the steps compile nothing more."""
    code = """
import json, torch, torch_tpu
torch.manual_seed(0)
w = torch.randn(16, 16, device="tpu") * 0.1
batches = [torch.randn(4, 16, device="tpu") for _ in range(3)]
compiles, reasons = [], []
with torch_tpu.execution_mode("defer_and_fuse"):
    for step in range(16):
        torch_tpu.metrics.reset()
        x = batches[step % 3]
        for _ in range(5):
            x = torch.tanh(x @ w) + x
        w.sub_(x.t() @ x * 1e-3)  # 19 ops a step, none read back
        figures = torch_tpu.metrics.snapshot()
        compiles.append(figures["compiles"])
        reasons.append(figures["sync_reasons"])
    w.sum().item()
print(json.dumps([compiles, reasons]))
"""
    result = run_python(code, TORCH_TPU_FUSE_MAX_OPS="7", TORCH_TPU_FUSE_MIN_LOOP_OPS="32", TORCH_TPU_DISK_CACHE="0")
    assert result.returncode == 0, result.stderr
    compiles, reasons = json.loads(result.stdout.strip().splitlines()[-1])
    assert all("size limit" in r for r in reasons), reasons
    assert any("loop boundary" in r for r in reasons[8:]), reasons
    assert sum(compiles[8:]) == 0, compiles


def cuts(before, reason):
    return torch_tpu.metrics.snapshot()["sync_reasons"].get(reason, 0) - before["sync_reasons"].get(reason, 0)


def test_a_training_step_launches_its_forward_when_the_backward_starts():
    """The forward pending when a backward pass starts is cut then, the backward when the
    optimizer step starts, and the step when it ends: the device runs each part while the host
    records the next. Steps still compile once and match the CPU."""
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))
    tpu_model = copy.deepcopy(cpu_model).to(TPU)
    cpu_opt = torch.optim.AdamW(cpu_model.parameters(), lr=1e-2)
    tpu_opt = torch.optim.AdamW(tpu_model.parameters(), lr=1e-2)
    with torch_tpu.execution_mode("defer_and_fuse"):
        for step in range(4):
            x = make((5, 6))
            losses = []
            for model, optimizer, device in ((cpu_model, cpu_opt, "cpu"), (tpu_model, tpu_opt, TPU)):
                optimizer.zero_grad()
                loss = model(x.to(device)).square().mean()
                before = torch_tpu.metrics.snapshot()  # no synchronize: the forward stays pending
                loss.backward()
                cut_by_backward = cuts(before, "backward boundary")
                optimizer.step()
                losses.append(loss.item())
                if device == TPU:
                    assert cut_by_backward == 1, "the forward was not launched when the backward began"
                    assert cuts(before, "backward boundary") == 2, "the backward was not launched when the step began"
                    assert cuts(before, "optimizer step") == 1, "the step was not launched when it ended"
                    assert delta(before, "executions") == 3
                    if step >= 2:
                        assert delta(before, "compiles") == 0
            assert losses[1] == pytest.approx(losses[0], rel=1e-5, abs=1e-6)
    for p, q in zip(tpu_model.parameters(), cpu_model.parameters(), strict=True):
        assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-5)


def test_threads_recording_at_once_each_get_their_own_results():
    """In fused mode one thread's host read cuts the work every thread has pending, while the
    others go on recording into, reading and freeing those storages."""
    shared = make((9, 4))
    shared_tpu = shared.to(TPU)
    errors = []

    def work(seed):
        try:
            generator = torch.Generator().manual_seed(seed)
            for step in range(30):
                x = torch.randn(16, 9, generator=generator)
                scale = 1 + step / 30  # a new Python scalar each step: the same program
                got = torch.tanh(x.to(TPU) @ shared_tpu) * scale
                kept = got + shared_tpu.sum()
                del got  # freed while another thread's cut may still hold it
                expected = torch.tanh(x @ shared) * scale + shared.sum()
                assert_close(kept, expected, rtol=1e-5, atol=1e-5)
        except Exception as error:  # reported below, on the main thread
            errors.append(error)

    with torch_tpu.execution_mode("defer_and_fuse"):
        for _ in range(3):
            threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    assert not errors, errors[0]
