"""Elementwise ops on the tpu device against PyTorch on the CPU.

Every distinct (op, dtypes, shape) compiles its own program, so the grids below pick the dtypes
that exercise distinct code paths (f32, bf16 through f32 "opmath", integers, bool) and fold the
special values (inf, nan, signed zeros, huge and tiny) into the random inputs.
"""

from __future__ import annotations

import math

import pytest
import torch
from conftest import TPU, assert_close, make, noncontiguous

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
SPECIAL = [math.inf, -math.inf, math.nan, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1e-30, 1e30, 88.0, -100.0]
# Operand pairs for binary ops; no subnormal quotients (XLA flushes subnormals to zero).
SPECIAL_PAIR_VALUES = torch.tensor([math.inf, -math.inf, math.nan, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 7.0, 1e30, -3e4])
SPECIAL_A, SPECIAL_B = (t.flatten() for t in torch.meshgrid(SPECIAL_PAIR_VALUES, SPECIAL_PAIR_VALUES, indexing="ij"))

# The meta functions PyTorch runs before our lowering (Python references for these ops) reject
# some dtypes with a different exception than the CPU kernel's dispatch error.
META_ERROR_DIFFERS = pytest.mark.xfail(strict=True, reason="the meta function raises a different error than the CPU")


def to_tpu(value):
    return value.to(TPU) if isinstance(value, torch.Tensor) else value


def error_fragment(error: Exception) -> str:
    """The part of the CPU's message the tpu's must contain (dispatch errors name another kernel)."""
    message = str(error).splitlines()[0]
    if "not implemented for" in message:
        return message[message.index("not implemented for") :]
    return message


def check(fn, *inputs, **tolerance):
    """fn on the CPU inputs and on tpu copies: the same values, or the same error."""
    try:
        expected = fn(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    except Exception as error:  # noqa: BLE001 - any CPU error must be reproduced
        with pytest.raises(type(error)) as info:
            fn(*[to_tpu(x) for x in inputs])
        assert error_fragment(error) in str(info.value)
        return
    actual = fn(*[to_tpu(x) for x in inputs])
    assert_close(actual, expected, **tolerance)


def make_in(dtype, low, high, shape=(24,)):
    """Random values in [low, high) (integers: the integers in it), with special values for floats."""
    if dtype == torch.bool:
        return make(shape, dtype)
    if dtype.is_floating_point and len(shape) == 1:
        return torch.cat([make(shape, dtype, low=low, high=high), torch.tensor(SPECIAL, dtype=dtype)])
    if dtype.is_floating_point:
        return make(shape, dtype, low=low, high=high)
    return make(shape, dtype, low=math.floor(low), high=math.ceil(high) + 1)


def binary_operands(dtype_a, dtype_b, nonzero_divisor=False):
    """Random operands of two dtypes; floats also get every pair of special values."""
    a, b = make((30,), dtype_a, low=-10, high=10), make((30,), dtype_b, low=-10, high=10)
    if dtype_a.is_floating_point and dtype_b.is_floating_point:
        a, b = torch.cat([a, SPECIAL_A.to(dtype_a)]), torch.cat([b, SPECIAL_B.to(dtype_b)])
    if nonzero_divisor and not dtype_b.is_floating_point:
        b = torch.where(b == 0, torch.ones_like(b), b)  # integer division by zero raises on the CPU
    return a, b


# ---- unary float math: integer and bool inputs promote to float ----

UNARY_FLOAT = {
    "exp": (-5, 5),
    "exp2": (-5, 5),
    "expm1": (-3, 3),
    "log": (0.01, 20),
    "log2": (0.01, 20),
    "log10": (0.01, 20),
    "log1p": (-0.9, 10),
    "sqrt": (0, 20),
    "rsqrt": (0.05, 20),
    "reciprocal": (0.2, 5),
    "sin": (-6, 6),
    "cos": (-6, 6),
    "tan": (-1.4, 1.4),
    "asin": (-1, 1),
    "acos": (-1, 1),
    "atan": (-8, 8),
    "sinh": (-6, 6),
    "cosh": (-6, 6),
    "tanh": (-5, 5),
    "asinh": (-20, 20),
    "acosh": (1, 20),
    "atanh": (-0.99, 0.99),
    "sigmoid": (-10, 10),
    "erf": (-3, 3),
    "erfc": (-2, 5),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(UNARY_FLOAT))
def test_unary_float_math(name, dtype):
    low, high = UNARY_FLOAT[name]
    check(getattr(torch, name), make_in(dtype, low, high))


@pytest.mark.parametrize("name", ["exp", "log", "sin", "tanh", "erf", "asinh", "atan", "sqrt"])
def test_unary_float_math_float16_and_float64(name):
    low, high = UNARY_FLOAT[name]
    check(getattr(torch, name), make_in(torch.float16, low, high))
    check(getattr(torch, name), make_in(torch.float64, low, high))


@pytest.mark.parametrize("dtype", [torch.bool, torch.int32, torch.int64, torch.uint8])
def test_unary_float_math_promotes_integers(dtype):
    for name in ["exp", "rsqrt", "asin", "sigmoid"] if dtype == torch.int64 else ["exp"]:
        check(getattr(torch, name), make_in(dtype, -1, 5))


def test_unary_float_math_large_arguments():
    x = torch.tensor([80.0, -80.0, 88.5, -88.5, 100.0, 1e4, -1e4, 1e-20, 1e38, -1e38, 3.0e38])
    for name in ["sinh", "cosh", "exp", "asinh", "atan", "tanh", "sigmoid", "erfc", "log1p"]:
        check(getattr(torch, name), x)


# ---- unary ops that keep the dtype, predicates and rounding ----

UNARY_SAME = {
    "abs": torch.abs,
    "neg": torch.neg,
    "sign": torch.sign,
    "sgn": torch.sgn,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "round": torch.round,
    "trunc": torch.trunc,
    "frac": torch.frac,
    "square": torch.square,
    "bitwise_not": torch.bitwise_not,
    "logical_not": torch.logical_not,
    "isnan": torch.isnan,
    "isinf": torch.isinf,
    "isfinite": torch.isfinite,
    "signbit": torch.signbit,
    "isposinf": torch.isposinf,
    "isneginf": torch.isneginf,
    "nan_to_num": torch.nan_to_num,
}


def unary_same_params():
    for name in sorted(UNARY_SAME):
        for dtype in [torch.float32, torch.bfloat16, torch.int64, torch.bool]:
            marks = META_ERROR_DIFFERS if (name, dtype) == ("frac", torch.bool) else ()
            yield pytest.param(name, dtype, marks=marks, id=f"{name}-{str(dtype)[6:]}")


@pytest.mark.parametrize("name,dtype", unary_same_params())
def test_unary_same_type(name, dtype):
    check(UNARY_SAME[name], make_in(dtype, -6, 6))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.float16])
