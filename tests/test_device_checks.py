"""Device-side checks of argument values, against PyTorch on the CPU: binary_cross_entropy's input
and target in [0, 1], bernoulli's p in [0, 1], multinomial's probabilities, and masked_scatter's
source holding at least as many elements as its mask selects, histc's, histogram's and histogramdd's
range taken from data that is not all finite; and the indices of max_unpool (into each output plane) and searchsorted's sorter.
The CPU raises at the
op and CUDA trips a device-side assert; tpu raises the CPU's error at the next synchronization
(debug mode: at the op), and otherwise gives the CPU's results (csrc/aten/device_checks.h).
Index bounds are in test_indexing.py.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_close, make

import torch_tpu

MODES = ["debug", "strict", "defer_and_fuse"]


def bce(x, y):
    return F.binary_cross_entropy(x, y)


def bce_weighted(x, y):
    return F.binary_cross_entropy(x, y, weight=torch.ones_like(x), reduction="none")


def bce_target(x, y):
    return F.binary_cross_entropy(y, x)  # the bad value in the target


def bernoulli(x, _):
    return torch.bernoulli(x)


def bernoulli_tensor_p_(x, _):
    return torch.zeros_like(x).bernoulli_(x)


def normal_std(x, _):
    return torch.normal(torch.zeros_like(x), x)


def normal_mean_float(x, _):
    return torch.normal(0.5, x)


def poisson(x, _):
    return torch.poisson(x * 10)


def multinomial(x, _):
    return torch.multinomial(x.view(2, 3), 2, replacement=True)


def multinomial_without_replacement(x, _):
    return torch.multinomial(x.view(2, 3), 2)


CHECKED = [
    bce,
    bce_weighted,
    bce_target,
    bernoulli,
    bernoulli_tensor_p_,
    normal_std,
    normal_mean_float,
    poisson,
    multinomial,
    multinomial_without_replacement,
]
# Per op, values that break its domain at a random one of 6 elements (others in (0.05, 0.95)).
BAD = {
    "bce": [1.5, -0.25, float("nan")],
    "bernoulli": [1.5, -0.25, float("nan")],
    "multinomial": [-0.25, float("inf"), float("nan")],
    "normal": [-0.25, float("nan"), -1e-30],
    "poisson": [-0.25, float("nan"), -1e-30],
}


def outcome(fn, x, y):
    try:
        return fn(x, y)
    except RuntimeError as error:
        return error


def run_and_read(fn, x, y, mode):
    """Runs fn on tpu copies in `mode` and reads its result back: the error raised, if any."""
    with torch_tpu.execution_mode(mode):
        try:
            fn(x.to(TPU), y.to(TPU)).cpu()
        except RuntimeError as error:
            return error
        return None


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bad_index", range(3))
@pytest.mark.parametrize("fn", CHECKED, ids=lambda f: f.__name__)
def test_a_value_outside_its_domain_raises_the_cpu_error(fn, bad_index, mode):
    x = torch.rand(6) * 0.9 + 0.05
    y = torch.rand(6).round()
    family = next(k for k in BAD if fn.__name__.startswith(k))
    x[torch.randint(0, 6, ()).item()] = BAD[family][bad_index]
    expected = outcome(fn, x.clone(), y)
    assert isinstance(expected, RuntimeError), "the CPU accepts it: the case tests nothing"
    raised = run_and_read(fn, x, y, mode)
    assert isinstance(raised, RuntimeError), f"{mode} raised nothing"
    assert str(raised).splitlines()[0] == str(expected).splitlines()[0]
    if mode != "debug":  # named as the op and the line that recorded it
        assert re.search(r"device-side check of aten::\w+\S* at \S+\.py:\d+", str(raised))
    torch.tpu.synchronize()  # reported once


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("samples, replacement", [(2, True), (1, True), (2, False)])
@pytest.mark.parametrize("second_row", [0.3, -1.0, float("inf")])
def test_a_distribution_with_no_mass_raises_the_cpu_error(mode, samples, replacement, second_row):
    # The CPU checks row by row when it draws several with replacement (the first row's mass comes
    # first), and every entry before any mass otherwise.
    probabilities = torch.tensor([[0.0, 0.0, 0.0], [0.2, second_row, 0.5]])
    expected = outcome(lambda p, _: torch.multinomial(p, samples, replacement), probabilities, None)
    assert isinstance(expected, RuntimeError)
    with torch_tpu.execution_mode(mode):
        with pytest.raises(RuntimeError) as raised:
            torch.multinomial(probabilities.to(TPU), samples, replacement).cpu()
    assert str(raised.value).splitlines()[0] == str(expected).splitlines()[0]


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_values_inside_their_domains_give_the_cpu_results(mode, dtype):
    # The domains' edges (0 and 1) included; bf16's 1.0 is 1.
    x = (torch.rand(4, 6) * 0.9 + 0.05).to(dtype)
    x[0, 0], x[1, 1] = 0.0, 1.0
    y = torch.rand(4, 6).round().to(dtype)
    with torch_tpu.execution_mode(mode):
        loss = F.binary_cross_entropy(x.to(TPU), y.to(TPU))
        draws = torch.bernoulli(x.to(TPU))
        samples = torch.multinomial(x.to(TPU), 3, replacement=True)
        assert_close(
            loss, F.binary_cross_entropy(x, y), **({"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {})
        )
        assert draws[0, 0].item() == 0 and draws[1, 1].item() == 1  # p = 0 never draws, p = 1 always
        assert samples.cpu().min() >= 0 and samples.cpu().max() < 6
        torch.tpu.synchronize()


def test_debug_mode_raises_before_bernoulli_writes():
    target = make((6,)).to(TPU)
    before = target.cpu()
    with torch_tpu.execution_mode("debug"):
        with pytest.raises(RuntimeError, match="Expected p_in >= 0 && p_in <= 1"):
            target.bernoulli_(torch.full((6,), 1.5, device=TPU))
    assert_close(target, before)


def test_a_python_probability_is_checked_at_the_call():
    with pytest.raises(RuntimeError, match=re.escape("bernoulli_ expects p to be in [0, 1], but got p=1.5")):
        torch.zeros(3, device=TPU).bernoulli_(1.5)
    torch.tpu.synchronize()


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_a_repeated_sampling_step_compiles_nothing(mode):
    # A generate()-like loop: each step's checks are part of its program, which repeats.
    logits = make((2, 8)).to(TPU)
    with torch_tpu.execution_mode(mode):
        for step in range(6):
            probabilities = torch.softmax(logits + step, dim=-1)
            torch.multinomial(probabilities, 1).cpu()
            if step == 2:
                compiles = torch_tpu.metrics.snapshot()["compiles"]
        assert torch_tpu.metrics.snapshot()["compiles"] == compiles


def masked_scatter_case(selected, shortfall, broadcast):
    """A [3, 4] tensor, a mask selecting `selected` elements of it (a [4] mask broadcast over the
    rows when `broadcast`: 3x as many), and a source of `shortfall` fewer elements than selected."""
    mask = torch.zeros(4 if broadcast else 12, dtype=torch.bool)
    mask[torch.randperm(mask.numel())[:selected]] = True
    mask = mask if broadcast else mask.view(3, 4)
    ones = selected * (3 if broadcast else 1)
    return make((3, 4)), mask, torch.randn(max(ones - shortfall, 0))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shortfall", [1, 4, 0, -3])  # 0 or less: enough elements
@pytest.mark.parametrize("broadcast", [False, True], ids=["mask", "broadcast_mask"])
def test_masked_scatter_raises_the_cpu_error_when_the_source_runs_out(mode, shortfall, broadcast):
    x, mask, source = masked_scatter_case(torch.randint(2, 5, ()).item(), shortfall, broadcast)
    try:
        expected = x.masked_scatter(mask, source)
    except RuntimeError as error:
        expected = error
    assert isinstance(expected, RuntimeError) == (shortfall > 0)
    with torch_tpu.execution_mode(mode):
        if isinstance(expected, RuntimeError):
            with pytest.raises(RuntimeError) as raised:
                x.to(TPU).masked_scatter(mask.to(TPU), source.to(TPU)).cpu()
            assert str(raised.value).splitlines()[0] == str(expected).splitlines()[0]
            if mode != "debug":
                assert re.search(r"device-side check of aten::masked_scatter_ at \S+\.py:\d+", str(raised.value))
            torch.tpu.synchronize()  # reported once
        else:
            assert_close(x.to(TPU).masked_scatter(mask.to(TPU), source.to(TPU)), expected)


def first_line(error):
    # The sign a NaN prints with is the processor's (x86's default NaN prints "-nan").
    return str(error).splitlines()[0].replace("-nan", "nan")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize(
    "bad",
    [[float("nan")], [float("inf")], [-float("inf")], [-0.0, float("inf")], [float("nan"), -float("inf")]],
    ids=["nan", "inf", "-inf", "min_-0_and_inf", "nan_and_-inf"],
)
def test_histc_raises_the_cpu_error_for_a_data_range_that_is_not_finite(mode, dtype, bad):
    x = make((20,), dtype, -3, 3)
    if bad[0] == -0.0:  # the range's min is -0.0, whose bits are what a passing check holds
        x = x.abs()
    x[torch.randperm(20)[: len(bad)]] = torch.tensor(bad, dtype=dtype)
    with pytest.raises(RuntimeError) as expected:
        torch.histc(x, bins=7)
    with torch_tpu.execution_mode(mode):
        with pytest.raises(RuntimeError) as raised:
            torch.histc(x.to(TPU), bins=7).cpu()
        assert first_line(raised.value) == first_line(expected.value)
        if mode != "debug":
            assert re.search(r"device-side check of aten::histc at \S+\.py:\d+", str(raised.value))
        torch.tpu.synchronize()  # reported once
        # A finite data range, or a given one, is no error: the CPU's counts.
        finite = x.nan_to_num(0.0, 0.0, 0.0)
        assert_close(torch.histc(finite.to(TPU), bins=7), torch.histc(finite, bins=7))
        assert_close(torch.histc(x.to(TPU), bins=7, min=-3, max=3), torch.histc(x, bins=7, min=-3, max=3))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bad_dim", [0, 2])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")], ids=["nan", "inf", "-inf"])
def test_histogramdd_raises_the_cpu_error_naming_the_dimension_whose_range_is_not_finite(mode, dtype, bad_dim, bad):
    points = make((15, 3), dtype, -3, 3)
    points[torch.randint(0, 15, ()).item(), bad_dim] = bad
    column = points[:, bad_dim].contiguous()
    calls = [lambda p: torch.histogramdd(p, bins=4), lambda p: torch.histogramdd(p, bins=[2, 3, 4])]
    calls += [lambda p: torch.histogram(column.to(p.device), bins=5)]
    with torch_tpu.execution_mode(mode):
        for call in calls:
            with pytest.raises(RuntimeError) as expected:
                call(points)
            with pytest.raises(RuntimeError) as raised:
                result = call(points.to(TPU))
                result.hist.cpu()
            assert first_line(raised.value) == first_line(expected.value)
            if mode != "debug":
                assert re.search(r"device-side check of aten::histogram\S* at \S+\.py:\d+", str(raised.value))
            torch.tpu.synchronize()  # reported once
        # With a range given, or finite data, the CPU's counts.
        ranged = torch.histogramdd(points.to(TPU), bins=4, range=[-3.0, 3.0] * 3)
        assert_close(ranged.hist, torch.histogramdd(points, bins=4, range=[-3.0, 3.0] * 3).hist)
        finite = points.nan_to_num(0.0, 0.0, 0.0)
        assert_close(torch.histogramdd(finite.to(TPU), bins=4).hist, torch.histogramdd(finite, bins=4).hist)


def test_debug_mode_raises_before_masked_scatter_writes():
    x, mask, source = masked_scatter_case(3, 1, broadcast=False)
    target = x.to(TPU)
    with torch_tpu.execution_mode("debug"):
        with pytest.raises(RuntimeError, match="Number of elements of source < number of ones in mask"):
            target.masked_scatter_(mask.to(TPU), source.to(TPU))
    assert_close(target, x)


def unpool2d(values, indices):
    return F.max_unpool2d(values.view(1, 2, 2, 2), indices.view(1, 2, 2, 2), 2, output_size=(3, 5))


def unpool3d(values, indices):
    return F.max_unpool3d(values.view(1, 1, 2, 2, 2), indices.view(1, 1, 2, 2, 2), 2, output_size=(3, 4, 5))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bad", [None, -1, 15, 60])
@pytest.mark.parametrize("unpool, planes, plane", [(unpool2d, 2, 15), (unpool3d, 1, 60)], ids=["2d", "3d"])
def test_max_unpool_raises_the_cpu_error_for_an_index_outside_its_plane(unpool, planes, plane, bad, mode):
    # Each plane of the output holds prod(output_size) elements; indices are distinct in a plane
    # (8 values: 2 planes of 4 in 2d, 1 plane of 8 in 3d).
    values = torch.randn(8)
    others = torch.tensor([i for i in range(plane) if i != bad])  # a valid `bad` repeats none
    indices = torch.stack([others[torch.randperm(len(others))[: 8 // planes]] for _ in range(planes)]).view(8)
    if bad is not None:
        indices[torch.randint(0, 8, ()).item()] = bad
    expected = outcome(unpool, values, indices)
    assert isinstance(expected, RuntimeError) == (bad is not None and bad not in range(plane))
    with torch_tpu.execution_mode(mode):
        if isinstance(expected, RuntimeError):
            with pytest.raises(RuntimeError) as raised:
                unpool(values.to(TPU), indices.to(TPU)).cpu()
            assert str(raised.value).splitlines()[0] == str(expected).splitlines()[0]
            torch.tpu.synchronize()  # reported once
        else:
            assert_close(unpool(values.to(TPU), indices.to(TPU)), expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bad", [None, -1, 5, 9])
def test_searchsorted_raises_the_cpu_error_for_a_sorter_index_out_of_range(mode, bad):
    sequence = torch.randn(2, 5)
    sorter = sequence.argsort(dim=-1)
    if bad is not None:
        sorter[torch.randint(0, 2, ()).item(), torch.randint(0, 5, ()).item()] = bad
    values = torch.randn(2, 3)
    search = lambda s, v, o: torch.searchsorted(s, v, sorter=o)  # noqa: E731
    try:
        expected = search(sequence, values, sorter)
    except RuntimeError as error:
        expected = error
    assert isinstance(expected, RuntimeError) == (bad is not None)
    with torch_tpu.execution_mode(mode):
        if isinstance(expected, RuntimeError):
            with pytest.raises(RuntimeError) as raised:
                search(sequence.to(TPU), values.to(TPU), sorter.to(TPU)).cpu()
            assert str(raised.value).splitlines()[0] == str(expected).splitlines()[0]
            torch.tpu.synchronize()
        else:
            assert_close(search(sequence.to(TPU), values.to(TPU), sorter.to(TPU)), expected)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_normal_with_a_zero_std_gives_the_mean(mode):
    # The domain's edge: std 0 is allowed and draws the mean exactly.
    mean, std = make((6,)), torch.rand(6)
    std[::2] = 0.0
    with torch_tpu.execution_mode(mode):
        drawn = torch.normal(mean.to(TPU), std.to(TPU)).cpu()
    assert torch.equal(drawn[::2], mean[::2])
