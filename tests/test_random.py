"""Random ops on the tpu device: reproducibility, statistics, dtypes, bounds, views and errors.

Random streams differ from the CPU's by design, so values are checked statistically. Every
statistical bound is at least 5 sigma from what a correct generator gives (a false failure is
rarer than one in a million), and a biased or broken generator fails it.
"""

from __future__ import annotations

import math

import pytest
import torch
from conftest import TPU, noncontiguous

import torch_tpu

N = 100_000
FLOAT_DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def draw(op, *args, **kwargs):
    return op(*args, device=TPU, **kwargs).cpu()


def assert_near(value, expected, sigma, what):
    assert abs(value - expected) < 5 * sigma, f"{what}: {value} vs {expected} (sigma {sigma})"


def chi_square(counts: torch.Tensor, expected: torch.Tensor) -> float:
    return float(((counts.double() - expected) ** 2 / expected).sum())


def assert_uniform_histogram(samples: torch.Tensor, bins: int, low: float, high: float):
    """Chi-square of a `bins`-bin histogram: mean bins - 1, sd sqrt(2 (bins - 1))."""
    counts = torch.histc(samples.double(), bins=bins, min=low, max=high)
    assert counts.sum() == samples.numel()
    statistic = chi_square(counts, torch.full((bins,), samples.numel() / bins, dtype=torch.float64))
    assert statistic < (bins - 1) + 7 * math.sqrt(2 * (bins - 1)), f"chi-square {statistic}"


# ---- reproducibility ----

RANDOM_CALLS = {
    "rand": lambda: torch.rand(64, device=TPU),
    "randn": lambda: torch.randn(8, 8, device=TPU),
    "randint": lambda: torch.randint(-5, 50, (64,), device=TPU),
    "randperm": lambda: torch.randperm(64, device=TPU),
    "bernoulli": lambda: torch.bernoulli(torch.full((64,), 0.5).to(TPU)),
    "normal_": lambda: torch.zeros(64).to(TPU).normal_(2.0, 3.0),
    "random_": lambda: torch.zeros(64, dtype=torch.int32).to(TPU).random_(),
    "multinomial": lambda: torch.multinomial(torch.ones(4, 30).to(TPU), 5),
}


@pytest.mark.parametrize("name", list(RANDOM_CALLS))
def test_tpu_manual_seed_replays(name):
    call = RANDOM_CALLS[name]
    torch.tpu.manual_seed(1234)
    first, second = call().cpu(), call().cpu()
    torch.tpu.manual_seed(1234)
    assert torch.equal(call().cpu(), first)
    assert torch.equal(call().cpu(), second)
    assert not torch.equal(first, second), "consecutive draws must differ"
    torch.tpu.manual_seed(4321)
    assert not torch.equal(call().cpu(), first), "another seed must give another draw"


def test_torch_manual_seed_seeds_the_tpu_generator():
    torch.manual_seed(7)
    first = draw(torch.rand, 100)
    torch.manual_seed(7)
    assert torch.equal(draw(torch.rand, 100), first)
    torch.manual_seed(8)
    assert not torch.equal(draw(torch.rand, 100), first)


def test_consecutive_draws_are_not_shifted_copies():
    # ThreeFry counts from its state; a key that only advanced the counter would make the second
    # draw the first one shifted by one element.
    torch.tpu.manual_seed(0)
    first = draw(torch.rand, 1000)
    second = draw(torch.rand, 1000)
    for shift in range(0, 4):
        assert not torch.equal(first[shift:], second[: 1000 - shift])
        assert not torch.equal(second[shift:], first[: 1000 - shift])
    correlation = torch.corrcoef(torch.stack([first, second]))[0, 1]
    assert abs(correlation) < 5 / math.sqrt(1000)


def test_generator_object_has_its_own_stream():
    generator = torch.Generator(device=TPU)
    assert generator.device.type == "tpu"
    generator.manual_seed(99)
    first = torch.rand(50, device=TPU, generator=generator).cpu()
    torch.tpu.manual_seed(5)
    draw(torch.rand, 50)  # the default generator advancing does not touch `generator`
    second = torch.rand(50, device=TPU, generator=generator).cpu()
    generator.manual_seed(99)
    assert torch.equal(torch.rand(50, device=TPU, generator=generator).cpu(), first)
    assert torch.equal(torch.rand(50, device=TPU, generator=generator).cpu(), second)
    assert generator.initial_seed() == 99