def test_unary_same_type_other_dtypes(dtype):
    x = make_in(dtype, -100, 100) if dtype != torch.uint8 else make_in(dtype, 0, 255)
    for fn in [torch.abs, torch.neg, torch.sign, torch.bitwise_not, torch.floor, torch.signbit]:
        check(fn, x)


def test_round_half_to_even():
    check(torch.round, torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5000002, 1e30, 8388609.0, math.nan]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64])
def test_round_decimals(dtype):
    x = make_in(dtype, -500, 500)
    for decimals in [2, -1, 0]:
        check(lambda t, d=decimals: torch.round(t, decimals=d), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_nan_to_num_replacements(dtype):
    x = torch.tensor([math.nan, math.inf, -math.inf, 1.5, -2.0], dtype=dtype)
    check(torch.nan_to_num, x)
    check(lambda t: torch.nan_to_num(t, nan=7.0, posinf=100.0, neginf=-3.5), x)
    check(lambda t: torch.nan_to_num(t, posinf=1.0), x)
    check(lambda t: t.clone().nan_to_num_(nan=-1.0), x)


def test_unary_inplace_out_and_views():
    x = make((4, 5), torch.float32, low=0.1, high=5)
    check(lambda t: t.sqrt_(), x)
    check(lambda t: torch.exp(t, out=torch.empty(4, 5, device=t.device)), x)
    check(lambda t: torch.floor(t, out=torch.empty(0, device=t.device)), x)
    check(lambda t: torch.sin(t, out=torch.empty(4, 5, dtype=torch.float64, device=t.device)), x)
    check(lambda t: torch.isnan(noncontiguous(t)), x)
    check(lambda t: noncontiguous(t).neg_(), x)
    check(lambda t: t.t().exp(), x)
    check(lambda t: t[:, 1:4:2].abs_(), x)


# ---- binary ops ----

BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "floor_divide": torch.floor_divide,
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "atan2": torch.atan2,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "fmax": torch.fmax,
    "fmin": torch.fmin,
    "hypot": torch.hypot,
    "copysign": torch.copysign,
    "eq": torch.eq,
    "ne": torch.ne,
    "lt": torch.lt,
    "le": torch.le,
    "gt": torch.gt,
    "ge": torch.ge,
    "logical_and": torch.logical_and,
    "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
    "bitwise_and": torch.bitwise_and,
    "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor,
}
DIVISIONS = {"div_trunc", "div_floor", "floor_divide", "remainder", "fmod"}


