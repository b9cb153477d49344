"""Custom kernels (torch_tpu.kernels): StableHLO, JAX and Pallas functions as PyTorch ops.

Each kind is checked against the same math in PyTorch on the CPU, forward and backward, in
strict, fused and compiled modes; inside the surrounding program (programs per step); reused from
the disk cache by a second process; and with bad kernels, whose errors name the kernel and carry
the plugin's message.
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import textwrap

import pytest
import torch
import torch.nn.functional as F
from conftest import TPU, assert_close, make, run_python

import torch_tpu
from torch_tpu import _C, kernels

MODES = ["strict", "fused", "compiled"]


@pytest.fixture(autouse=True)
def float32_cpu_reference():
    """Overrides conftest's: Dynamo runs a frame uncompiled while a dispatch mode is active. The
    one bf16 reference here is computed in float32 and rounded by hand."""
    yield


# Each test compiles from a clean Dynamo (conftest's fresh_dynamo); the kernels are defined once per
# module (jax_kernels), so one worker runs the whole file under pytest-xdist.
pytestmark = [pytest.mark.usefixtures("fresh_dynamo"), pytest.mark.xdist_group("kernels")]


def tensor_type(shape, element="f32") -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + element + ">"


# ---- The three kernels, and the same math in PyTorch ----

SOFTPLUS_TEXT = """
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = stablehlo.exponential %x : tensor<4x8xf32>
  %y = stablehlo.log_plus_one %e : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