def test_generator_for_every_random_op():
    generator = torch.Generator(device=TPU)
    ops = [
        lambda g: torch.randn(20, device=TPU, generator=g),
        lambda g: torch.randint(0, 10**6, (20,), device=TPU, generator=g),
        lambda g: torch.randperm(20, device=TPU, generator=g),
        lambda g: torch.zeros(20).to(TPU).uniform_(-1, 1, generator=g),
        lambda g: torch.zeros(20).to(TPU).bernoulli_(0.5, generator=g),
        lambda g: torch.multinomial(torch.ones(20).to(TPU), 20, generator=g),
    ]
    for op in ops:
        generator.manual_seed(3)
        first = op(generator).cpu()
        generator.manual_seed(3)
        assert torch.equal(op(generator).cpu(), first)


def test_cpu_generator_is_rejected():
    with pytest.raises(RuntimeError, match="Expected a 'tpu' device type for generator but found 'cpu'"):
        torch.rand(3, device=TPU, generator=torch.Generator())


def test_rng_state_replays():
    torch.tpu.manual_seed(11)
    draw(torch.rand, 10)
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    first = draw(torch.randn, 30)
    second = draw(torch.randint, 0, 100, (30,))
    torch.tpu.set_rng_state(state)
    assert torch.equal(draw(torch.randn, 30), first)
    assert torch.equal(draw(torch.randint, 0, 100, (30,)), second)


def test_fork_rng_restores_the_tpu_generator():
    torch.tpu.manual_seed(21)
    expected = draw(torch.rand, 10)
    torch.tpu.manual_seed(21)
    with torch.random.fork_rng(device_type="tpu"):
        draw(torch.rand, 10)
    assert torch.equal(draw(torch.rand, 10), expected)


def test_new_seed_does_not_recompile():
    torch.tpu.manual_seed(1)
    draw(torch.rand, 257)
    draw(torch.rand, 257)
    before = torch_tpu.metrics.snapshot()
    torch.tpu.manual_seed(2)
    draw(torch.rand, 257)
    torch.tpu.manual_seed(3)
    draw(torch.rand, 257)
    after = torch_tpu.metrics.snapshot()
    for key in ("compiles", "cache_misses", "disk_cache_hits"):
        assert after[key] == before[key], key


def test_new_bounds_do_not_recompile():
    torch.randint(0, 10, (33,), device=TPU).cpu()
    torch.zeros(33).to(TPU).uniform_(0, 1).cpu()
    before = torch_tpu.metrics.snapshot()
    torch.randint(-7, 1000, (33,), device=TPU).cpu()
    torch.zeros(33).to(TPU).uniform_(-3, 5).cpu()
    after = torch_tpu.metrics.snapshot()
    assert after["compiles"] == before["compiles"]
    assert after["cache_misses"] == before["cache_misses"]


def test_fused_mode_draws_differ_and_replay():
    with torch_tpu.execution_mode("defer_and_fuse"):
        torch.tpu.manual_seed(5)
        a, b = torch.rand(100, device=TPU), torch.rand(100, device=TPU)
        a, b = a.cpu(), b.cpu()
    assert not torch.equal(a, b)
    torch.tpu.manual_seed(5)
    assert torch.equal(draw(torch.rand, 100), a)
    assert torch.equal(draw(torch.rand, 100), b)


# ---- uniform ----


def test_uniform_statistics_float32():
    samples = draw(torch.rand, N)
    assert samples.dtype == torch.float32
    assert 0 <= samples.min() and samples.max() < 1
    sigma = 1 / math.sqrt(12)
    assert_near(samples.double().mean().item(), 0.5, sigma / math.sqrt(N), "mean")
    # the sample variance of U(0, 1) has sd sqrt(1/180 / N)
    assert_near(samples.double().var().item(), 1 / 12, math.sqrt(1 / 180 / N), "variance")
    assert_uniform_histogram(samples, 100, 0, 1)
    # fine structure: the low bits are uniform too (multiply by 2^16 and look at the fraction)
    assert_uniform_histogram(torch.frac(samples.double() * 65536), 64, 0, 1)
    assert samples.unique().numel() > 0.99 * N


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_uniform_range_and_mean(dtype):
    samples = torch.empty(N, dtype=dtype, device=TPU).uniform_(-2, 3).cpu()
    assert samples.dtype == dtype
    assert samples.min() >= -2 and samples.max() < 3
    sigma = 5 / math.sqrt(12)
    assert_near(samples.double().mean().item(), 0.5, sigma / math.sqrt(N), "mean")
    assert_uniform_histogram(samples, 20, -2, 3)


