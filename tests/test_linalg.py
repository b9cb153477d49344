"""Matrix products (mm, bmm, addmm, addmv, baddbmm, addbmm, dot, vdot, matmul, linear) against
PyTorch on the CPU, and the precision modes of f32 products.

Floating results are checked against a float64 product of the same inputs with an error bound
that fits how the result is computed: one rounding of the output (``rounding``, relative to the
result) plus the error of the products and their f32 accumulation (``accumulation``, relative to
|a| @ |b|, the scale that cancellation cannot shrink).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_close, make, noncontiguous

import torch_tpu
from torch_tpu.precision import precision

INTEGER_DTYPES = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]
FLOAT_DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]

# Bounds (relative to |a| @ |b|) for f32 operands, per mode, for contractions up to K = 256.
# DEFAULT rounds both operands to bf16 (unit roundoff 2^-8 each, so at most 2^-7 for a product);
# HIGH (bf16x3) keeps hi + lo to 2^-16 of each operand and drops lo * lo (2^-16): below 2^-14;
# HIGHEST is f32 accumulation, whose random-walk error for K = 256 stays near sqrt(K) * 2^-24
# (measured: at most 2.5e-7, where HIGH reaches 1.2e-6 and DEFAULT 6e-4 on the 64x256x48 product
# of test_f32_precision_modes). Each bound fails the lower mode there.
F32_ACCUMULATION = {"DEFAULT": 2.0**-7 * 1.01, "HIGH": 2.0**-14, "HIGHEST": 6e-7}
# The output's own rounding, relative to the result.
ROUNDING = {torch.float32: 2.0**-24, torch.float64: 2.0**-52, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}


def current_mode() -> str:
    return precision().name


def accumulation_bound(dtype: torch.dtype) -> float:
    if dtype == torch.float32:
        return F32_ACCUMULATION[current_mode()]
    if dtype == torch.float64:
        return 1e-13
    return 1e-6  # bf16 / f16 operands: exact products, f32 accumulation


def check_product(actual: torch.Tensor, product, *operands, rounding=None, accumulation=None) -> None:
    """Compares ``actual`` (tpu) with ``product(*operands)`` evaluated exactly in float64."""
    expected_dtype = product(*operands).dtype
    assert actual.device.type == "tpu"
    assert actual.dtype == expected_dtype, f"dtype {actual.dtype} != {expected_dtype}"
    exact = product(*(t.double() for t in operands))
    scale = product(*(t.double().abs() for t in operands))
    assert actual.shape == exact.shape, f"shape {tuple(actual.shape)} != {tuple(exact.shape)}"
    rounding = ROUNDING[expected_dtype] if rounding is None else rounding
    accumulation = accumulation_bound(operands[-1].dtype) if accumulation is None else accumulation
    error = (actual.cpu().double() - exact).abs()
    bound = rounding * exact.abs() + accumulation * scale + 1e-30
    worst = (error / bound).max().item() if error.numel() else 0.0
    assert worst <= 1.0, f"error {worst:.3g}x the bound (rounding {rounding:.3g}, accumulation {accumulation:.3g})"


def on_tpu(*tensors):
    return [t.to(TPU) for t in tensors]


# ---- mm / bmm / dot over dtypes ----


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_mm_floating(dtype):
    a, b = make((7, 33), dtype), make((33, 5), dtype)
    check_product(torch.mm(*on_tpu(a, b)), torch.mm, a, b)


@pytest.mark.parametrize("dtype", INTEGER_DTYPES)
def test_mm_integer_exact(dtype):
    # Integer products wrap like the CPU's (int8 overflows here).
    a, b = make((6, 40), dtype, -100, 100), make((40, 3), dtype, -100, 100)
    assert_close(torch.mm(*on_tpu(a, b)), torch.mm(a, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int64])
def test_bmm(dtype):
    a, b = make((3, 4, 9), dtype), make((3, 9, 2), dtype)
    if dtype.is_floating_point:
        check_product(torch.bmm(*on_tpu(a, b)), torch.bmm, a, b)
    else:
        assert_close(torch.bmm(*on_tpu(a, b)), torch.bmm(a, b))


@pytest.mark.parametrize("op", [torch.dot, torch.vdot])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_dot(op, dtype):
    a, b = make((50,), dtype), make((50,), dtype)
    result = op(*on_tpu(a, b))
    assert result.dim() == 0
    if dtype.is_floating_point:
        check_product(result, op, a, b)
    else:
        assert_close(result, op(a, b))


def test_mm_bool_is_not_implemented():
    a = make((2, 3), torch.bool)
    with pytest.raises(NotImplementedError):
        torch.mm(a, a.t())
    with pytest.raises(NotImplementedError, match="not.*implemented"):
        torch.mm(*on_tpu(a, a.t()))


def test_mm_empty_contraction():
    a, b = make((3, 0)), make((0, 4))
    assert_close(torch.mm(*on_tpu(a, b)), torch.mm(a, b))
    c = make((3, 4))
    assert_close(torch.addmm(*on_tpu(c, a, b), beta=2.5), torch.addmm(c, a, b, beta=2.5))


# ---- matmul and linear: shapes that decompose into mm / bmm / dot / addmv ----

MATMUL_SHAPES = [
    ((5,), (5,)),
    ((3, 5), (5,)),
    ((5,), (5, 4)),
    ((3, 5), (5, 4)),
    ((2, 3, 5), (5, 4)),
    ((2, 3, 5), (5,)),
    ((5,), (2, 5, 4)),
    ((2, 3, 5), (2, 5, 4)),
    ((2, 1, 3, 5), (4, 5, 2)),  # batch dims broadcast
    ((3, 5), (2, 2, 5, 4)),
]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul_shapes(shapes):
    a, b = make(shapes[0]), make(shapes[1])
    check_product(torch.matmul(*on_tpu(a, b)), torch.matmul, a, b)


@pytest.mark.parametrize("input_shape", [(6,), (4, 6), (2, 3, 6)], ids=str)
@pytest.mark.parametrize("bias", [True, False])
def test_linear(input_shape, bias):
    x, w = make(input_shape), make((5, 6))
    b = make((5,)) if bias else None
    got = F.linear(*on_tpu(x, w), b.to(TPU) if bias else None)
    # The bias adds one term of magnitude |b| to the scale.
    check_product(got, lambda x, w, *b: F.linear(x, w, *b), x, w, *([b] if bias else []))


def test_noncontiguous_operands():
    x, w = make((4, 9)), make((6, 9))
    # x @ w.t(): a transposed view read without a copy.
    check_product(x.to(TPU) @ w.to(TPU).t(), lambda x, w: x @ w.t(), x, w)
    xs, ws = noncontiguous(x.to(TPU)), noncontiguous(w.to(TPU))
    assert not xs.is_contiguous() and not ws.is_contiguous()
    check_product(xs @ ws.t(), lambda x, w: x @ w.t(), x, w)
    b1, b2 = make((3, 4, 9)), make((3, 9, 2))
    check_product(torch.bmm(noncontiguous(b1.to(TPU)), noncontiguous(b2.to(TPU))), torch.bmm, b1, b2)


# ---- fused forms: beta * self + alpha * product ----

SCALED_ADD = {
    "addmm": (torch.addmm, (4, 5), (4, 7), (7, 5)),
    "addmm_broadcast": (torch.addmm, (5,), (4, 7), (7, 5)),
    "addmv": (torch.addmv, (4,), (4, 7), (7,)),
    "baddbmm": (torch.baddbmm, (3, 4, 5), (3, 4, 7), (3, 7, 5)),
    "baddbmm_broadcast": (torch.baddbmm, (4, 1), (3, 4, 7), (3, 7, 5)),
    "addbmm": (torch.addbmm, (4, 5), (3, 4, 7), (3, 7, 5)),
}


@pytest.mark.parametrize("name", SCALED_ADD)
@pytest.mark.parametrize("beta, alpha", [(1, 1), (0.5, -2.0), (0, 3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_scaled_add(name, beta, alpha, dtype):
    op, self_shape, a_shape, b_shape = SCALED_ADD[name]
    s, a, b = make(self_shape, dtype), make(a_shape, dtype), make(b_shape, dtype)
    got = op(*on_tpu(s, a, b), beta=beta, alpha=alpha)
    expected = op(s.double(), a.double(), b.double(), beta=beta, alpha=alpha)
    scale = op(s.double().abs(), a.double().abs(), b.double().abs(), beta=abs(beta), alpha=abs(alpha))
    assert got.dtype == dtype and got.shape == expected.shape
    error = (got.cpu().double() - expected).abs()
    bound = ROUNDING[dtype] * expected.abs() + accumulation_bound(dtype) * scale + 1e-30
    assert (error <= bound).all(), f"worst {(error / bound).max():.3g}x the bound"


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int8])
def test_scaled_add_integer(dtype):
    s, a, b = make((4, 5), dtype), make((4, 7), dtype), make((7, 5), dtype)
    assert_close(torch.addmm(*on_tpu(s, a, b), beta=3, alpha=-2), torch.addmm(s, a, b, beta=3, alpha=-2))
    # A float beta casts to the integer type, as on the CPU.
    assert_close(torch.addmm(*on_tpu(s, a, b), beta=0.5), torch.addmm(s, a, b, beta=0.5))


def test_beta_zero_ignores_self():
    s = torch.full((4, 5), float("nan"))
    a, b = make((4, 7)), make((7, 5))
    got = torch.addmm(*on_tpu(s, a, b), beta=0)
    assert not got.cpu().isnan().any()
    check_product(got, torch.mm, a, b)


def test_addmm_in_place_and_out():
    s, a, b = make((4, 5)), make((4, 7)), make((7, 5))

    def addmm(s, a, b):
        return torch.addmm(s, a, b, beta=0.25, alpha=1.5)

    target = s.to(TPU)
    result = target.addmm_(*on_tpu(a, b), beta=0.25, alpha=1.5)
    assert result is target
    check_product(target, addmm, s, a, b)
    out = make((4, 5)).to(TPU)
    assert torch.addmm(*on_tpu(s, a, b), beta=0.25, alpha=1.5, out=out) is out
    check_product(out, addmm, s, a, b)
    out = torch.empty(0).to(TPU)  # resized by the meta function, like the CPU's out=
    torch.mm(*on_tpu(a, b), out=out)
    check_product(out, torch.mm, a, b)


def test_baddbmm_in_place():
    s, a, b = make((2, 3, 4)), make((2, 3, 6)), make((2, 6, 4))
    target = s.to(TPU)
    target.baddbmm_(*on_tpu(a, b), alpha=0.5)
    check_product(target, lambda s, a, b: torch.baddbmm(s, a, b, alpha=0.5), s, a, b)


def test_scalars_do_not_recompile():
    s, a, b = on_tpu(make((4, 5)), make((4, 7)), make((7, 5)))
    torch.addmm(s, a, b, beta=0.5, alpha=2.0).cpu()
    before = torch_tpu.metrics.snapshot()["compiles"]
    for alpha, beta in [(3.0, 0.25), (-1.5, 4.0)]:
        torch.addmm(s, a, b, beta=beta, alpha=alpha).cpu()
    assert torch_tpu.metrics.snapshot()["compiles"] == before


# ---- error paths: the CPU's exception types and messages ----


def both_raise(fn, exception, fragment, *tensors):
    with pytest.raises(exception, match=fragment):
        fn(*tensors)
    with pytest.raises(exception, match=fragment):
        fn(*on_tpu(*tensors))


def test_shape_mismatch_errors():
    f = torch.float32
    both_raise(
        torch.mm, RuntimeError, r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x2\)", make((2, 3)), make((4, 2))
    )
    both_raise(
        torch.bmm,
        RuntimeError,
        r"Expected size for first two dimensions of batch2 tensor to be: \[2, 3\] but got: \[3, 3\]",
        make((2, 2, 3)),
        make((3, 3, 2)),
    )
    both_raise(
        torch.matmul, RuntimeError, r"size mismatch, got input \(2\), mat \(2x3\), vec \(2\)", make((2, 3)), make((2,))
    )
    both_raise(torch.dot, RuntimeError, "inconsistent tensor size, expected tensor", make((2,), f), make((3,), f))
    both_raise(torch.mm, RuntimeError, "mat2 must be a matrix", make((2, 3)), make((3,)))
    # PyTorch's meta function words the broadcast failure differently from the CPU kernel.
    both_raise(torch.addmm, RuntimeError, None, make((3, 3)), make((2, 3)), make((3, 2)))


@pytest.mark.parametrize(
    "fn, shapes, fragment",
    [
        (torch.mm, [(2, 3), (3, 2)], "expected m1 and m2 to have the same dtype, but got: float != double"),
        (torch.matmul, [(2, 2, 3), (3, 2)], "expected m1 and m2 to have the same dtype, but got: float != double"),
        (F.linear, [(2, 3), (2, 3)], "expected m1 and m2 to have the same dtype, but got: float != double"),
        (torch.bmm, [(1, 2, 3), (1, 3, 2)], "expected scalar type"),
        (torch.dot, [(3,), (3,)], "dot : expected both vectors to have same dtype"),
        (torch.addmm, [(2, 2), (2, 3), (3, 2)], "self and mat2 must have the same dtype, but got Float and Double"),
        (
            torch.addbmm,
            [(2, 2), (1, 2, 3), (1, 3, 2)],
            "self and mat2 must have the same dtype, but got Float and Double",
        ),
        (
            torch.addmv,
            [(2,), (2, 3), (3,)],
            "addmv input tensors must have the same dtype, but got Float, Float, and Double",
        ),
    ],
)
def test_dtype_mismatch_errors(fn, shapes, fragment):
    tensors = [make(s) for s in shapes[:-1]] + [make(shapes[-1], torch.float64)]
    both_raise(fn, RuntimeError, fragment, *tensors)


@pytest.mark.parametrize(
    "dtypes, fragment",
    [
        ((torch.float16, torch.bfloat16), "c10::Half != c10::BFloat16"),
        ((torch.int32, torch.int64), "int != long int"),
        ((torch.int16, torch.int8), "short int != signed char"),
    ],
)
def test_mm_dtype_names(dtypes, fragment):
    both_raise(torch.mm, RuntimeError, fragment, make((2, 3), dtypes[0]), make((3, 2), dtypes[1]))


def test_addbmm_mat_dtype_error():
    s, a, b = make((2, 2), torch.float64), make((1, 2, 3)), make((1, 3, 2), torch.float64)
    both_raise(torch.addbmm, RuntimeError, "mat1 and mat2 must have the same dtype, but got Float and Double", s, a, b)


# ---- precision modes ----


@pytest.fixture
def mode(request):
    """Runs the test under a precision mode set through torch_tpu's API, then restores it."""
    with precision(request.param):
        yield request.param