def binary_params():
    for name in sorted(BINARY):
        for dtype in [torch.float32, torch.bfloat16, torch.int64, torch.bool]:
            bool_division = dtype == torch.bool and name in {"div_floor", "floor_divide"}
            yield pytest.param(
                name, dtype, marks=META_ERROR_DIFFERS if bool_division else (), id=f"{name}-{str(dtype)[6:]}"
            )


@pytest.mark.parametrize("name,dtype", binary_params())
def test_binary(name, dtype):
    check(BINARY[name], *binary_operands(dtype, dtype, name in DIVISIONS))


MIXED_DTYPES = [
    (torch.float16, torch.float16),
    (torch.int32, torch.int32),
    (torch.uint8, torch.uint8),
    (torch.int32, torch.int64),
    (torch.bool, torch.int32),
    (torch.int64, torch.float32),
    (torch.float16, torch.bfloat16),
]


@pytest.mark.parametrize("dtypes", MIXED_DTYPES, ids=lambda p: f"{str(p[0])[6:]}-{str(p[1])[6:]}")
@pytest.mark.parametrize("name", ["add", "div", "div_floor", "remainder", "maximum", "lt"])
def test_binary_other_and_mixed_dtypes(name, dtypes):
    check(BINARY[name], *binary_operands(*dtypes, name in DIVISIONS))


@pytest.mark.parametrize("name", ["add", "lt", "bitwise_xor"])
def test_binary_broadcast_zero_dim_and_noncontiguous(name):
    dtype = torch.int64 if name.startswith("bitwise") else torch.float32
    fn = BINARY[name]
    a, b = make((3, 1, 5), dtype, low=1, high=9), make((4, 5), dtype, low=1, high=9)
    check(fn, a, b)
    check(fn, b, a)
    check(fn, make((), dtype, low=1, high=9), b)
    check(fn, make((), dtype, low=1, high=9), make((), dtype, low=1, high=9))
    check(lambda x, y: fn(noncontiguous(x), noncontiguous(y)), b, b.flip(0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "div_floor", "remainder", "eq", "bitwise_and"])
