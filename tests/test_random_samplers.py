"""The rejection samplers behind torch.distributions on tpu (_standard_gamma, _sample_dirichlet,
poisson, binomial) and the reparameterization gradients of Gamma and Dirichlet samples
(_standard_gamma_grad, _dirichlet_grad).

The tpu generator is not the CPU's, so samples are compared with the CPU's sampler statistically:
by the two-sample Kolmogorov-Smirnov statistic against a CPU sample of the same parameters, and by
the mean against the exact one. Every bound is one that a correct sampler exceeds with probability
below 1e-6 (a false failure is rarer than one in a million runs; and the draws are seeded, so a run
is repeatable), while a sampler off by a few percent in scale or using the wrong branch's
distribution exceeds it many times over. The gradients are deterministic and compared with the
CPU's values elementwise.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from conftest import TPU, assert_close, raises_like_cpu

pytestmark = pytest.mark.usefixtures("no_cpu_fallback")

N = 50_000
# Kolmogorov's limit law: a correct two-sample KS statistic of sizes n and m exceeds
# c sqrt((n + m) / (n m)) with probability 2 exp(-2 c^2); c = 2.69 makes that 1e-6. (For discrete
# distributions the statistic is smaller still, so the bound is conservative there.) With n = m =
# 50 000 the bound is 0.017: a Gamma(3) sample scaled by 1.05 is already at 0.034.
KS_C = math.sqrt(-math.log(1e-6 / 2) / 2)
# A mean more than 5.3 standard errors from the true one has probability below 1e-7 (normal tail).
MEAN_SIGMAS = 5.3


def ks_statistic(a: torch.Tensor, b: torch.Tensor) -> float:
    """sup |F_a - F_b| over the pooled values (exact with ties)."""
    a, b = a.double().flatten().sort().values, b.double().flatten().sort().values
    points = torch.cat([a, b])
    fa = torch.searchsorted(a, points, right=True).double() / a.numel()
    fb = torch.searchsorted(b, points, right=True).double() / b.numel()
    return (fa - fb).abs().max().item()


def assert_same_distribution(tpu_sample: torch.Tensor, cpu_sample: torch.Tensor, what: str = "") -> None:
    n, m = tpu_sample.numel(), cpu_sample.numel()
    bound = KS_C * math.sqrt((n + m) / (n * m))
    statistic = ks_statistic(tpu_sample, cpu_sample)
    assert statistic < bound, f"{what}: KS statistic {statistic:.4f} >= {bound:.4f}"


def assert_mean(sample: torch.Tensor, mean: float, variance: float, what: str = "") -> None:
    """The sample mean lies within MEAN_SIGMAS standard errors of `mean`."""
    error = MEAN_SIGMAS * math.sqrt(variance / sample.numel())
    actual = sample.double().mean().item()
    assert abs(actual - mean) <= error, f"{what}: mean {actual} vs {mean} (+- {error})"


def on_tpu(fn, *tensors, **kwargs):
    return fn(*[t.to(TPU) for t in tensors], **kwargs).cpu()


# ---- _standard_gamma and poisson over their parameter's range ----

# Gamma(alpha, 1) and Poisson(rate) both have mean = variance = their parameter. The parameters
# take every branch: the boost below alpha = 1, and the product of uniforms below rate 10 and PTRS
# above.
MEAN_IS_VARIANCE = {"gamma": [0.1, 0.5, 1.0, 3.0, 50.0], "poisson": [0.5, 5.0, 30.0, 1e4]}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name, parameter", [(name, p) for name, ps in MEAN_IS_VARIANCE.items() for p in ps])
def test_sampler_matches_cpu(name, parameter, dtype):
    sampler = {"gamma": torch._standard_gamma, "poisson": torch.poisson}[name]
    parameters = torch.full((N,), parameter, dtype=dtype)
    torch.manual_seed(1)
    sample = on_tpu(sampler, parameters)
    assert sample.dtype == dtype and sample.shape == (N,) and bool(sample.isfinite().all())
    if name == "gamma":
        assert bool((sample >= torch.finfo(dtype).tiny).all())
    else:
        assert torch.equal(sample, sample.round()) and bool((sample >= 0).all())
    what = f"{name} {parameter}"
    assert_same_distribution(sample, sampler(parameters), what)
    assert_mean(sample, parameter, parameter, what)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("alpha", [0.5, 3.0, 50.0])
def test_standard_gamma_half_types(alpha, dtype):
    # The CPU has no 16-bit kernel: its f32 sample rounded to the dtype, with the dtype's smallest
    # normal as the floor (the CPU's max(min, sample) in that dtype), is the reference.
    torch.manual_seed(2)
    sample = on_tpu(torch._standard_gamma, torch.full((N,), alpha, dtype=dtype))
    assert sample.dtype == dtype
    tiny = torch.finfo(dtype).tiny
    assert bool((sample >= tiny).all())
    reference = torch._standard_gamma(torch.full((N,), alpha)).to(dtype).clamp(min=tiny)
    assert_same_distribution(sample, reference, f"alpha {alpha}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_standard_gamma_edge_values(dtype):
    # The CPU gives the smallest normal for alpha 0 (its sampler returns 0), NaN and alpha <= -2/3
    # (its loop accepts NaN, and max(min, NaN) is min), and inf for an infinite alpha.
    alpha = torch.tensor([0.0, float("nan"), -1.0, -0.7, float("inf"), 0.0], dtype=dtype)
    expected = torch._standard_gamma(alpha)
    assert torch.equal(on_tpu(torch._standard_gamma, alpha), expected)
    assert expected[0] == torch.finfo(dtype).tiny


def test_standard_gamma_negative_alpha_above_minus_two_thirds():
    # alpha in (-2/3, 0) is boosted to alpha + 1 > 1/3 and scaled by U^(1/alpha), as on the CPU.
    concentration = torch.full((N,), -0.25)
    torch.manual_seed(3)
    sample = on_tpu(torch._standard_gamma, concentration)
    finite = sample[sample.isfinite()]
    reference = torch._standard_gamma(concentration)
    assert_same_distribution(finite, reference[reference.isfinite()], "alpha -0.25")


# ---- _sample_dirichlet ----

CONCENTRATION = [0.1, 0.5, 1.0, 3.0, 50.0]
ROWS = 20_000


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sample_dirichlet_matches_cpu(dtype):
    concentration = torch.tensor(CONCENTRATION, dtype=dtype).expand(ROWS, -1).contiguous()
    torch.manual_seed(4)
    sample = on_tpu(torch._sample_dirichlet, concentration)
    assert sample.dtype == dtype and sample.shape == concentration.shape
    torch.testing.assert_close(sample.double().sum(-1), torch.ones(ROWS, dtype=torch.float64), rtol=0, atol=1e-5)
    reference = torch._sample_dirichlet(concentration)
    total = sum(CONCENTRATION)
    for i, alpha in enumerate(CONCENTRATION):
        # Each component is Beta(alpha, total - alpha).
        mean = alpha / total
        variance = mean * (1 - mean) / (total + 1)
        assert_same_distribution(sample[:, i], reference[:, i], f"component {i}")
        assert_mean(sample[:, i], mean, variance, f"component {i}")


def test_sample_dirichlet_bfloat16():
    # Against the CPU's f32 sample rounded to bf16 and clamped to [tiny, largest below 1] as the
    # CPU clamps its results in their own dtype.
    concentration = torch.tensor([0.5, 1.0, 3.0]).expand(ROWS, -1)
    torch.manual_seed(5)
    sample = on_tpu(torch._sample_dirichlet, concentration.to(torch.bfloat16))
    assert sample.dtype == torch.bfloat16
    info = torch.finfo(torch.bfloat16)
    reference = (
        torch._sample_dirichlet(concentration.contiguous()).to(torch.bfloat16).clamp(info.tiny, 1 - info.eps / 2)
    )
    for i in range(3):
        assert_same_distribution(sample[:, i], reference[:, i], f"component {i}")


def test_sample_dirichlet_underflowing_rows_are_uniform_as_on_the_cpu():
    # The CPU draws the gammas in double, each at least DBL_MIN: with alpha = 1e-3 a gamma falls
    # below that with probability about 1/2, and where a row's three all do, the row is exactly
    # (1/3, 1/3, 1/3). The frequency of such rows (about 0.12) matches the CPU's within 5.3
    # standard errors of a difference of two proportions.
    concentration = torch.full((ROWS, 3), 1e-3)
    torch.manual_seed(6)
    sample = on_tpu(torch._sample_dirichlet, concentration)
    reference = torch._sample_dirichlet(concentration)
    third = torch.tensor(1 / 3)
    tpu_uniform = (sample == third).all(-1).double().mean().item()
    cpu_uniform = (reference == third).all(-1).double().mean().item()
    p = (tpu_uniform + cpu_uniform) / 2
    assert 0.05 < cpu_uniform < 0.2
    assert abs(tpu_uniform - cpu_uniform) < MEAN_SIGMAS * math.sqrt(2 * p * (1 - p) / ROWS)
    # Elsewhere one component takes nearly everything, as on the CPU.
    assert_same_distribution(sample.max(-1).values, reference.max(-1).values, "largest component")


def test_sample_dirichlet_edge_values():
    # All underflowing (tiny alpha), alpha 0 and NaN (their gammas are DBL_MIN on the CPU), a
    # single category and a 0-d concentration: the CPU's values exactly.
    for concentration in [
        torch.full((4, 3), 1e-6),
        torch.tensor([[0.0, 1.0], [0.0, 0.0], [float("nan"), 1.0]]),
        torch.tensor([[5.0], [0.5]]),
        torch.tensor(2.0),
        torch.tensor([[1e-6, 1e-6], [0.0, 0.0]], dtype=torch.float64),
    ]:
        assert torch.equal(on_tpu(torch._sample_dirichlet, concentration), torch._sample_dirichlet(concentration))


# ---- poisson ----


def test_poisson_zero_rate_and_mixed_rates():
    rates = torch.tensor([0.0, 9.99, 10.0, 0.0, 1e6]).repeat(N // 5)
    torch.manual_seed(8)
    sample = on_tpu(torch.poisson, rates).view(-1, 5)
    reference = torch.poisson(rates).view(-1, 5)
    assert torch.equal(sample[:, 0], torch.zeros(N // 5)) and torch.equal(sample[:, 3], torch.zeros(N // 5))
    for column in (1, 2, 4):  # either side of the switch to PTRS at 10, and a rate of 1e6
        assert_same_distribution(sample[:, column], reference[:, column], f"column {column}")
        rate = rates[column].item()
        assert_mean(sample[:, column], rate, rate, f"rate {rate}")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_poisson_half_types(dtype):
    # Counts up to about 60 are exact in both dtypes; the reference is the CPU's f32 sample, cast.
    rates = torch.tensor([0.5, 5.0, 30.0]).repeat(N // 3)
    torch.manual_seed(9)
    sample = on_tpu(torch.poisson, rates.to(dtype)).view(-1, 3)
    assert sample.dtype == dtype
    reference = torch.poisson(rates).to(dtype).view(-1, 3)
    for column in range(3):
        assert_same_distribution(sample[:, column], reference[:, column], f"column {column}")


def test_poisson_integer_rate_raises():
    with pytest.raises(NotImplementedError, match="\"poisson_cpu\" not implemented for 'Long'"):
        torch.poisson(torch.ones(3, dtype=torch.long).to(TPU))


# A negative or NaN rate raises the CPU's error at the next synchronization (the device-side
# checks, tests/test_device_checks.py).


# ---- binomial ----

COUNTS = [0.0, 1.0, 5.0, 100.0, 1e5]
PROBS = [0.0, 0.05, 0.5, 0.97, 1.0]
BINOMIAL_N = 20_000


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("count", COUNTS)
def test_binomial_matches_cpu(count, dtype):
    # One program draws every probability: a column per probability.
    counts = torch.full((BINOMIAL_N, len(PROBS)), count, dtype=dtype)
    probs = torch.tensor(PROBS, dtype=dtype).expand(BINOMIAL_N, -1).contiguous()
    torch.manual_seed(10)
    sample = on_tpu(torch.binomial, counts, probs)
    reference = torch.binomial(counts, probs)
    assert sample.dtype == dtype
    assert torch.equal(sample, sample.round()) and bool((sample >= 0).all() and (sample <= count).all())
    for column, p in enumerate(PROBS):
        if count == 0 or p in (0.0, 1.0):  # no draw: 0 or count exactly, as on the CPU
            assert torch.equal(sample[:, column], reference[:, column])
            continue
        what = f"count {count}, p {p}"
        assert_same_distribution(sample[:, column], reference[:, column], what)
        p_value = probs[0, column].item()
        assert_mean(sample[:, column], count * p_value, count * p_value * (1 - p_value), what)


def test_binomial_broadcasts_count_and_prob():
    # count (3,) against prob (rows, 1): the CPU's result takes count's shape and is resized to
    # the broadcast shape, with its warning.
    counts = torch.tensor([5.0, 100.0, 1e4])
    probs = torch.full((BINOMIAL_N, 1), 0.3)
    torch.manual_seed(11)
    with pytest.warns(UserWarning, match="resized"):
        sample = on_tpu(torch.binomial, counts, probs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = torch.binomial(counts, probs)
    assert sample.shape == reference.shape == (BINOMIAL_N, 3)
    for column, count in enumerate(counts.tolist()):
        assert_same_distribution(sample[:, column], reference[:, column], f"count {count}")
        assert_mean(sample[:, column], 0.3 * count, 0.21 * count, f"count {count}")


def test_binomial_edge_values():
    # The CPU's cases before drawing: 0 for count <= 0 or prob <= 0, count for prob >= 1, NaN for a
    # NaN prob (a NaN count would loop forever on the CPU; it is not compared).
    counts = torch.tensor([5.0, -1.0, 3.0, 4.0, 7.0, float("nan"), 2.0, float("inf")])
    probs = torch.tensor([float("nan"), 0.5, 1.5, -0.5, 0.0, 0.0, 1.0, 1.0])
    assert torch.equal(
        on_tpu(torch.binomial, counts, probs).nan_to_num(-7), torch.binomial(counts, probs).nan_to_num(-7)
    )


def test_binomial_bfloat16():
    counts = torch.tensor([5.0, 100.0, 100.0]).repeat(BINOMIAL_N, 1)
    probs = torch.tensor([0.5, 0.05, 0.97]).repeat(BINOMIAL_N, 1)
    torch.manual_seed(12)
    sample = on_tpu(torch.binomial, counts.bfloat16(), probs.bfloat16())
    assert sample.dtype == torch.bfloat16
    # bf16 probabilities are not the f32 ones: the reference draws with the rounded ones.
    reference = torch.binomial(counts, probs.bfloat16().float()).bfloat16()
    for column in range(3):
        assert_same_distribution(sample[:, column], reference[:, column], f"column {column}")


@pytest.mark.parametrize(
    "make",
    [
        lambda device: torch.binomial(torch.ones(2, dtype=torch.long, device=device), torch.ones(2, device=device)),
        lambda device: torch.binomial(torch.ones(2, device=device), torch.ones(2, dtype=torch.long, device=device)),
        lambda device: torch.binomial(torch.ones(2, device=device), torch.ones(3, device=device) / 2),
        lambda device: torch.binomial(torch.ones(2, device=device), torch.ones(2, dtype=torch.float64, device=device)),
    ],
    ids=["int count", "int prob", "shapes", "dtypes"],
)
def test_binomial_errors_match_cpu(make):
    raises_like_cpu(lambda device: make(device).cpu())


# ---- reproducibility, generators, shapes ----

SAMPLERS = {
    "gamma": lambda g: torch._standard_gamma(torch.full((500,), 0.7, device=TPU), generator=g),
    "dirichlet": lambda g: torch._sample_dirichlet(torch.full((100, 5), 0.7, device=TPU), generator=g),
    "poisson": lambda g: torch.poisson(torch.linspace(0, 40, 500, device=TPU), generator=g),
    "binomial": lambda g: torch.binomial(
        torch.full((500,), 50.0, device=TPU), torch.linspace(0, 1, 500, device=TPU), generator=g
    ),
}


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_seed_replays_and_draws_differ(name):
    call = SAMPLERS[name]
    torch.manual_seed(1234)
    first, second = call(None).cpu(), call(None).cpu()
    torch.manual_seed(1234)
    assert torch.equal(call(None).cpu(), first)
    assert torch.equal(call(None).cpu(), second)
    assert not torch.equal(first, second), "consecutive draws must differ"
    torch.manual_seed(4321)
    assert not torch.equal(call(None).cpu(), first), "another seed must give another draw"


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_generator_argument(name):
    call = SAMPLERS[name]
    generator = torch.Generator(device=TPU)
    generator.manual_seed(3)
    first = call(generator).cpu()
    torch.manual_seed(99)
    call(None).cpu()  # the default generator advancing does not touch `generator`
    second = call(generator).cpu()
    generator.manual_seed(3)
    assert torch.equal(call(generator).cpu(), first)
    assert torch.equal(call(generator).cpu(), second)
    assert not torch.equal(first, second)


def test_cpu_generator_is_rejected():
    with pytest.raises(RuntimeError, match="Expected a 'tpu' device type for generator but found 'cpu'"):
        torch._standard_gamma(torch.ones(3, device=TPU), generator=torch.Generator())


SHAPED = {
    "gamma": lambda x: torch._standard_gamma(x + 1),
    "dirichlet": lambda x: torch._sample_dirichlet(x + 1),
    "poisson": lambda x: torch.poisson(x + 1),
    "binomial": lambda x: torch.binomial(x + 10, x + 0.5),
}


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4), ()], ids=str)
@pytest.mark.parametrize("name", list(SHAPED))
def test_empty_and_scalar_shapes(name, shape):
    x = torch.zeros(shape)
    expected = SHAPED[name](x)
    actual = SHAPED[name](x.to(TPU))
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    assert bool(actual.cpu().isfinite().all())


@pytest.mark.parametrize("op", ["gamma", "dirichlet"])
def test_integer_input_raises(op):
    fn, kernel = {"gamma": (torch._standard_gamma, "gamma_cpu"), "dirichlet": (torch._sample_dirichlet, "dirichlet")}[
        op
    ]
    with pytest.raises(NotImplementedError, match=f"\"{kernel}\" not implemented for 'Long'"):
        fn(torch.ones(3, dtype=torch.long).to(TPU))


# ---- the distributions API ----

D = torch.distributions
DISTRIBUTIONS = {
    "Gamma": lambda dev: D.Gamma(torch.tensor([0.5, 3.0], device=dev), torch.tensor([2.0, 0.5], device=dev)),
    "Chi2": lambda dev: D.Chi2(torch.tensor([1.0, 7.0], device=dev)),
    "StudentT": lambda dev: D.StudentT(torch.tensor([2.5, 30.0], device=dev), torch.tensor([1.0, -2.0], device=dev)),
    "Beta": lambda dev: D.Beta(torch.tensor([0.5, 2.0], device=dev), torch.tensor([0.7, 5.0], device=dev)),
    "Dirichlet": lambda dev: D.Dirichlet(torch.tensor([0.3, 1.0, 4.0], device=dev)),
    "Poisson": lambda dev: D.Poisson(torch.tensor([0.5, 30.0], device=dev)),
    "Binomial": lambda dev: D.Binomial(torch.tensor([10.0, 1000.0], device=dev), torch.tensor([0.3, 0.9], device=dev)),
}


@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_distribution_sample(name):
    torch.manual_seed(13)
    sample = DISTRIBUTIONS[name](TPU).sample((ROWS,))
    assert sample.device.type == "tpu"
    sample = sample.cpu()
    reference = DISTRIBUTIONS[name]("cpu").sample((ROWS,))
    assert sample.shape == reference.shape
    for column in range(sample.shape[-1]):
        assert_same_distribution(sample[:, column], reference[:, column], f"{name} column {column}")


def test_gamma_rsample_gradient():
    # Gamma(alpha, 1).rsample's gradient is _standard_gamma_grad(alpha, sample): the CPU's on the
    # tpu's samples.
    alpha = torch.tensor([0.2, 1.0, 4.0, 30.0]).repeat(2000)
    upstream = torch.rand(alpha.shape)
    concentration = alpha.to(TPU).requires_grad_()
    sample = D.Gamma(concentration, torch.ones((), device=TPU)).rsample()
    sample.backward(upstream.to(TPU))
    expected = torch._standard_gamma_grad(alpha, sample.detach().cpu()) * upstream
    assert_close(concentration.grad, expected, rtol=1e-4, atol=1e-6)


def test_dirichlet_rsample_gradient():
    concentration_cpu = torch.tensor([0.3, 1.0, 4.0, 12.0]).expand(2000, -1).contiguous()
    upstream = torch.rand(concentration_cpu.shape)
    concentration = concentration_cpu.to(TPU).requires_grad_()
    sample = D.Dirichlet(concentration).rsample()
    sample.backward(upstream.to(TPU))
    x = sample.detach().cpu()
    expected = torch.distributions.dirichlet._Dirichlet_backward(x, concentration_cpu, upstream)
    assert_close(concentration.grad, expected, rtol=1e-4, atol=1e-5)


def test_beta_rsample_gradient():
    # Beta is a Dirichlet over (x, 1 - x) read at x: the gradient flows through _dirichlet_grad at
    # both components, the second at the tpu's 1 - x (within an ulp of the sample's own).
    a_cpu, b_cpu = torch.tensor([0.5, 2.0, 9.0]).repeat(2000), torch.tensor([0.7, 5.0, 8.0]).repeat(2000)
    a, b = a_cpu.to(TPU).requires_grad_(), b_cpu.to(TPU).requires_grad_()
    sample = D.Beta(a, b).rsample()
    sample.sum().backward()
    x = sample.detach().cpu()
    concentration = torch.stack([a_cpu, b_cpu], -1)
    grad = torch.distributions.dirichlet._Dirichlet_backward(
        torch.stack([x, 1 - x], -1), concentration, torch.stack([torch.ones_like(x), torch.zeros_like(x)], -1)
    )
    assert_close(a.grad, grad[:, 0], rtol=1e-3, atol=1e-5)
    assert_close(b.grad, grad[:, 1], rtol=1e-3, atol=1e-5)


# ---- the gradients, elementwise ----

# _standard_gamma_grad runs in double for every dtype, as on the CPU: f32 results are the CPU's
# rounded (a last-bit difference at most), f64 ones agree to about 1e-13 (a few of the CPU's
# cancelling terms are rearranged). _dirichlet_grad's two series run in f32 for f32 inputs, as on
# the CPU, where they lose up to 3e-4 to cancellation; XLA fuses their multiply-adds into FMAs,
# which round once where the CPU rounds twice, so f32 results differ from the CPU's by up to 4e-5.
# In f64 its saddle point expansion takes a difference of logarithms in a cancellation-free form
# where the CPU's loses digits, so results differ by up to about 1e-10. A wrong coefficient,
# branch or threshold is off by 1e-3 or more.
GAMMA_GRAD_TOLERANCES = {torch.float32: dict(rtol=1.3e-6, atol=1e-30), torch.float64: dict(rtol=1e-11, atol=1e-300)}
DIRICHLET_GRAD_TOLERANCES = {torch.float32: dict(rtol=1e-4, atol=1e-30), torch.float64: dict(rtol=1e-9, atol=1e-300)}


def tpu_call(fn, *tensors):
    return fn(*[t.to(TPU) for t in tensors])


def gamma_grad_inputs(dtype, n=6000, seed=0):
    """alpha log-uniform over [1e-2, 1e3]; x a Gamma(alpha) sample for half of them and
    log-uniform over [1e-3, 1e3] for the rest, so that every branch is taken. Pairs where x^alpha
    is below 1e-300 are left out: there the CPU's double x^alpha is subnormal and its result loses
    digits (below 2^-1074 it is 0, which test_standard_gamma_grad_edge_values checks)."""
    generator = torch.Generator().manual_seed(seed)
    alpha = torch.exp(torch.empty(n, dtype=torch.float64).uniform_(math.log(1e-2), math.log(1e3), generator=generator))
    x = torch.exp(torch.empty(n, dtype=torch.float64).uniform_(math.log(1e-3), math.log(1e3), generator=generator))
    x[: n // 2] = torch._standard_gamma(alpha[: n // 2], generator=generator)
    keep = alpha * x.log() > -300 * math.log(10)
    return alpha[keep].to(dtype), x[keep].to(dtype).clamp(min=torch.finfo(dtype).tiny)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_standard_gamma_grad_matches_cpu(dtype):
    alpha, x = gamma_grad_inputs(dtype)
    expected = torch._standard_gamma_grad(alpha, x)
    # every branch: x < 0.8 (series), alpha > 8 within 10% of alpha and outside it, the fit
    assert (x < 0.8).sum() > 100 and ((x >= 0.8) & (alpha > 8) & ((x - alpha).abs() < 0.1 * alpha)).sum() > 100
    assert ((x >= 0.8) & (alpha > 8) & ((x - alpha).abs() > 0.1 * alpha)).sum() > 100
    assert ((x >= 0.8) & (alpha <= 8)).sum() > 100
    assert_close(tpu_call(torch._standard_gamma_grad, alpha, x), expected, **GAMMA_GRAD_TOLERANCES[dtype])


def test_standard_gamma_grad_bfloat16_and_broadcasting():
    # The CPU has no bf16 kernel: the reference is its f32 result on the bf16 inputs, rounded.
    alpha, x = gamma_grad_inputs(torch.float32, n=2000, seed=1)
    alpha, x = alpha.bfloat16(), x.bfloat16()
    reference = torch._standard_gamma_grad(alpha.float(), x.float()).bfloat16()
    assert_close(tpu_call(torch._standard_gamma_grad, alpha, x), reference)
    # broadcasting as the CPU's TensorIterator does (the result resized from self's shape)
    a, s = torch.tensor([[0.5], [3.0], [20.0]]), torch.tensor([0.1, 1.0, 19.0, 40.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = torch._standard_gamma_grad(a, s)
        assert_close(tpu_call(torch._standard_gamma_grad, a, s), expected, **GAMMA_GRAD_TOLERANCES[torch.float32])


def test_standard_gamma_grad_edge_values():
    # x = 0 (0 on the CPU), x^alpha below 2^-1074 (0 there), alpha = 0 (inf), infinite x, NaN.
    alpha = torch.tensor([1.0, 0.5, 3.0, 100.0, 2.0, 0.0, 0.0, float("nan"), 2.0], dtype=torch.float64)
    x = torch.tensor([0.0, 1e-30, 1e-30, 1e-8, float("inf"), 0.5, 0.0, 0.5, float("nan")], dtype=torch.float64)
    for dtype in (torch.float32, torch.float64):
        expected = torch._standard_gamma_grad(alpha.to(dtype), x.to(dtype))
        assert_close(
            tpu_call(torch._standard_gamma_grad, alpha.to(dtype), x.to(dtype)), expected, **GAMMA_GRAD_TOLERANCES[dtype]
        )


def dirichlet_grad_inputs(dtype, n=6000, seed=0):
    """alpha and beta log-uniform over [0.05, 50], x a Beta(alpha, beta) sample."""
    generator = torch.Generator().manual_seed(seed)
    log_range = (math.log(0.05), math.log(50))
    alpha = torch.exp(torch.empty(n, dtype=torch.float64).uniform_(*log_range, generator=generator))
    beta = torch.exp(torch.empty(n, dtype=torch.float64).uniform_(*log_range, generator=generator))
    ga = torch._standard_gamma(alpha, generator=generator)
    gb = torch._standard_gamma(beta, generator=generator)
    x = (ga / (ga + gb)).clamp(1e-6, 1 - 1e-6)
    return x.to(dtype), alpha.to(dtype), (alpha + beta).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dirichlet_grad_matches_cpu(dtype):
    x, alpha, total = dirichlet_grad_inputs(dtype)
    beta = total - alpha
    boundary = total * x * (1 - x)
    near_zero = (x <= 0.5) & (boundary < 2.5)
    near_one = (x >= 0.5) & (boundary < 0.75) & ~near_zero
    rest = ~near_zero & ~near_one
    for branch in [near_zero, near_one, rest & (alpha > 6) & (beta > 6), rest & ~((alpha > 6) & (beta > 6))]:
        assert branch.sum() > 100
    expected = torch._dirichlet_grad(x, alpha, total)
    assert_close(tpu_call(torch._dirichlet_grad, x, alpha, total), expected, **DIRICHLET_GRAD_TOLERANCES[dtype])


def test_dirichlet_grad_bfloat16():
    x, alpha, total = dirichlet_grad_inputs(torch.float32, n=2000, seed=2)
    x, alpha, total = x.bfloat16(), alpha.bfloat16(), total.bfloat16()
    reference = torch._dirichlet_grad(x.float(), alpha.float(), total.float()).bfloat16()
    assert_close(tpu_call(torch._dirichlet_grad, x, alpha, total), reference)


@pytest.mark.parametrize(
    "make",
    [
        lambda device: torch._standard_gamma_grad(torch.ones(2, device=device), torch.ones(3, device=device)),
        lambda device: torch._standard_gamma_grad(
            torch.ones(2, device=device), torch.ones(2, dtype=torch.float64, device=device)
        ),
        lambda device: torch._dirichlet_grad(
            torch.ones(2, device=device), torch.ones(3, device=device), torch.ones(3, device=device)
        ),
        lambda device: torch._dirichlet_grad(
            torch.ones(2, device=device),
            torch.ones(2, device=device),
            torch.ones(2, dtype=torch.float64, device=device),
        ),
    ],
    ids=["gamma shapes", "gamma dtypes", "dirichlet shapes", "dirichlet dtypes"],
)
def test_grad_errors_match_cpu(make):
    raises_like_cpu(lambda device: make(device).cpu())


@pytest.mark.parametrize(
    "op, kernel",
    [
        (lambda t: torch._standard_gamma_grad(t, t), "_standard_gamma_grad_cpu"),
        (lambda t: torch._dirichlet_grad(t, t, t), "_dirichlet_grad_cpu"),
    ],
)
def test_grad_integer_inputs_raise(op, kernel):
    with pytest.raises(NotImplementedError, match=f"\"{kernel}\" not implemented for 'Long'"):
        op(torch.ones(3, dtype=torch.long).to(TPU))