@pytest.mark.parametrize("mode", ["DEFAULT", "HIGH", "HIGHEST"], indirect=True)
def test_f32_precision_modes(mode):
    a, b = make((64, 256)), make((256, 48))
    got = a.to(TPU) @ b.to(TPU)
    check_product(got, torch.mm, a, b, accumulation=F32_ACCUMULATION[mode])
    if mode != "HIGHEST":
        # The lower modes are really lower: the next mode's bound does not hold.
        tighter = F32_ACCUMULATION["HIGH" if mode == "DEFAULT" else "HIGHEST"]
        with pytest.raises(AssertionError):
            check_product(got, torch.mm, a, b, accumulation=tighter)


@pytest.mark.parametrize("mode", ["DEFAULT"], indirect=True)
def test_default_mode_is_bf16_operands_f32_accumulation(mode):
    a, b = make((16, 256)), make((256, 8))
    got = a.to(TPU) @ b.to(TPU)
    # Exactly the product of bf16-rounded operands, accumulated in f32.
    a16, b16 = a.bfloat16().float(), b.bfloat16().float()
    check_product(got, torch.mm, a16, b16, accumulation=F32_ACCUMULATION["HIGHEST"])


# Products in every operand layout, under the modes whose dots take bf16 operands. On the CPU
# plugin each operand is laid out row-major behind an optimization barrier first (ops/target.h);
# a layout XLA's bf16 kernels do not take fails at run time instead, so each form runs here:
# transposed views, batches, broadcasting, several contracting dims, m or n of 1, tiny dims.
LAYOUT_CASES = {
    "x@w": (lambda a, b: a @ b, [(40, 48), (48, 36)]),
    "x@w.T (linear)": (lambda a, b: a @ b.t(), [(40, 48), (36, 48)]),
    "x.T@w": (lambda a, b: a.t() @ b, [(48, 40), (48, 36)]),
    "x.T@w.T": (lambda a, b: a.t() @ b.t(), [(48, 40), (36, 48)]),
    "q@k.mT": (lambda q, k: q @ k.mT, [(2, 3, 20, 16), (2, 3, 24, 16)]),
    "p@v (4-D)": (lambda p, v: p @ v, [(2, 3, 20, 24), (2, 3, 24, 16)]),
    "broadcast batch": (lambda a, b: a @ b, [(2, 1, 12, 16), (3, 16, 10)]),
    "batched m=1": (lambda a, b: a @ b, [(5, 1, 48), (5, 48, 40)]),
    "batched n=1": (lambda a, b: a @ b, [(5, 40, 48), (5, 48, 1)]),
    "mv": (lambda a, v: a @ v, [(40, 48), (48,)]),
    "vm.T": (lambda v, a: v @ a.t(), [(48,), (40, 48)]),
    "dot": (lambda u, v: u @ v, [(48,), (48,)]),
    "tiny": (lambda a, b: a.t() @ b, [(4, 3), (4, 5)]),
    "two contracting dims": (lambda a, b: torch.einsum("bik,jbk->ij", a, b), [(3, 20, 16), (12, 3, 16)]),
    "batch after free dims": (lambda a, b: torch.einsum("ibk,bkj->bij", a, b), [(20, 3, 16), (3, 16, 12)]),
    "tensordot": (lambda a, b: torch.tensordot(a, b, dims=([1, 2], [1, 0])), [(10, 4, 6), (6, 4, 9)]),
    "linear 3-D": (lambda x, w: F.linear(x, w), [(2, 7, 48), (36, 48)]),
    "empty contraction": (lambda a, b: a.t() @ b, [(0, 5), (0, 4)]),
    # A transposed view behind a slice or a unit batch dim: XLA drops the unit dim or moves the
    # slice, then folds the transpose into the dot (XLNet's and Funnel's einsums failed so).
    "row of a batch, transposed, batch of 1": (lambda a, b: a[1].t().unsqueeze(0) @ b, [(2, 48, 40), (1, 48, 36)]),
    "einsum of a transposed row": (lambda a, b: torch.einsum("ij,jk->ik", a[1].t(), b), [(2, 48, 40), (48, 36)]),
    "unit batches, both transposed rows": (lambda a, b: a[1].mT @ b[0].mT, [(2, 1, 1, 48, 3), (2, 1, 1, 5, 48)]),
    "bmm of a transposed row": (lambda a, b: torch.bmm(a[:1].mT, b), [(2, 48, 40), (1, 48, 36)]),
    # A product transposed in the same program: XLA folds the transpose into the dot's output
    # ((x @ w).t() and GLPN's and GroupViT's backward failed so in fused mode).
    "x@w, transposed": (lambda a, b: (a @ b).t().contiguous(), [(40, 48), (48, 36)]),
    "x@w, transposed, scaled": (lambda a, b: (a @ b).t() * 2, [(40, 48), (48, 36)]),
    "bmm, transposed": (lambda a, b: (a @ b).mT.contiguous(), [(2, 16, 64), (2, 64, 16)]),
    "bmm, transposed, scaled": (lambda a, b: (a @ b).mT * 2, [(2, 16, 64), (2, 64, 16)]),
    "linear, transposed": (lambda x, w: F.linear(x, w).t().contiguous(), [(16, 64), (16, 64)]),
    "linear, transposed, scaled": (lambda x, w: F.linear(x, w).t() * 2, [(16, 64), (16, 64)]),
}