def test_binary_tensor_scalar(name, dtype):
    x = make((20,), dtype, low=-10, high=10)
    for scalar in [3, 2.5, -2] + ([True] if name in {"add", "mul", "bitwise_and"} else []):
        check(lambda t, s=scalar: BINARY[name](t, s), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_binary_scalar_tensor(dtype):
    x = make((20,), dtype, low=1, high=5)
    for scalar in [3, 2.5]:
        for fn in [
            lambda s, t: s - t,
            lambda s, t: s / t,
            lambda s, t: s % t,
            lambda s, t: s**t,
            lambda s, t: s ^ t,
            lambda s, t: s < t,
        ]:
            check(lambda t, f=fn, s=scalar: f(s, t), x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision_rounding_matches_cpu_exactly(dtype):
    # Where the CPU computes f16/bf16 in float, where in the dtype itself, and whether it rounds a
    # scalar operand to the dtype first differs per kernel; the results must match bit for bit.
    x, y = make((256,), dtype, low=-10, high=10), make((256,), dtype, low=-10, high=10)
    s = 0.1234567
    for fn in [
        lambda t, u: t * s,  # the scalar is read in float ...
        lambda t, u: t / s,
        lambda t, u: t // s,
        lambda t, u: torch.div(t, s, rounding_mode="trunc"),
        lambda t, u: t * torch.tensor(s, dtype=torch.float32),  # ... a 0-d CPU tensor too
        lambda t, u: t + s,  # ... or rounded to the dtype first
        lambda t, u: t % s,
        lambda t, u: t > s,
        lambda t, u: t == torch.tensor(s).to(t.dtype).item(),
        lambda t, u: t // u,  # tensor operands: each step rounded to the dtype
        lambda t, u: torch.div(t, u, rounding_mode="trunc"),
        lambda t, u: t % u,
        lambda t, u: t**3,
        lambda t, u: t**-2,
        lambda t, u: torch.lerp(t, u, 0.3),
        lambda t, u: torch.lerp(t, u, (u / 10).abs()),
        lambda t, u: torch.addcmul(t, u, u, value=0.3),
        lambda t, u: torch.addcdiv(t, u, u.abs() + 1, value=0.3),
        lambda t, u: torch.round(t * 10, decimals=1),
    ]:
        check(fn, x, y, rtol=0, atol=0)


def test_add_alpha():
    for dtype in [torch.float32, torch.bfloat16, torch.int64]:
        a, b = make((20,), dtype), make((20,), dtype)
        alpha = 3 if not dtype.is_floating_point else 0.3
        check(lambda x, y, k=alpha: torch.add(x, y, alpha=k), a, b)
        check(lambda x, y, k=alpha: torch.sub(x, y, alpha=k), a, b)
        check(lambda x, y, k=alpha: torch.rsub(x, y, alpha=k), a, b)
        check(lambda x, k=alpha: torch.rsub(x, 2, alpha=k), a)
    flags = make((20,), torch.bool)
    check(lambda x, y: torch.add(x, y, alpha=False), flags, flags.flip(0))
    check(lambda x, y: torch.add(x, y, alpha=2), flags, flags.flip(0))  # bool + bool stays bool
    check(lambda x: torch.add(x, 3, alpha=2), flags)
    check(lambda x, y: torch.add(x, y, alpha=2.5), make((20,), torch.int64), make((20,), torch.int64))
    check(lambda x, y: torch.add(x, y, alpha=300), make((20,), torch.int8), make((20,), torch.int8))


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int64])
def test_integer_division_signs(dtype):
    a = torch.tensor([7, -7, 7, -7, 6, -6, 0, 1, -1, 100], dtype=dtype)
    b = torch.tensor([2, 2, -2, -2, 3, -3, 5, -1, 1, 7], dtype=dtype)
    if dtype == torch.uint8:
        a, b = a.abs(), b.abs()
    for name in sorted(DIVISIONS) + ["div"]:
        check(BINARY[name], a, b)


def test_integer_division_by_host_zero_raises():
    x = torch.tensor([5, -5])
    for fn in [
        lambda t: t // 0,
        lambda t: t % 0,
        lambda t: torch.fmod(t, 0),
        lambda t: torch.div(t, 0, rounding_mode="trunc"),
        lambda t: torch.div(t, torch.tensor(0), rounding_mode="floor"),  # a 0-d CPU tensor
        lambda t: torch.remainder(t, torch.tensor(0)),
    ]:
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn(x)
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn(x.to(TPU))
    # True division by integer zero is IEEE, not an error.
    check(lambda t: t / 0, x)
    check(lambda t, z: t / z, x, torch.zeros(2, dtype=torch.int64))


# ---- pow ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("exponent", [2, 3, 0.5, -0.5, -1, -2, 0, 1.7, -3.25])
def test_pow_tensor_scalar_float(dtype, exponent):
    check(lambda t: t**exponent, make_in(dtype, 0.2, 4))


def test_pow_tensor_scalar_float16_float64():
    for dtype in [torch.float16, torch.float64]:
        for exponent in [2, 0.5, 1.7]:
            check(lambda t, e=exponent: t**e, make_in(dtype, 0.2, 4))


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8, pytest.param(torch.bool, marks=META_ERROR_DIFFERS)])
def test_pow_integer(dtype):
    base = make((20,), dtype, low=-4, high=5)
    exponent = make((20,), dtype, low=0, high=6)
    check(torch.pow, base, exponent)
    check(lambda t: t**2, base)
    check(lambda t: t**3, base)
    check(lambda t: 2**t, exponent)
    check(lambda t: t**-1, base)  # the CPU's "Integers to negative integer powers" error


def test_pow_integer_negative_exponent_tensor_and_overflow():
    check(torch.pow, torch.tensor([1, -1, 2, -1, 0, 3, -3]), torch.tensor([-1, -3, -2, -2, 1, 0, -1]))
    check(torch.pow, torch.tensor([2, 3, -2]), torch.tensor([62, 41, 63]))