"""
# d softplus / dx = sigmoid(x), through a private helper (renamed when embedded).
SOFTPLUS_GRAD_TEXT = """
module @softplus_grad attributes {mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<4x8xf32>, %g: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %s = call @sigmoid(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %r = stablehlo.multiply %s, %g : tensor<4x8xf32>
    return %r : tensor<4x8xf32>
  }
  func.func private @sigmoid(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %s = stablehlo.logistic %x : tensor<4x8xf32>
    return %s : tensor<4x8xf32>
  }
}
"""

SOFTPLUS_GRAD = kernels.stablehlo(SOFTPLUS_GRAD_TEXT, name="softplus_grad", result_types=((4, 8), torch.float32))
SOFTPLUS = kernels.stablehlo(
    SOFTPLUS_TEXT,
    name="test_kernels::softplus",
    result_types=((4, 8), torch.float32),
    backward=lambda x, g: SOFTPLUS_GRAD(x, g),
)


def torch_rmsnorm(x, w, eps=1e-6):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def torch_swish(x):
    return x * torch.sigmoid(x)


@pytest.fixture(scope="module")
def jax_kernels():
    """The JAX and Pallas kernels, defined once (JAX is imported here, never by torch_tpu)."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    @kernels.jax(name="test_kernels::rmsnorm")
    def rmsnorm(x, w, eps: float = 1e-6):
        return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + eps) * w

    def swish_block(x_ref, o_ref):
        x = x_ref[...]
        o_ref[...] = x * jax.nn.sigmoid(x)

    def swish_grad_block(x_ref, g_ref, o_ref):
        x, s = x_ref[...], jax.nn.sigmoid(x_ref[...])
        o_ref[...] = g_ref[...] * (s + x * s * (1 - s))

    def blocked(kernel, x, *operands):
        # A grid of row blocks: on the CPU plugin it runs interpreted, as a loop over the grid.
        spec = pl.BlockSpec((x.shape[0] // 2, x.shape[1]), lambda i: (i, 0))
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(2,),
            in_specs=[spec] * (1 + len(operands)),
            out_specs=spec,
        )(x, *operands)

    @jax.custom_vjp
    def swish(x):
        return blocked(swish_block, x)

    swish.defvjp(lambda x: (blocked(swish_block, x), x), lambda x, g: (blocked(swish_grad_block, x, g),))

    return dict(jax=jax, jnp=jnp, pl=pl, rmsnorm=rmsnorm, swish=kernels.jax(swish, name="test_kernels::swish"))


@contextlib.contextmanager
def mode_of(mode):
    with torch_tpu.execution_mode("strict" if mode == "compiled" else mode):
        yield


def compiled_if(mode, fn):
    return torch.compile(fn, backend="tpu", fullgraph=True) if mode == "compiled" else fn


def check_forward_backward(mode, kernel_step, torch_step, *shapes, tolerance=None):
    """Runs `kernel_step` on tpu (in `mode`) and `torch_step` on the CPU, on the same fresh
    inputs: the loss and every input's gradient must agree."""
    tolerance = tolerance or {}
    inputs = [make(shape) for shape in shapes]
    on_tpu = [t.to(TPU).requires_grad_() for t in inputs]
    on_cpu = [t.clone().requires_grad_() for t in inputs]
    step = compiled_if(mode, kernel_step)
    with mode_of(mode):
        loss = step(*on_tpu)
        loss.backward()
        assert_close(loss, torch_step(*on_cpu), **tolerance)
    torch_step(*on_cpu).backward()
    for got, expected in zip(on_tpu, on_cpu, strict=True):
        assert_close(got.grad, expected.grad, **tolerance)


# ---- StableHLO kernels ----


@pytest.mark.parametrize("mode", MODES)
def test_stablehlo_kernel_forward_and_backward(mode):
    def kernel_step(x):
        return (SOFTPLUS(x * 0.5) * x).sum()

    def torch_step(x):
        return (F.softplus(x * 0.5) * x).sum()

    check_forward_backward(mode, kernel_step, torch_step, (4, 8), tolerance=dict(rtol=1e-5))


def test_stablehlo_kernel_reads_views():
    # A transposed, a sliced and a broadcast input reach the kernel as its 4x8 argument.
    base = make((8, 4))
    for view in (lambda t: t.t(), lambda t: t.reshape(4, 8)[:, :8], lambda t: t[0, :1].expand(4, 8)):
        assert_close(SOFTPLUS(view(base.to(TPU))), F.softplus(view(base)))


def test_stablehlo_text_generated_per_signature_with_a_shape_function():
    generated = []

    def scaled_tanh(x):
        generated.append(tuple(x.shape))
        t = tensor_type(x.shape)
        return f"""
        func.func @main(%x: {t}) -> {t} {{
          %two = stablehlo.constant dense<2.0> : {t}
          %t = stablehlo.tanh %x : {t}
          %y = stablehlo.multiply %t, %two : {t}
          return %y : {t}
        }}"""

    kernel = kernels.stablehlo(scaled_tanh, shape_fn=lambda x: torch.empty_like(x))
    for shape in [(3,), (2, 5), (3,)]:
        x = make(shape)
        assert_close(kernel(x.to(TPU)), torch.tanh(x) * 2)
    assert generated == [(3,), (2, 5)]  # once per input signature
    fake = kernel(torch.empty(6, 7, device="meta"))
    assert fake.shape == (6, 7) and fake.device.type == "meta"


def test_stablehlo_kernels_with_the_same_entry_name_share_a_program():
    # Both kernels' entries are @main; embedded, they are renamed apart. Each is called twice.
    double = kernels.stablehlo(
        """
        func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
          %y = stablehlo.add %x, %x : tensor<4x8xf32>
          return %y : tensor<4x8xf32>
        }""",
        result_types=((4, 8), torch.float32),
    )
    x = make((4, 8))
    with torch_tpu.execution_mode("fused"):
        before = torch_tpu.metrics.snapshot()["executions"]
        y = double(SOFTPLUS(double(SOFTPLUS(x.to(TPU)))))
        assert_close(y, 2 * F.softplus(2 * F.softplus(x)), rtol=1e-5)
        assert torch_tpu.metrics.snapshot()["executions"] - before == 1


def test_stablehlo_text_with_locations_and_comments():
    # As JAX prints it: location aliases before and after, locations on values and arguments.
    text = """#loc1 = loc("x")
    func.func public @main(%x: tensor<4x8xf32> loc("x")) -> (tensor<4x8xf32> {jax.result_info = "result"}) {
      %y = stablehlo.abs %x : tensor<4x8xf32> loc(#loc2)  // |x|
      return %y : tensor<4x8xf32> loc(#loc2)
    } loc(#loc)
    #loc = loc(unknown)
    #loc2 = loc("jit(f)/abs"(#loc1))
    """
    function = _C._kernel_function("test_kernels::located", text, "main")
    assert "loc(" not in function.definitions and "#loc" not in function.definitions
    assert "//" not in function.definitions
    assert function.definitions.startswith(f"func.func private @{function.symbol}(%x: tensor<4x8xf32>)")
    absolute = kernels.stablehlo(text, name="test_kernels::located", result_types=((4, 8), torch.float32))
    x = make((4, 8))
    assert_close(absolute(x.to(TPU)), x.abs())


def test_kernels_of_the_same_types_keep_their_own_programs():
    # Same name, same types, different bodies: the text is part of each program's key.
    def unary(op):
        return f"""
        func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {{
          %y = stablehlo.{op} %x : tensor<4x8xf32>
          return %y : tensor<4x8xf32>
        }}"""

    negate = kernels.stablehlo(unary("negate"), name="test_kernels_a::unary", result_types=((4, 8), torch.float32))
    sine = kernels.stablehlo(unary("sine"), name="test_kernels_b::unary", result_types=((4, 8), torch.float32))
    x = make((4, 8))
    assert_close(negate(x.to(TPU)), -x)
    assert_close(sine(x.to(TPU)), torch.sin(x))


def test_stablehlo_bad_text_is_refused_at_registration():
    result = ((4,), torch.float32)
    with pytest.raises(ValueError, match="kernel 'test_kernels::empty': its StableHLO has no func.func"):
        kernels.stablehlo("module {\n}", name="test_kernels::empty", result_types=result)
    with pytest.raises(ValueError, match="kernel 'test_kernels::junk': expected func.func definitions"):
        kernels.stablehlo(
            "%0 = stablehlo.constant dense<1.0> : tensor<f32>", name="test_kernels::junk", result_types=result
        )
    with pytest.raises(ValueError, match=r"no func.func @main \(it defines @a, @b\)"):
        kernels.stablehlo(
            "func.func @a() -> () {\n return\n}\nfunc.func @b() -> () {\n return\n}",
            name="test_kernels::two",
            result_types=result,
        )
    with pytest.raises(ValueError, match="attribute aliases"):
        kernels.stablehlo(
            "#map = affine_map<(d0) -> (d0)>\n" + SOFTPLUS_TEXT, name="test_kernels::alias", result_types=result
        )
    with pytest.raises(TypeError, match="either result_types or shape_fn"):
        kernels.stablehlo(SOFTPLUS_TEXT, name="test_kernels::neither")


BAD_OP_TEXT = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = stablehlo.frobnicate %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
"""


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_stablehlo_the_plugin_rejects_names_the_kernel(mode):
    bad = kernels.stablehlo(BAD_OP_TEXT, name=f"test_kernels::bad_{mode}", result_types=((4,), torch.float32))
    x = make((4,)).to(TPU)
    with mode_of(mode):
        # With neighbours (fused: replayed op by op), and alone (fused: a one-op program).
        for use in (lambda t: bad(t * 2) + 1, bad):
            with pytest.raises(RuntimeError) as error:
                use(x).cpu()
            assert f"kernel 'test_kernels::bad_{mode}'" in str(error.value)
            assert "custom op 'stablehlo.frobnicate' is unknown" in str(error.value)  # the plugin's words
        assert_close(x + 1, x.cpu() + 1)  # the device still works


def test_stablehlo_inputs_of_the_wrong_type_name_the_kernel():
    for wrong in (make((8, 4)), make((4, 8), torch.bfloat16)):
        with pytest.raises(RuntimeError) as error:
            SOFTPLUS(wrong.to(TPU)).cpu()
        message = str(error.value)
        assert "kernel 'test_kernels::softplus'" in message
        assert "'func.call' op operand type mismatch" in message, message
    function = _C._kernel_function("test_kernels::raw", SOFTPLUS_TEXT, "main")
    with pytest.raises(RuntimeError, match=r"kernel 'test_kernels::raw' takes 1 tensors .* but got 2"):
        _C._kernel_call(function, [make((4, 8)).to(TPU)] * 2, [[4, 8]], [torch.float32])


# ---- JAX kernels ----


@pytest.mark.parametrize("mode", MODES)
def test_jax_kernel_forward_and_backward(mode, jax_kernels):
    rmsnorm = jax_kernels["rmsnorm"]

    def kernel_step(x, w):
        return (rmsnorm(x, w) * x).sum()

    def torch_step(x, w):
        return (torch_rmsnorm(x, w) * x).sum()

    check_forward_backward(mode, kernel_step, torch_step, (6, 16), (16,), tolerance=dict(rtol=1e-5, atol=1e-4))


def test_jax_kernel_bf16_and_a_static_argument(jax_kernels):
    rmsnorm = jax_kernels["rmsnorm"]
    x, w = make((4, 32), torch.bfloat16), make((32,), torch.bfloat16)
    expected = torch_rmsnorm(x.float(), w.float(), 0.5).bfloat16()  # the CPU in f32, rounded once
    assert_close(rmsnorm(x.to(TPU), w.to(TPU), 0.5), expected)
    assert_close(rmsnorm(x.to(TPU).float(), w.to(TPU).float(), 0.5), torch_rmsnorm(x.float(), w.float(), 0.5))


def test_jax_kernel_several_outputs_integer_output_and_unused_input(jax_kernels):
    jax, jnp = jax_kernels["jax"], jax_kernels["jnp"]

    @kernels.jax
    def scaled_max(x, unused, k: int, how: str = "max") -> tuple[jax.Array, jax.Array]:
        assert how == "max"
        return x * k, jnp.argmax(x, axis=-1).astype(jnp.int32)

    x, unused = make((3, 5)), make((2,))
    xt, ut = x.to(TPU).requires_grad_(), unused.to(TPU).requires_grad_()
    scaled, index = scaled_max(xt, ut, 3)
    assert_close(scaled, x * 3)
    assert_close(index, x.argmax(-1).int())
    (scaled * scaled).sum().backward()
    assert_close(xt.grad, 18 * x)  # d/dx (3x)^2
    assert_close(ut.grad, torch.zeros(2))
    with pytest.raises(TypeError, match="returns 2 arrays but was declared with 1"):
        kernels.jax(lambda x: (x, x), name="test_kernels::undeclared")(xt)


def test_jax_kernel_64_bit_inputs_are_refused(jax_kernels):
    rmsnorm = jax_kernels["rmsnorm"]
    with pytest.raises(TypeError, match="input 0 is torch.float64, which JAX turns into float32"):
        rmsnorm(make((2, 4), torch.float64).to(TPU), make((4,), torch.float64).to(TPU))


def test_torchtpu_jax_op_spelling_with_its_own_fake_and_autograd(jax_kernels):
    # TorchTPU's pallas.jax_op(name, fn): a forward and a backward op, autograd registered by hand.
    jax, pl = jax_kernels["jax"], jax_kernels["pl"]

    def add_block(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + 2 * y_ref[...]

    def add_jax(x: jax.Array, y: jax.Array) -> jax.Array:
        return pl.pallas_call(add_block, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)

    def add_backward_jax(g: jax.Array) -> tuple[jax.Array, jax.Array]:
        return g, 2 * g

    add = torch.tpu.pallas.jax_op("test_kernels_pallas::add", add_jax)
    add_backward = torch.tpu.pallas.jax_op("test_kernels_pallas::add_backward", add_backward_jax)
    add.register_fake(lambda x, y: torch.empty_like(x))
    add.register_autograd(lambda ctx, g: tuple(add_backward(g)), setup_context=lambda ctx, inputs, output: None)
    x, y = make((8, 128)), make((8, 128))
    xt, yt = x.to(TPU).requires_grad_(), y.to(TPU).requires_grad_()
    out = add(xt, yt)
    assert_close(out, x + 2 * y)
    out.sum().backward()
    assert_close(xt.grad, torch.ones(8, 128))
    assert_close(yt.grad, torch.full((8, 128), 2.0))
    with pytest.raises(NotImplementedError, match="mesh and partition specs are not supported"):
        torch.tpu.pallas.jax_op("test_kernels_pallas::sharded", add_jax, mesh=object())


# ---- Pallas kernels ----


@pytest.mark.parametrize("mode", MODES)
def test_pallas_kernel_forward_and_backward(mode, jax_kernels):
    swish = jax_kernels["swish"]

    def kernel_step(x):
        return (swish(x) * x).sum()

    def torch_step(x):
        return (torch_swish(x) * x).sum()

    check_forward_backward(mode, kernel_step, torch_step, (8, 16), tolerance=dict(rtol=1e-5, atol=1e-4))


def test_pallas_kernel_without_custom_vjp_says_how_to_differentiate_it(jax_kernels):
    jax, pl = jax_kernels["jax"], jax_kernels["pl"]

    def negate_block(x_ref, o_ref):
        o_ref[...] = -x_ref[...]

    @kernels.jax(name="test_kernels::negate")
    def negate(x):
        return pl.pallas_call(negate_block, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    x = make((8, 16))
    xt = x.to(TPU).requires_grad_()
    y = negate(xt)
    assert_close(y, -x)
    with pytest.raises(Exception) as error:  # JAX's own error, with a note naming the kernel
        y.sum().backward()
    notes = "\n".join(getattr(error.value, "__notes__", []))
    assert "the backward of kernel 'test_kernels::negate' is jax.vjp" in notes
    assert "jax.custom_vjp" in notes


def test_pallas_kernel_exports_a_mosaic_call_for_tpu(jax_kernels):
    # Not runnable here: the TPU lowering (a Mosaic custom call) is built, parsed and embedded.
    jax, jnp, pl = jax_kernels["jax"], jax_kernels["jnp"], jax_kernels["pl"]

    def double_block(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    def double(x):
        return pl.pallas_call(double_block, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    spec = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    exported = jax.export.export(jax.jit(double), platforms=["tpu"])(spec)
    function = _C._kernel_function("test_kernels::mosaic", exported.mlir_module(), "main")
    assert "stablehlo.custom_call @tpu_custom_call" in function.definitions
    assert function.definitions.startswith(f"func.func private @{function.symbol}(")


# ---- Every kind inside the surrounding program ----


def steps_of(jax_kernels):
    """(kernel step, the same step in PyTorch ops, input shapes) for each kind of kernel."""
    rmsnorm, swish = jax_kernels["rmsnorm"], jax_kernels["swish"]
    return {
        "stablehlo": (lambda x, w: (SOFTPLUS(x @ w) * 3).sum(), lambda x, w: (F.softplus(x @ w) * 3).sum()),
        "jax": (lambda x, w: (rmsnorm(x @ w, w[0]) * 3).sum(), lambda x, w: (torch_rmsnorm(x @ w, w[0]) * 3).sum()),
        "pallas": (lambda x, w: (swish(x @ w) * 3).sum(), lambda x, w: (torch_swish(x @ w) * 3).sum()),
    }


def executions_per_step(step, mode, x, w):
    """Programs run by one training step (forward, backward, a host read of the loss)."""
    step = compiled_if(mode, step)
    with mode_of(mode):
        for _ in range(2):  # the second step runs from the caches
            w.grad = None
            torch.tpu.synchronize()
            before = torch_tpu.metrics.snapshot()["executions"]
            loss = step(x, w)
            loss.backward()
            loss.item()
            w.grad.sum().item()
    return loss, torch_tpu.metrics.snapshot()["executions"] - before


@pytest.mark.parametrize("mode", ["fused", "compiled"])
@pytest.mark.parametrize("kind", ["stablehlo", "jax", "pallas"])
def test_the_kernel_is_inside_the_surrounding_program(kind, mode, jax_kernels):
    kernel_step, torch_step = steps_of(jax_kernels)[kind]
    x, w = make((4, 8)), make((8, 8))
    wt = w.to(TPU).requires_grad_()
    loss, with_kernel = executions_per_step(kernel_step, mode, x.to(TPU), wt)
    _, with_torch_ops = executions_per_step(torch_step, mode, x.to(TPU), w.to(TPU).requires_grad_())
    assert with_kernel == with_torch_ops, f"the kernel step ran {with_kernel} programs, torch ops {with_torch_ops}"
    # Fused: the forward (cut when the backward starts), the backward (cut when w.grad.sum() is
    # recorded, after the backward pass) and that sum.
    assert with_kernel <= (3 if mode == "fused" else 4)
    wc = w.clone().requires_grad_()
    expected = torch_step(x, wc)
    expected.backward()
    assert_close(loss, expected, rtol=1e-5, atol=1e-4)
    assert_close(wt.grad, wc.grad, rtol=1e-5, atol=1e-4)


# ---- Across processes ----

SECOND_PROCESS = """
import json, sys, torch, torch_tpu
assert "jax" not in sys.modules, "import torch_tpu imported JAX"
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
from torch_tpu import kernels

TEXT = '''FILL'''
softplus = kernels.stablehlo(TEXT, name="softplus", result_types=((4, 8), torch.float32))

@kernels.jax
def rmsnorm(x, w, eps: float = 1e-6):
    return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + eps) * w