def half_uniform_distribution(dtype, low, high):
    """The exact distribution of uniform_(low, high) in a half type: each of the 2^digits equally
    likely units k / 2^digits maps to round(k / 2^digits * (high - low) + low), kept below high."""
    digits = {torch.bfloat16: 8, torch.float16: 11}[dtype]
    low_t, high_t = torch.tensor(low, dtype=dtype), torch.tensor(high, dtype=dtype)
    units = torch.arange(2**digits, dtype=torch.float32) * 2.0**-digits
    values = (units * (high_t.float() - low_t.float()) + low_t.float()).to(dtype)
    below_high = torch.maximum(torch.nextafter(high_t, torch.tensor(-math.inf, dtype=dtype)), low_t)
    values = torch.where(values >= high_t, below_high, values)
    support, counts = values.unique(return_counts=True)
    return support, counts.double() / 2**digits


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bounds", [(-2, 3), (0, 1), (0.98828125, 1.0), (100, 101)], ids=str)
def test_uniform_half_types_follow_their_exact_distribution(dtype, bounds):
    samples = torch.empty(N, dtype=dtype, device=TPU).uniform_(*bounds).cpu()
    assert samples.dtype == dtype
    support, probabilities = half_uniform_distribution(dtype, *bounds)
    assert set(samples.unique().tolist()) <= set(support.tolist()), "a value uniform_ cannot give"
    counts = torch.zeros(support.numel(), dtype=torch.float64)
    counts.index_add_(0, torch.searchsorted(support, samples), torch.ones(N, dtype=torch.float64))
    degrees = support.numel() - 1
    statistic = chi_square(counts, probabilities * N)
    assert statistic < degrees + 7 * math.sqrt(2 * degrees), f"chi-square {statistic}, {degrees} dof"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_uniform_never_reaches_to_after_rounding(dtype):
    # Near 1 the half types are coarse: x * (to - from) + from rounds up to `to` unless clamped.
    # (bounds exactly representable in both types, so `to` is not itself rounded)
    for low, high in [(0, 1), (0.98828125, 1.0), (-1.0, -0.9921875), (255.0, 256.0), (-0.0078125, 0.0)]:
        samples = torch.empty(20_000, dtype=dtype, device=TPU).uniform_(low, high).cpu()
        assert (samples < high).all(), (low, high, samples.max())
        assert (samples >= low).all(), (low, high, samples.min())


def test_uniform_empty_range_gives_from():
    samples = torch.empty(100, device=TPU).uniform_(2.5, 2.5).cpu()
    assert (samples == 2.5).all()


def test_rand_dtypes_and_shapes():
    for dtype in FLOAT_DTYPES + [torch.float64]:
        x = torch.rand(3, 4, 5, dtype=dtype, device=TPU)
        assert x.dtype == dtype and x.shape == (3, 4, 5) and x.device.type == "tpu"
    scalar = torch.rand((), device=TPU).cpu()
    assert scalar.shape == () and 0 <= scalar < 1
    assert torch.rand(0, 3, device=TPU).shape == (0, 3)


def test_uniform_out_variants():
    out = torch.empty(0, device=TPU)
    torch.rand(10, out=out)
    assert out.shape == (10,) and 0 <= out.cpu().min() and out.cpu().max() < 1
    x = torch.zeros(1000).to(TPU)
    result = torch.ops.aten.uniform(x, 5.0, 6.0).cpu()
    assert 5 <= result.min() and result.max() < 6
    assert (x.cpu() == 0).all(), "the functional variant leaves its input alone"


# ---- normal ----


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [torch.float64])
def test_normal_statistics(dtype):
    samples = draw(torch.randn, N, dtype=dtype)
    assert samples.dtype == dtype
    values = samples.double()
    assert_near(values.mean().item(), 0, 1 / math.sqrt(N), "mean")
    assert_near(values.std().item(), 1, 1 / math.sqrt(2 * N), "std")
    within_one = (values.abs() < 1).double().mean().item()
    p = math.erf(1 / math.sqrt(2))
    assert_near(within_one, p, math.sqrt(p * (1 - p) / N), "P(|z| < 1)")
    # tails: P(|z| > 3) = 0.0027
    beyond_three = (values.abs() > 3).double().mean().item()
    q = math.erfc(3 / math.sqrt(2))
    assert_near(beyond_three, q, math.sqrt(q * (1 - q) / N), "P(|z| > 3)")
    assert torch.isfinite(values).all()