def test_pow_tensor_tensor_and_promotion():
    check(torch.pow, *binary_operands(torch.float32, torch.float32))
    check(torch.pow, make((20,), torch.bfloat16, low=0.1, high=3), make((20,), torch.float16))
    check(torch.pow, make((20,), torch.int64, low=1, high=4), make((20,), torch.float32))
    check(lambda t: t**2.5, make((20,), torch.int32, low=0, high=5))
    check(lambda t: 2.5**t, make((20,), torch.int32, low=-3, high=5))
    check(lambda t: torch.float_power(t, 2), make((20,), torch.float32))
    check(torch.pow, make((4, 5), torch.float32), make((5,), torch.int64, low=0, high=4))
    check(lambda t: t.pow_(2), make((20,), torch.float32))


# ---- comparisons, logical, bitwise and shifts ----


@pytest.mark.parametrize("name", ["eq", "lt"])
def test_comparisons_mixed_inplace_and_out(name):
    fn = BINARY[name]
    check(fn, make((20,), torch.int64, low=-2, high=2), make((20,), torch.float32, low=-2, high=2).round())
    check(lambda a: fn(a, 2.5), make((20,), torch.int32, low=0, high=5))
    check(lambda a: fn(a, torch.tensor(1.5)), make((20,), torch.float16))  # a 0-d CPU tensor
    check(lambda a, b: fn(a, b, out=torch.empty(20, device=a.device)), make((20,)), make((20,)))
    check(lambda a, b: getattr(a, name + "_")(b), make((20,)), make((20,)))


def shift_params():
    for op in ["lshift", "rshift"]:
        for dtype in [torch.int8, torch.uint8, torch.int64, torch.bool, torch.float32]:
            marks = META_ERROR_DIFFERS if dtype in (torch.bool, torch.float32) else ()
            yield pytest.param(op, dtype, marks=marks, id=f"{op}-{str(dtype)[6:]}")


@pytest.mark.parametrize("op,dtype", shift_params())
def test_shifts(op, dtype):
    bits = torch.iinfo(dtype).bits if dtype not in (torch.bool, torch.float32) else 8
    a = make((20,), dtype, low=-100, high=100)
    b = make((20,), dtype, low=0, high=bits)
    if op == "lshift":
        fns = [lambda x, y: x << y, lambda x, y: x << 2, lambda x, y: 1 << y, lambda x, y: x.__ilshift__(y)]
    else:
        fns = [lambda x, y: x >> y, lambda x, y: x >> 2, lambda x, y: 1 >> y, lambda x, y: x.__irshift__(y)]
    for fn in fns:
        check(fn, a, b)


def test_shifts_out_of_range_and_functional_names():
    a = torch.tensor([-5, 5, 7, -1, 123])
    b = torch.tensor([70, -1, 64, 63, 0])
    check(torch.bitwise_left_shift, a, b)
    check(torch.bitwise_right_shift, a, b)
    u = torch.tensor([200, 5, 255], dtype=torch.uint8)
    check(lambda x, y: x >> y, u, torch.tensor([9, 1, 8], dtype=torch.uint8))
    check(lambda x, y: x << y, u, torch.tensor([9, 1, 7], dtype=torch.uint8))


def test_logical_ops_any_dtype_and_out():
    a = make((20,), torch.float32, low=-1, high=1).round()
    b = make((20,), torch.int64, low=-1, high=2)
    for fn in [torch.logical_and, torch.logical_or, torch.logical_xor]:
        check(fn, a, b)
        check(lambda x, y, f=fn: f(x, y, out=torch.empty(20, dtype=torch.int32, device=x.device)), a, b)
        check(lambda x, y, f=fn: getattr(x, f.__name__ + "_")(y), a, b)
    check(lambda x: torch.logical_not(x, out=torch.empty(20, dtype=torch.float16, device=x.device)), a)
    check(lambda x: x.logical_not_(), a)


def test_bitwise_inplace_operators():
    a, b = make((20,), torch.int32), make((20,), torch.int32)
    check(lambda x, y: x.__iand__(y), a, b)
    check(lambda x, y: x.__ior__(y), a, b)
    check(lambda x, y: x.__ixor__(y), a, b)
    check(lambda x: x & 6, make((20,), torch.uint8, low=0, high=100))
    check(lambda x: x | True, make((20,), torch.bool))