@pytest.mark.parametrize("mode", ["DEFAULT", "HIGH"], indirect=True)
@pytest.mark.parametrize("case", list(LAYOUT_CASES))
def test_products_in_every_operand_layout(mode, case):
    product, shapes = LAYOUT_CASES[case]
    operands = [make(shape) for shape in shapes]
    check_product(product(*on_tpu(*operands)), product, *operands, accumulation=F32_ACCUMULATION[mode])
    bf16 = [t.bfloat16() for t in operands]
    check_product(product(*on_tpu(*bf16)), product, *bf16)


@pytest.mark.parametrize("mode", ["DEFAULT"], indirect=True)
def test_products_in_every_operand_layout_inside_one_compiled_program(mode, fresh_dynamo):
    # The same forms as one program with elementwise work around them, as a training step has.
    def step(*operands):
        return [product(*(t * 0.5 for t in operands[2 * i : 2 * i + 2])).sin() for i, (product, _) in enumerate(cases)]

    cases = [LAYOUT_CASES[name] for name in ("x@w.T (linear)", "x.T@w", "q@k.mT", "batched m=1", "tensordot")]
    operands = [make(shape) for _, shapes in cases for shape in shapes]
    got = torch.compile(step, backend="tpu")(*on_tpu(*operands))
    for i, (product, _) in enumerate(cases):
        a, b = operands[2 * i : 2 * i + 2]
        exact = product(a.double() * 0.5, b.double() * 0.5)
        scale = product(a.double().abs() * 0.5, b.double().abs() * 0.5)
        # sin is 1-Lipschitz: the product's error bound carries over, plus sin's own rounding.
        error = (got[i].cpu().double() - exact.sin()).abs()
        assert (error <= F32_ACCUMULATION[mode] * scale + 1e-6).all()