def test_normal_mean_and_std():
    samples = torch.empty(N, device=TPU).normal_(mean=-3.0, std=0.5).cpu().double()
    assert_near(samples.mean().item(), -3, 0.5 / math.sqrt(N), "mean")
    assert_near(samples.std().item(), 0.5, 0.5 / math.sqrt(2 * N), "std")
    assert (torch.empty(10, device=TPU).normal_(4.0, 0.0).cpu() == 4.0).all()


def test_normal_odd_count_and_0d():
    odd = draw(torch.randn, 7, 3)
    assert odd.shape == (7, 3) and odd.unique().numel() == 21
    assert draw(torch.randn, ()).shape == ()


def test_normal_tensor_overloads():
    mean = torch.tensor([0.0, 10.0, -10.0, 100.0]).repeat(N // 4)
    std = torch.tensor([1.0, 0.1, 2.0, 0.0]).repeat(N // 4)
    samples = torch.normal(mean.to(TPU), std.to(TPU)).cpu().double().view(-1, 4)
    for column, (m, s) in enumerate([(0, 1), (10, 0.1), (-10, 2), (100, 0)]):
        assert_near(samples[:, column].mean().item(), m, s / math.sqrt(N / 4) + 1e-9, f"mean {m}")
    assert (samples[:, 3] == 100).all()
    scalar_std = torch.normal(mean.to(TPU), 2.0).cpu().double().view(-1, 4)
    assert_near(scalar_std[:, 1].std().item(), 2, 2 / math.sqrt(N / 2), "std")
    scalar_mean = torch.normal(5.0, std.to(TPU)).cpu().double().view(-1, 4)
    assert_near(scalar_mean[:, 2].mean().item(), 5, 2 / math.sqrt(N / 4), "mean")
    sized = torch.normal(1.0, 2.0, size=(3, 5), device=TPU)
    assert sized.shape == (3, 5) and sized.device.type == "tpu"


def test_normal_errors():
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0, but found std -1"):
        torch.empty(3, device=TPU).normal_(0, -1)


def test_normal_integer_target_raises():
    with pytest.raises((RuntimeError, NotImplementedError)):
        torch.empty(3, dtype=torch.int32, device=TPU).normal_()


# ---- complex targets: drawn as their real view, as the CPU's view_as_real ----


def assert_uncorrelated(a: torch.Tensor, b: torch.Tensor, what: str):
    correlation = torch.corrcoef(torch.stack([a.double(), b.double()]))[0, 1].item()
    assert_near(correlation, 0, 1 / math.sqrt(a.numel()), what)


def test_complex_randn_parts_are_independent_halves_of_the_variance():
    samples = draw(torch.randn, N, dtype=torch.complex64)
    assert samples.dtype == torch.complex64
    for part, name in ((samples.real, "real"), (samples.imag, "imag")):
        values = part.double()
        assert_near(values.mean().item(), 0, math.sqrt(0.5 / N), f"{name} mean")
        # the variance of a normal sample: sd sigma^2 sqrt(2 / (N - 1))
        assert_near(values.var().item(), 0.5, 0.5 * math.sqrt(2 / N), f"{name} variance")
    assert_uncorrelated(samples.real, samples.imag, "real and imaginary parts")
    assert torch.view_as_real(samples).unique().numel() > 0.99 * 2 * N


def test_complex_normal_mean_goes_to_both_parts():
    samples = torch.empty(N, dtype=torch.complex64, device=TPU).normal_(2.0, 3.0).cpu()
    part_std = 3 / math.sqrt(2)
    for part, name in ((samples.real, "real"), (samples.imag, "imag")):
        assert_near(part.double().mean().item(), 2, part_std / math.sqrt(N), f"{name} mean")
        assert_near(part.double().std().item(), part_std, part_std / math.sqrt(2 * N), f"{name} std")


def test_complex_normal_tensor_overload_adds_a_complex_mean():
    mean = torch.tensor([1 + 2j, -3 + 0.5j], dtype=torch.complex64).repeat(N // 2)
    std = torch.tensor([2.0, 0.5]).repeat(N // 2)
    samples = torch.normal(mean.to(TPU), std.to(TPU)).cpu().view(-1, 2)
    assert samples.dtype == torch.complex64
    for column, (m, s) in enumerate([(1 + 2j, 2.0), (-3 + 0.5j, 0.5)]):
        part_std = s / math.sqrt(2)
        for part, expected in ((samples[:, column].real, m.real), (samples[:, column].imag, m.imag)):
            assert_near(part.double().mean().item(), expected, part_std / math.sqrt(N / 2), f"mean {m}")
            assert_near(part.double().std().item(), part_std, part_std / math.sqrt(N), f"std {m}")
    sized = torch.normal(0.0, 1.0, size=(3, 5), dtype=torch.complex64, device=TPU)
    assert sized.shape == (3, 5) and sized.dtype == torch.complex64


def test_complex_normal_errors_match_cpu():
    cases = [
        lambda device: torch.normal(0.0, torch.ones(3, dtype=torch.complex64, device=device)),
        lambda device: torch.normal(torch.zeros(3, device=device), torch.ones(3, dtype=torch.complex64, device=device)),
        lambda device: torch.empty(3, dtype=torch.complex64, device=device).normal_(0, -1),
    ]
    for case in cases:
        with pytest.raises(RuntimeError) as expected:
            case("cpu")
        with pytest.raises(RuntimeError) as actual:
            case(TPU).cpu()
        assert str(expected.value).split("\n")[0] in str(actual.value)


def test_complex_uniform_parts_each_cover_the_range():
    samples = draw(torch.rand, N, dtype=torch.complex64)
    assert samples.dtype == torch.complex64
    for part in (samples.real, samples.imag):
        assert part.min() >= 0 and part.max() < 1
        assert_uniform_histogram(part, 50, 0, 1)
    assert_uncorrelated(samples.real, samples.imag, "real and imaginary parts")
    bounded = torch.empty(N, dtype=torch.complex64, device=TPU).uniform_(-2, 3).cpu()
    for part in (bounded.real, bounded.imag):
        assert part.min() >= -2 and part.max() < 3
        assert_near(part.double().mean().item(), 0.5, 5 / math.sqrt(12 * N), "mean")
    with pytest.raises(RuntimeError) as expected:
        torch.empty(3, dtype=torch.complex64).uniform_(3, 2)
    with pytest.raises(RuntimeError) as actual:
        torch.empty(3, dtype=torch.complex64, device=TPU).uniform_(3, 2)
    assert str(expected.value).split("\n")[0] in str(actual.value)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_complex_draws_replay_and_write_only_their_view(mode):
    with torch_tpu.execution_mode(mode):
        torch.manual_seed(7)
        first = torch.randn(16, dtype=torch.complex64, device=TPU).cpu()
        torch.manual_seed(7)
        again = torch.randn(16, dtype=torch.complex64, device=TPU).cpu()
        assert torch.equal(first, again)
        target = torch.zeros(4, 6, dtype=torch.complex64, device=TPU)
        target[:, ::2].normal_()
        target[:, 1::2].uniform_(1, 2)
        values = target.cpu()
    assert (values[:, ::2] != 0).all()
    assert (values[:, 1::2].real >= 1).all() and (values[:, 1::2].imag < 2).all()


# ---- bernoulli ----


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [torch.int32, torch.int64, torch.bool])
def test_bernoulli_float_p_frequency(dtype):
    samples = torch.empty(N, dtype=dtype, device=TPU).bernoulli_(0.3).cpu()
    assert samples.dtype == dtype
    values = samples.double()
    assert set(values.unique().tolist()) <= {0.0, 1.0}
    assert_near(values.mean().item(), 0.3, math.sqrt(0.21 / N), "frequency")


def test_bernoulli_tensor_p_per_element():
    p = torch.tensor([0.0, 0.1, 0.5, 0.9, 1.0]).repeat(N // 5)
    samples = torch.bernoulli(p.to(TPU)).cpu().view(-1, 5)
    assert samples.dtype == torch.float32
    assert (samples[:, 0] == 0).all() and (samples[:, 4] == 1).all()
    for column, q in [(1, 0.1), (2, 0.5), (3, 0.9)]:
        assert_near(samples[:, column].mean().item(), q, math.sqrt(q * (1 - q) / (N / 5)), f"p={q}")


def test_bernoulli_tensor_p_broadcasts_and_other_dtypes():
    target = torch.empty(N // 10, 10, dtype=torch.bfloat16, device=TPU)
    p = torch.linspace(0, 1, 10, dtype=torch.float64)
    samples = target.bernoulli_(p.to(TPU)).cpu().double()
    assert (samples[:, 0] == 0).all() and (samples[:, -1] == 1).all()
    assert_near(samples[:, 5].mean().item(), 5 / 9, math.sqrt(0.25 / (N / 10)), "p=5/9")
    out = torch.empty(0, dtype=torch.float16, device=TPU)
    torch.bernoulli(torch.full((64,), 0.5).to(TPU), out=out)
    assert out.shape == (64,) and out.dtype == torch.float16


def test_bernoulli_p_functional():
    x = torch.zeros(N).to(TPU)
    samples = torch.bernoulli(x, 0.75).cpu()
    assert_near(samples.double().mean().item(), 0.75, math.sqrt(0.1875 / N), "frequency")


def test_bernoulli_errors():
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\], but got p=1.5"):
        torch.empty(3, device=TPU).bernoulli_(1.5)
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\], but got p=-0.1"):
        torch.empty(3, device=TPU).bernoulli_(-0.1)


# ---- randint / random_ ----


@pytest.mark.parametrize(
    "dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.float32, torch.bfloat16]
)
def test_randint_covers_range_uniformly(dtype):
    low, high = (-3, 4) if dtype != torch.uint8 else (3, 10)
    samples = draw(torch.randint, low, high, (N,), dtype=dtype)
    assert samples.dtype == dtype
    values = samples.long()
    assert values.min() == low and values.max() == high - 1
    counts = torch.bincount(values - low, minlength=high - low)
    assert counts.numel() == high - low and (counts > 0).all()
    expected = torch.full((high - low,), N / (high - low), dtype=torch.float64)
    # 6 degrees of freedom: chi-square sd sqrt(12); 50 is past 12 sigma
    assert chi_square(counts, expected) < 50


def test_randint_large_and_negative_ranges():
    samples = draw(torch.randint, -(2**40), 2**40, (N,))
    assert samples.min() >= -(2**40) and samples.max() < 2**40
    assert_near(samples.double().mean().item() / 2**40, 0, 1 / math.sqrt(3 * N), "mean")
    assert (samples < 0).any() and (samples > 0).any()
    big = draw(torch.randint, 2**62, 2**63 - 1, (1000,))
    assert (big >= 2**62).all()


def test_randint_errors():
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to', but got from=5 >= to=3"):
        torch.randint(5, 3, (4,), device=TPU)
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to', but got from=2 >= to=2"):
        torch.randint(2, 2, (4,), device=TPU)


def test_random_from_to_errors_match_cpu():
    cases = [
        (torch.float32, (5, 3)),
        (torch.uint8, (-1, 3)),
        (torch.int8, (0, 1000)),
        (torch.int16, (-40000, 0)),
        (torch.bool, (0, 3)),
        (torch.float32, (0,)),
    ]
    for dtype, args in cases:
        with pytest.raises(RuntimeError) as expected:
            torch.empty(3, dtype=dtype).random_(*args)
        with pytest.raises(RuntimeError) as actual:
            torch.empty(3, dtype=dtype, device=TPU).random_(*args)
        assert str(expected.value).split("\n")[0] in str(actual.value), (dtype, args)


@pytest.mark.parametrize(
    "dtype, high",
    [
        (torch.bool, 1),
        (torch.uint8, 255),
        (torch.int8, 127),
        (torch.int16, 32767),
        (torch.int32, 2**31 - 1),
        (torch.int64, 2**63 - 1),
        (torch.float32, 2**24),
        (torch.bfloat16, 2**8),
        (torch.float16, 2**11),
        (torch.float64, 2**53),
    ],
)
def test_random_default_range_per_dtype(dtype, high):
    samples = torch.empty(N, dtype=dtype, device=TPU).random_().cpu()
    assert samples.dtype == dtype
    values = samples.double() if dtype.is_floating_point else samples.long()
    assert values.min() >= 0 and values.max() <= high
    if dtype.is_floating_point:
        assert (values == values.round()).all()
    # the draws fill the range: mean high / 2 (sd of {0..high}: sqrt(((high + 1)^2 - 1) / 12)),
    # and the top eighth is reached
    spread = math.sqrt(((high + 1) ** 2 - 1) / 12)
    assert_near(values.double().mean().item() / high, 0.5, spread / high / math.sqrt(N), "mean")
    assert values.double().max() >= high * 7 / 8


def test_random_to_and_from_only():
    to_only = torch.empty(N, dtype=torch.int32, device=TPU).random_(10).cpu()
    assert to_only.min() == 0 and to_only.max() == 9
    from_only = torch.empty(N, dtype=torch.int16, device=TPU).random_(30000, None).cpu()
    assert from_only.min() >= 30000 and from_only.max() <= 32767 and from_only.max() > 32700
    float_from = torch.empty(N, dtype=torch.bfloat16, device=TPU).random_(200, None).cpu().double()
    assert float_from.min() >= 200 and float_from.max() <= 256


def test_random_full_64_bit_range():
    samples = torch.empty(N, dtype=torch.int64, device=TPU).random_(-(2**63), None).cpu()
    assert (samples < -(2**62)).any() and (samples > 2**62).any()
    assert_near((samples < 0).double().mean().item(), 0.5, 0.5 / math.sqrt(N), "sign")


def test_random_functional_variant_leaves_input():
    x = torch.zeros(1000, dtype=torch.int64).to(TPU)
    result = getattr(torch.ops.aten.random, "from")(x, 5, 9).cpu()
    assert result.min() == 5 and result.max() == 8
    result = torch.ops.aten.random.to(x, 3).cpu()
    assert result.min() == 0 and result.max() == 2
    assert (x.cpu() == 0).all()


# ---- views: random ops write through non-contiguous targets ----


def test_random_ops_on_noncontiguous_targets():
    base = torch.zeros(40, 60).to(TPU)
    base.t().uniform_(2, 3)
    values = base.cpu()
    assert (values >= 2).all() and (values < 3).all()
    assert values.unique().numel() > 2000

    strided = torch.zeros(50, 80).to(TPU)
    strided[:, ::2].normal_(10, 1)
    strided[:, 1::4].bernoulli_(1.0)
    values = strided.cpu()
    assert (values[:, 1::4] == 1).all() and (values[:, 3::4] == 0).all()
    assert_near(values[:, ::2].double().mean().item(), 10, 1 / math.sqrt(2000), "mean")

    ints = torch.zeros(30, 30, dtype=torch.int32).to(TPU)
    ints.t()[::3].random_(1, 5)
    values = ints.cpu()
    assert (values.t()[::3] >= 1).all() and (values.t()[::3] < 5).all()
    mask = torch.ones(30, 30, dtype=torch.bool)
    mask.t()[::3] = False
    assert (values[mask] == 0).all()

    view = noncontiguous(torch.zeros(64, 32).to(TPU))
    view.exponential_(2.0)
    assert (view.cpu() >= 0).all() and view.cpu().min() < 0.01


# ---- uniform errors ----


def test_uniform_errors_match_cpu():
    cases = [
        (torch.float32, (2, 1)),
        (torch.float32, (0, float("inf"))),
        (torch.float32, (-3e38, 3e38)),
        (torch.float16, (0, 70000)),
        (torch.bfloat16, (float("nan"), 1)),
    ]
    for dtype, args in cases:
        with pytest.raises(RuntimeError) as expected:
            torch.empty(3, dtype=dtype).uniform_(*args)
        with pytest.raises(RuntimeError) as actual:
            torch.empty(3, dtype=dtype, device=TPU).uniform_(*args)
        assert str(expected.value).split("\n")[0] in str(actual.value), (dtype, args)


def test_uniform_integer_target_raises():
    with pytest.raises(NotImplementedError, match="\"check_uniform_bounds\" not implemented for 'Int'"):
        torch.empty(3, dtype=torch.int32, device=TPU).uniform_()


# ---- exponential ----


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_exponential_statistics(dtype):
    samples = torch.empty(N, dtype=dtype, device=TPU).exponential_(4.0).cpu().double()
    assert (samples >= 0).all()
    assert_near(samples.mean().item(), 0.25, 0.25 / math.sqrt(N) + 2e-3, "mean")
    with pytest.raises(RuntimeError, match="exponential_ expects lambda > 0.0, but found lambda=-1"):
        torch.empty(3, device=TPU).exponential_(-1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int64])
def test_geometric_statistics(dtype):
    samples = torch.empty(N, dtype=dtype, device=TPU).geometric_(0.2).cpu()
    assert samples.dtype == dtype
    values = samples.double()
    assert values.min() == 1 and (values == values.round()).all()
    # mean 1/p = 5, variance (1 - p) / p^2 = 20
    assert_near(values.mean().item(), 5, math.sqrt(20 / N), "mean")
    assert_near((values == 1).double().mean().item(), 0.2, math.sqrt(0.16 / N), "P(1)")
    with pytest.raises(RuntimeError, match=r"geometric_ expects p to be in \(0, 1\), but got p=1.5"):
        torch.empty(3, device=TPU).geometric_(1.5)


def test_log_normal_statistics():
    samples = torch.empty(N, device=TPU).log_normal_(0.5, 0.3).cpu().double()
    assert (samples > 0).all()
    assert_near(samples.log().mean().item(), 0.5, 0.3 / math.sqrt(N), "mean of log")
    assert_near(samples.log().std().item(), 0.3, 0.3 / math.sqrt(2 * N), "std of log")
    with pytest.raises(RuntimeError, match="log_normal_ expects std > 0.0, but found std=-1"):
        torch.empty(3, device=TPU).log_normal_(0, -1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_cauchy_statistics(dtype):
    samples = torch.empty(N, dtype=dtype, device=TPU).cauchy_(2.0, 0.5).cpu().double()
    # the quartiles are median -+ sigma
    for threshold, p in [(0.5, 0.5), (2.5, 2 / math.pi * math.atan(5))]:
        within = ((samples - 2).abs() < threshold).double().mean().item()
        assert_near(within, p, math.sqrt(p * (1 - p) / N), f"P(|x - median| < {threshold})")
    with pytest.raises(RuntimeError, match="cauchy_ expects sigma > 0.0, but found sigma=-1"):
        torch.empty(3, device=TPU).cauchy_(0, -1)


# ---- randperm ----


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32, torch.int16])
@pytest.mark.parametrize("n", [1, 2, 17, 1000])
def test_randperm_is_a_permutation(n, dtype):
    perm = draw(torch.randperm, n, dtype=dtype)
    assert perm.dtype == dtype and perm.shape == (n,)
    assert torch.equal(perm.long().sort().values, torch.arange(n))


def test_randperm_positions_are_uniform():
    trials = 2000
    perms = torch.stack([draw(torch.randperm, 6) for _ in range(trials)])
    counts = torch.bincount(perms[:, 0], minlength=6)
    expected = torch.full((6,), trials / 6, dtype=torch.float64)
    assert chi_square(counts, expected) < 50
    assert draw(torch.randperm, 0).shape == (0,)


# ---- multinomial ----


def test_multinomial_with_replacement_frequencies():
    weights = torch.tensor([1.0, 0.0, 3.0, 6.0])
    samples = torch.multinomial(weights.to(TPU), N, replacement=True).cpu()
    assert samples.dtype == torch.int64 and samples.shape == (N,)
    counts = torch.bincount(samples, minlength=4)
    assert counts[1] == 0
    expected = weights.double() / weights.sum() * N
    nonzero = expected > 0
    assert chi_square(counts[nonzero], expected[nonzero]) < 50


def test_multinomial_without_replacement_2d():
    weights = torch.rand(64, 10) + 0.01
    weights[:, 3] = 0
    samples = torch.multinomial(weights.to(TPU), 9).cpu()
    assert samples.shape == (64, 9)
    for row in samples:
        assert row.unique().numel() == 9 and 3 not in row.tolist()
    # the first draw without replacement follows the weights
    heavy = torch.tensor([0.05, 0.05, 0.9]).repeat(2000, 1)
    first = torch.multinomial(heavy.to(TPU), 2).cpu()[:, 0]
    assert_near((first == 2).double().mean().item(), 0.9, math.sqrt(0.09 / 2000), "P(first = 2)")


def test_multinomial_bfloat16_weights_and_errors():
    samples = torch.multinomial(torch.tensor([0.0, 1.0], dtype=torch.bfloat16).to(TPU), 50, True).cpu()
    assert (samples == 1).all()
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist.size"):
        torch.multinomial(torch.ones(3).to(TPU), 4)
    with pytest.raises(RuntimeError, match="multinomial only supports floating-point dtypes for input, got: Int"):
        torch.multinomial(torch.ones(3, dtype=torch.int32).to(TPU), 2)