# ---- ternary ops and selection ----


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64])
def test_lerp(dtype):
    a, b = make((4, 5), dtype), make((4, 5), dtype)
    check(lambda x, y: torch.lerp(x, y, 0.3), a, b)
    check(lambda x, y: torch.lerp(x, y, 0.75), a, b)
    check(lambda x, y, w: torch.lerp(x, y, w), a, b, make((4, 5), torch.float32, low=-0.5, high=1.5).to(dtype))
    check(lambda x, y, w: torch.lerp(x, y, w), a, b, make((5,), torch.float32, low=0, high=1).to(dtype))
    check(lambda x, y: x.lerp_(y, 0.5), a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_addcmul_addcdiv(dtype):
    a, b, c = make((4, 5), dtype), make((4, 5), dtype), make_in(dtype, 1, 3, (4, 5))
    value = 0.5 if dtype.is_floating_point else 3
    check(torch.addcmul, a, b, c)
    check(lambda x, y, z: torch.addcmul(x, y, z, value=value), a, b, c)
    check(lambda x, y, z: torch.addcdiv(x, y, z, value=value), a, b, c)  # integers raise
    check(lambda x, y, z: x.addcmul_(y, z, value=value), a, b, c)
    check(torch.addcmul, a, make((5,), dtype), make((4, 1), dtype))


def test_addcmul_promotion_and_value_cast():
    check(torch.addcmul, make((20,)), make((20,), torch.int64), make((20,), torch.bfloat16))
    ints = [make((20,), torch.int64) for _ in range(3)]
    check(lambda x, y, z: torch.addcmul(x, y, z, value=2.5), *ints)  # value cast to the integer type
    check(lambda x, y, z: torch.addcmul(x, y, z, value=2), *[t.to(torch.int8) for t in ints])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_where(dtype):
    cond = make((4, 5), torch.bool)
    a, b = make((4, 5), dtype), make((5,), dtype)
    check(torch.where, cond, a, b)
    check(lambda c, x: torch.where(c, x, 0), cond, a)
    check(lambda c, x: torch.where(c, 2.5, x), cond, a)
    check(lambda c, x: x.where(c, 1), cond, a)
    check(lambda c: torch.where(c, 1.0, 0.0), cond)
    check(lambda c, x, y: torch.where(c, x, y), make((4, 1), torch.bool), make((), dtype), b)


def test_where_promotion_and_errors():
    cond = make((20,), torch.bool)
    check(torch.where, cond, make((20,), torch.int32), make((20,), torch.float16))
    check(torch.where, cond, make((20,), torch.bool), make((20,), torch.int64))
    check(lambda c, x: torch.where(c, x, 300), cond, make((20,), torch.int8))


@pytest.mark.xfail(strict=True, reason="the meta function raises a different error than the CPU")
def test_where_non_bool_condition():
    check(torch.where, make((20,)), make((20,)), make((20,)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8, torch.bool])
def test_clamp(dtype):
    x = make_in(dtype, 0 if dtype == torch.uint8 else -10, 10)
    check(lambda t: t.clamp(-2 if dtype != torch.uint8 else 2, 3), x)
    check(lambda t: t.clamp(3, 1), x)  # min > max gives max
    check(lambda t: t.clamp(min=1), x)
    check(lambda t: t.clamp(max=1.5), x)
    check(lambda t: torch.clamp_min(t, 0), x)
    check(lambda t: torch.clamp_max(t, 0), x)
    check(lambda t: t.clamp_(1, 2), x)
    lo = make(x.shape, dtype, low=0 if dtype == torch.uint8 else -10, high=1)
    hi = make((1,), dtype, low=0, high=10)
    check(lambda t, a, b: t.clamp(a, b), x, lo, hi)  # bool raises on the CPU
    check(lambda t, a: t.clamp(min=a), x, lo)
    check(lambda t, b: t.clamp(max=b), x, hi)
    check(lambda t, b: torch.clamp_max(t, b), x, hi)
    check(lambda t, a: t.clamp_min_(a), x, lo)


def test_clamp_nan_promotion_and_errors():
    x = torch.tensor([math.nan, 1.0, 5.0, -3.0, math.inf, -math.inf])
    check(lambda t: t.clamp(0, 2), x)
    check(lambda t: t.clamp(math.nan, 2), x)
    check(lambda t: t.clamp(min=math.nan), x)
    check(lambda t: t.clamp(max=math.nan), x)
    check(lambda t, b: t.clamp(b, None), x, torch.full_like(x, math.nan))
    check(lambda t, b: t.clamp(None, b), x, torch.full_like(x, math.nan))
    check(lambda t: t.clamp(), x)
    check(lambda t: t.clamp(0.5, 2), torch.tensor([0, 1, 2, 3]))  # int tensor with float bounds: float
    check(lambda t, a, b: torch.clamp(t, a, b), make((20,)), make((20,), torch.float64), make((), torch.float16))
    check(lambda t: t.clamp(0, 200), make((20,), torch.int8))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_masked_fill(dtype):
    x = make((4, 5), dtype)
    mask = make((4, 5), torch.bool)
    check(lambda t, m: t.masked_fill(m, 1), x, mask)
    check(lambda t, m: t.masked_fill(m, 2.7), x, mask)
    check(lambda t, m: t.masked_fill(m, True), x, mask)
    check(lambda t, m: t.masked_fill_(m, -1), x, mask)
    check(lambda t, m: t.masked_fill(m, 3), x, make((5,), torch.bool))  # broadcast mask
    check(lambda t, m, v: t.masked_fill(m, v), x, mask, make((), dtype))  # 0-d tpu tensor value
    if dtype == torch.float32:
        check(lambda t, m: noncontiguous(t).masked_fill_(m, 0), x, mask)


def test_masked_fill_errors():
    x = make((4, 5))
    check(lambda t, m: t.masked_fill(m, 1.0), x, make((4, 5), torch.int64, low=0, high=2))
    check(lambda t, m: t.masked_fill(m, 1e6), x.half(), make((4, 5), torch.bool))
    check(lambda t, m: t.masked_fill(m, -1.5), x.to(torch.uint8), make((4, 5), torch.bool))


@pytest.mark.xfail(strict=True, reason="the meta function raises a different error than the CPU")
@pytest.mark.parametrize("value,mask_shape", [(torch.ones(2), (4, 5)), (1.0, (3, 4, 5))], ids=["value", "mask"])
def test_masked_fill_shape_errors(value, mask_shape):
    check(lambda t, m: t.masked_fill_(m, value), make((4, 5)), make(mask_shape, torch.bool))


def test_masked_fill_with_cpu_scalar_tensor():
    x = make((4, 5))
    mask = make((4, 5), torch.bool)
    assert_close(x.to(TPU).masked_fill(mask.to(TPU), torch.tensor(2.0)), x.masked_fill(mask, torch.tensor(2.0)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.uint8, torch.bool])
def test_fill_and_zero(dtype):
    x = make((4, 5), dtype)
    check(lambda t: t.fill_(3), x)
    check(lambda t: t.fill_(-1.75), x)  # uint8 raises: out of range
    check(lambda t: t.fill_(True), x)
    check(lambda t, v: t.fill_(v), x, make((), dtype))
    check(lambda t: t.zero_(), x)
    check(lambda t: torch.full_like(t, 5), x)
    check(lambda t: torch.zeros_like(t), x)
    if dtype == torch.float32:
        check(lambda t: noncontiguous(t).fill_(2), x)
        check(lambda t: noncontiguous(t).zero_(), x)


def test_fill_range_checks():
    for dtype, value in [
        (torch.uint8, -1),
        (torch.uint8, 256),
        (torch.int8, 200),
        (torch.int8, -1.5),
        (torch.int32, 2**40),
        (torch.int32, math.nan),
        (torch.float16, 1e6),
        (torch.float16, math.inf),
        (torch.bfloat16, 1e39),
        (torch.float32, math.nan),
        (torch.bool, 2.5),
        (torch.int64, 2**63 - 1),
    ]:
        check(lambda t, v=value: t.fill_(v), torch.zeros(3, dtype=dtype))


def test_fill_view_writes_through_to_base():
    def fill_column(t):
        t[:, 1].fill_(9)
        t[2].zero_()
        return t

    check(fill_column, make((4, 5)))


# ---- in-place, out= and type promotion ----


def test_inplace_and_out_variants():
    a, b = make((4, 5)), make((4, 5))
    check(lambda x, y: x.add_(y), a, b)
    check(lambda x, y: x.mul_(y).sub_(2).div_(y, rounding_mode="floor"), a, b)
    check(lambda x, y: x.remainder_(y).pow_(2), a, b)
    check(lambda x, y: torch.add(x, y, out=torch.empty(4, 5, device=x.device)), a, b)
    check(lambda x, y: torch.mul(x, y, out=torch.empty(0, device=x.device)), a, b)
    check(lambda x, y: torch.sub(x, y, out=torch.empty(4, 5, dtype=torch.float64, device=x.device)), a, b)
    check(lambda x, y: torch.maximum(x, y, out=torch.empty(4, 5, dtype=torch.bfloat16, device=x.device)), a, b)
    check(lambda x, y: noncontiguous(x).add_(y), a, b)
    check(lambda x, y: x.add_(y[0]), a, b)
    i, j = make((4, 5), torch.int64), make((4, 5), torch.int32)
    check(lambda x, y: x.add_(y), i, j)
    check(lambda x: x.mul_(3), i)


def test_inplace_result_type_errors():
    i = make((4, 5), torch.int64)
    f = make((4, 5), torch.float32)
    check(lambda x, y: x.add_(y), i, f)
    check(lambda x: x.add_(1.5), i)
    check(lambda x, y: x.div_(y), i, torch.where(i == 0, 1, i))
    check(lambda x: x.mul_(2.5), make((4, 5), torch.bool))
    check(lambda x, y: x.add_(y), make((5,)), make((4, 5)))  # can't broadcast into self


@pytest.mark.xfail(strict=True, reason="the meta function raises a different error than the CPU")
def test_out_result_type_error():
    f = make((4, 5))
    check(lambda x, y: torch.add(x, y, out=torch.empty(4, 5, dtype=torch.int64, device=x.device)), f, f)


@pytest.mark.parametrize(
    "a_dtype,b_dtype",
    [(torch.bool, torch.bool), (torch.bool, torch.uint8), (torch.int32, torch.float16), (torch.uint8, torch.int64)],
)  # fmt: skip
def test_promotion(a_dtype, b_dtype):
    a, b = make((20,), a_dtype, low=0, high=10), make((20,), b_dtype, low=0, high=10)
    for fn in [torch.add, torch.mul, torch.eq, torch.div]:
        check(fn, a, b)
    check(lambda x: x + 1, a)
    check(lambda x: x + 1.5, a)
    check(lambda x: x * True, a)
    check(lambda x: x + torch.tensor(300), a)  # a 0-d CPU tensor does not widen the dtype
    check(lambda x, y: x + y, a, make((), torch.float64))  # nor does a 0-d tpu tensor of a float type


def test_uint8_wraparound():
    a = torch.tensor([250, 3, 128], dtype=torch.uint8)
    b = torch.tensor([10, 5, 2], dtype=torch.uint8)
    for fn in [torch.add, torch.sub, torch.mul, lambda x, y: -x, lambda x, y: x - 7]:
        check(fn, a, b)


def test_zero_dim_and_empty():
    check(torch.add, make(()), make(()))
    check(lambda x: x.exp(), make(()))
    check(lambda x: x.clamp(0, 1), make(()))
    check(lambda x: x.fill_(2), make(()))
    check(torch.add, make((0, 3)), make((3,)))
    check(lambda x: x.sin(), make((2, 0)))


# ---- errors that the CPU raises ----


@pytest.mark.parametrize(
    "fn,dtype",
    [
        (lambda x: x - x, torch.bool),
        (lambda x: -x, torch.bool),
        (lambda x: x.abs(), torch.bool),
        (lambda x: x & x, torch.float32),
        (lambda x: ~x, torch.bfloat16),
        (lambda x: x.frac(), torch.int64),
        (lambda x: x.round(decimals=1), torch.int32),
        (lambda x: torch.hypot(x, x), torch.int64),
        (lambda x: torch.lerp(x, x, 0.5), torch.int64),
        (lambda x: torch.addcdiv(x, x, x), torch.int64),
        (lambda x: torch.addcmul(x, x, x), torch.bool),
        (lambda x: torch.remainder(x, x), torch.bool),
        (lambda x: torch.fmod(x, x), torch.bool),
        (lambda x: torch.div(x, x, rounding_mode="trunc"), torch.bool),
        (lambda x: torch.div(x, x, rounding_mode="round"), torch.float32),
        (lambda x: x**-2, torch.int64),
        (lambda x: torch.add(x, x, alpha=0.5), torch.int64),
        (lambda x: x + x[:3], torch.float32),
        (lambda x: x.clamp(x, x), torch.bool),
        (lambda x: x.clamp(0, 1), torch.bool),
        (lambda x: x.clamp_min(True), torch.bool),
    ],
)
def test_errors_match_cpu(fn, dtype):
    check(fn, make((4,), dtype, low=1, high=5))