def block(x_ref, o_ref):
    o_ref[...] = jnp.tanh(x_ref[...])

@kernels.jax
def pallas_tanh(x):
    return pl.pallas_call(block, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

torch_tpu.metrics.reset()
x = (torch.arange(32.0).reshape(4, 8) / 16).to("tpu").requires_grad_()
with torch_tpu.execution_mode("fused"):
    # softplus has no backward here, and pallas_tanh no custom_vjp: they read no grad.
    y = rmsnorm(softplus(softplus(pallas_tanh(x.detach()))), x[0])
    y.sum().backward()
    print(json.dumps([y.cpu().tolist(), x.grad.cpu().tolist()]))
print(json.dumps(torch_tpu.metrics.snapshot()))
"""


def test_a_second_process_reuses_the_disk_cache(tmp_path):
    code = SECOND_PROCESS.replace("FILL", SOFTPLUS_TEXT)
    env = dict(TORCH_TPU_CACHE_DIR=str(tmp_path / "cache"), TORCH_TPU_DUMP_DIR=str(tmp_path / "dump"))
    runs = []
    for dump in ("1", "0"):
        result = run_python(code, TORCH_TPU_DUMP_PROGRAMS=dump, **env)
        assert result.returncode == 0, result.stderr
        values, counters = result.stdout.strip().splitlines()[-2:]
        runs.append((json.loads(values), json.loads(counters)))
    (first_values, first), (second_values, second) = runs
    assert first["compiles"] >= 1 and first["executions"] == second["executions"]
    assert second["compiles"] == 0 and second["disk_cache_hits"] == first["compiles"]
    assert first_values == second_values
    x = (torch.arange(32.0).reshape(4, 8) / 16).requires_grad_()
    y = torch_rmsnorm(F.softplus(F.softplus(torch.tanh(x.detach()))), x[0])
    y.sum().backward()
    torch.testing.assert_close(torch.tensor(first_values[0]), y.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.tensor(first_values[1]), x.grad, rtol=1e-5, atol=1e-5)
    # The program calls softplus twice but defines it once, next to @main.
    programs = [p.read_text() for p in pathlib.Path(tmp_path / "dump").glob("*.mlir")]
    programs = [text for text in programs if "callee = @softplus_" in text]
    assert len(programs) == 1, f"{len(programs)} programs call softplus"
    text = programs[0]
    symbol = text.split("callee = @softplus_")[1].split("}")[0]
    assert text.count(f"callee = @softplus_{symbol}") == 2
    assert text.count(f"func.func private @softplus_{symbol}(") == 1
    assert text.count("func.func public @main(") == 1


def test_import_needs_no_jax():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["jax"] = None  # importing JAX now fails
        import torch, torch_tpu
        print(torch.tpu.pallas.jax_op.__name__, torch_tpu.kernels.stablehlo.__name__)
        try:
            torch_tpu.kernels.jax(lambda x: x)(torch.ones(2, device="tpu"))
        except ImportError as error:
            print("ImportError:", error)
        """
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert "jax_op stablehlo" in result.stdout
    assert "pip install 'torch_tpu[jax]'" in result.stdout