@pytest.mark.parametrize("mode", ["DEFAULT", "HIGH"], indirect=True)
def test_modes_leave_bf16_and_integer_alone(mode):
    a, b = make((8, 64), torch.bfloat16), make((64, 4), torch.bfloat16)
    check_product(a.to(TPU) @ b.to(TPU), torch.mm, a, b)
    i, j = make((8, 64), torch.int64), make((64, 4), torch.int64)
    assert_close(i.to(TPU) @ j.to(TPU), i @ j)


@pytest.mark.parametrize("mode", ["HIGH"], indirect=True)
def test_high_mode_keeps_infinities(mode):
    a = torch.tensor([[float("inf"), 1.0], [2.0, 3.0]])
    b = torch.tensor([[1.0, 0.5], [2.0, 1.0]])
    assert_close(a.to(TPU) @ b.to(TPU), a @ b)


def test_set_float32_matmul_precision_switches_mode():
    # The PyTorch API alone switches the mode, and a switch is not hidden by the compile cache.
    a, b = make((8, 64)), make((64, 8))
    ta, tb = on_tpu(a, b)
    saved = torch.get_float32_matmul_precision()
    try:
        results = {}
        for name in ["highest", "medium", "highest"]:
            torch.set_float32_matmul_precision(name)
            results.setdefault(name, []).append((ta @ tb).cpu())
    finally:
        torch.set_float32_matmul_precision(saved)
    assert torch.equal(results["highest"][0], results["highest"][1])
    assert not torch.equal(results["highest"][0], results["medium"][0])
    a16, b16 = a.bfloat16().float(), b.bfloat16().float()
    torch.testing.assert_close(results["medium"][0], a16 @ b16, rtol=1e-6, atol=1e-5)
