"""torch.compile on tpu: one program per graph, whole training steps, mutations and donation,
the default and "inductor" backends routed to tpu, dynamic shapes, errors and introspection.
Compared with eager tpu and with the CPU."""

from __future__ import annotations

import copy
import os
import sys
import warnings

import pytest
import torch
from conftest import TPU, assert_close, make, run_python

import torch_tpu
import torch_tpu._compile.routing as routing

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from tiny_lm import LanguageModel  # noqa: E402


@pytest.fixture(autouse=True)
def float32_cpu_reference():
    """Overrides conftest's: Dynamo runs a frame eagerly, uncompiled, while a dispatch mode is
    active. The CPU references here are float32, which need no such mode."""
    yield


# Each test compiles from a clean Dynamo (conftest's fresh_dynamo).
pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def counted(fn, *args):
    """fn(*args) with the programs it ran and compiled, after the device is idle."""
    torch.tpu.synchronize()
    torch_tpu.metrics.reset()
    result = fn(*args)
    torch.tpu.synchronize()
    figures = torch_tpu.metrics.snapshot()
    return result, figures


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.GELU(), torch.nn.Linear(32, 4))


def test_backend_is_discoverable():
    assert "tpu" in torch._dynamo.list_backends()


def test_compiled_function_matches_the_cpu():
    def f(x, y):
        return torch.softmax(x @ y.t() + 1.0, dim=-1).sum(0)

    compiled = torch.compile(f, backend="tpu")
    x, y = make((6, 4)), make((5, 4))
    assert_close(compiled(x.to("tpu"), y.to("tpu")), f(x, y))
    x2 = make((6, 4))
    assert_close(compiled(x2.to("tpu"), y.to("tpu")), f(x2, y))  # same graph, new values


def test_mlp_forward_is_one_program_compiled_once():
    torch.manual_seed(0)
    model = mlp()
    compiled = torch.compile(copy.deepcopy(model).to(TPU), backend="tpu")
    with torch.no_grad():
        for step in range(3):
            x = make((8, 16))
            out, figures = counted(compiled, x.to(TPU))
            assert_close(out, model(x))
            assert figures["compiled_graph_calls"] == 1
            assert figures["executions"] == figures["compiled_graph_executions"] == 1
            if step > 0:  # launched from the plan captured on the first call, nothing recorded
                assert figures["compiles"] == 0
                assert figures["compiled_graph_direct_calls"] == 1
                assert figures["execute_time_s"] > 0  # a plan's launch counts like any other


def test_compiled_module_trains_like_the_cpu():
    torch.manual_seed(0)
    model = mlp()
    tpu_model = copy.deepcopy(model).to(TPU)
    compiled = torch.compile(tpu_model, backend="tpu")
    x = make((3, 16))
    model(x).square().sum().backward()
    compiled(x.to(TPU)).square().sum().backward()
    for p_tpu, p_cpu in zip(tpu_model.parameters(), model.parameters(), strict=True):
        assert_close(p_tpu.grad, p_cpu.grad)


def make_train_step(model, optimizer, loss_fn, clip=False):
    def step(*batch):
        optimizer.zero_grad()
        loss = loss_fn(model, *batch)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss

    return step


def mse(model, x, y):
    return torch.nn.functional.mse_loss(model(x), y)


@pytest.mark.parametrize("optimizer_class", [torch.optim.AdamW, torch.optim.SGD])
def test_compiled_training_step_runs_four_programs_and_tracks_eager_and_the_cpu(optimizer_class):
    torch.manual_seed(0)
    model = mlp()
    runs = {}
    for name in ("cpu", "eager", "compiled"):
        device = "cpu" if name == "cpu" else TPU
        m = copy.deepcopy(model).to(device)
        # The learning rate changes every step: no recompile, at either level. It is a tensor, as
        # PyTorch's recipe for compiled optimizers says: Dynamo guards on a float's value.
        options = dict(lr=torch.tensor(1e-2))
        if optimizer_class is torch.optim.SGD:
            options["momentum"] = 0.9
        optimizer = optimizer_class(m.parameters(), **options)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (1 + s))
        step = make_train_step(m, optimizer, mse)
        runs[name] = (m, torch.compile(step, backend="tpu") if name == "compiled" else step, scheduler)
    torch.manual_seed(1)
    batches = [(make((8, 16)), make((8, 4))) for _ in range(6)]
    losses = {name: [] for name in runs}
    for i, batch in enumerate(batches):
        for name, (_, step, scheduler) in runs.items():
            device = "cpu" if name == "cpu" else TPU
            if name == "compiled" and i >= 2:
                graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
                loss, figures = counted(step, *(t.to(device) for t in batch))
                assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs
                assert figures["compiles"] == 0
                # forward, backward, optimizer step, and the backward's seed (ones_like(loss))
                assert figures["executions"] <= 4, figures
                assert figures["compiled_graph_executions"] == 3, figures
                # forward and backward launch their captured programs; the optimizer's graph reads
                # its step counts from CPU tensors that change every step, so it is recorded
                assert figures["compiled_graph_direct_calls"] >= 2, figures
            else:
                loss = step(*(t.to(device) for t in batch))
            losses[name].append(loss.item())
            scheduler.step()
    for name in ("eager", "compiled"):
        torch.testing.assert_close(losses[name], losses["cpu"], rtol=1e-4, atol=1e-6)
    for name in ("eager", "compiled"):
        for p, p_cpu in zip(runs[name][0].parameters(), runs["cpu"][0].parameters(), strict=True):
            assert_close(p, p_cpu, rtol=1e-4, atol=1e-5)


def test_compiled_lm_training_step_matches_eager_with_few_programs():
    torch.manual_seed(0)
    model = LanguageModel(64, width=32, heads=2, layers=2, context=16)
    tokens = [torch.randint(0, 64, (4, 17)) for _ in range(4)]

    def lm_loss(m, t):
        return m.loss(t)

    results = {}
    for name in ("eager", "compiled"):
        m = copy.deepcopy(model).to(TPU)
        # SGD: parameters then differ by lr x the gradients' difference (Adam's normalization
        # would magnify rounding in near-zero gradients).
        optimizer = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        step = make_train_step(m, optimizer, lm_loss, clip=True)
        step = torch.compile(step, backend="tpu") if name == "compiled" else step
        losses = []
        for i, t in enumerate(tokens):
            loss, figures = counted(step, t.to(TPU))
            losses.append(loss.item())
            # Steps 1 and 2 compile: SGD's momentum buffers are created on the first, read after.
            if name == "compiled" and i > 1:
                assert figures["compiles"] == 0
                # Forward, backward, clip_grad_norm_ and the optimizer step (PyTorch's optimizer
                # breaks the graph around its step); the backward's seed is an upload.
                assert figures["executions"] <= 4, figures
            if name == "compiled" and i == len(tokens) - 1:
                # Every graph runs from its plan: attention without dropout draws no random
                # numbers, and its never-written RNG seed outputs pass from forward to backward.
                assert figures["compiled_graph_direct_calls"] == figures["compiled_graph_calls"] == 4, figures
        results[name] = (m, losses)
    torch.testing.assert_close(results["compiled"][1], results["eager"][1], rtol=1e-4, atol=1e-4)
    for p, p_eager in zip(results["compiled"][0].parameters(), results["eager"][0].parameters(), strict=True):
        assert_close(p, p_eager.cpu(), rtol=1e-4, atol=1e-5)


def test_compiled_adamw_step_is_memory_neutral_through_donation():
    torch.manual_seed(0)
    model = mlp().to(TPU)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    step = torch.compile(optimizer.step, backend="tpu")
    step()
    step()
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    _, figures = counted(step)
    assert torch.tpu.memory_allocated() == before
    assert figures["executions"] == 1
    # every parameter and both moments of each are updated in place
    n_params = len(list(model.parameters()))
    assert figures["donated_buffers"] >= 3 * n_params, figures


def test_batchnorm_running_statistics_are_updated():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    tpu_model = copy.deepcopy(model).to(TPU)
    compiled = torch.compile(tpu_model, backend="tpu")
    for _ in range(3):
        x = make((2, 3, 6, 6))
        assert_close(compiled(x.to(TPU)), model(x))
    bn, bn_tpu = model[1], tpu_model[1]
    assert_close(bn_tpu.running_mean, bn.running_mean)
    assert_close(bn_tpu.running_var, bn.running_var)
    assert bn_tpu.num_batches_tracked.item() == bn.num_batches_tracked.item() == 3


def test_input_mutations_and_views_are_applied():
    def f(x, y):
        x.add_(1)
        y[1:3].mul_(2)  # through a view of an input
        return x + y

    x, y = make((4,)), make((5,))
    tx, ty = x.to(TPU), y.to(TPU)
    view = ty[1:]
    compiled = torch.compile(f, backend="tpu")
    out, figures = counted(compiled, tx, ty[:4])
    expected = f(x, y[:4])
    assert_close(out, expected)
    assert_close(tx, x)
    assert_close(ty, y)
    assert_close(view, y[1:])  # a view taken before the call sees the write
    assert figures["compiled_graph_executions"] == 1, figures
    assert figures["donated_buffers"] >= 1, figures  # x's old buffer becomes its new value


@pytest.mark.parametrize("call", range(3))  # the first call records, the others run the plan
def test_outputs_that_alias_inputs_or_each_other(call):
    def f(x):
        y = x * 2
        return x[1:], y, y.view(2, 3), y[::2]

    compiled = torch.compile(f, backend="tpu")
    for _ in range(call + 1):
        x = make((6,))
        tx = x.to(TPU)
        outs = compiled(tx)
    for got, expected in zip(outs, f(x), strict=True):
        assert_close(got, expected)
    assert outs[0].storage_offset() == 1 and outs[3].stride() == (2,)
    outs[0].fill_(7)  # a view of the input: the input sees it
    assert (tx[1:] == 7).all()
    outs[1].zero_()  # the views of one output share its storage
    assert (outs[2] == 0).all() and (outs[3] == 0).all()


def test_repeated_input_mutation_through_the_plan():
    def f(x, y):
        x.mul_(2).add_(y)
        return x.sum()

    compiled = torch.compile(f, backend="tpu")
    x, y = make((3, 4)), make((3, 4))
    tx, ty = x.to(TPU), y.to(TPU)
    alias = tx.view(12)
    for _ in range(4):
        total, figures = counted(compiled, tx, ty)
        expected = f(x, y)
        assert_close(total, expected)
        assert_close(tx, x)
        assert_close(alias, x.view(12))
    assert figures["compiled_graph_direct_calls"] == 1 and figures["donated_buffers"] == 1, figures


def test_a_changed_input_layout_is_recorded_again_not_misread():
    def f(x, y):
        return x * 2 + y

    compiled = torch.compile(f, backend="tpu", dynamic=False)
    x, y = make((4, 6)), make((4, 6))
    compiled(x.to(TPU), y.to(TPU))
    base = make((4, 8))
    for offset in (0, 2):  # a slice of a wider tensor (new strides), then at another offset
        xs = base[:, offset : offset + 6]
        got = compiled(base.to(TPU)[:, offset : offset + 6], y.to(TPU))
        assert_close(got, f(xs, y))
    same = x.to(TPU)  # one storage passed twice, then two storages
    assert_close(compiled(same, same), f(x, x))
    assert_close(compiled(same, y.to(TPU)), f(x, y))


def test_a_random_graph_draws_new_numbers_every_call():
    def f(x):
        return torch.nn.functional.dropout(x, 0.5, training=True) + torch.rand_like(x)

    compiled = torch.compile(f, backend="tpu")
    x = torch.ones(256, device=TPU)
    results = []
    for _ in range(4):
        result, figures = counted(compiled, x)
        results.append(result.cpu())
    # Run from its plan, each call drawing new keys: new numbers every time.
    assert figures["compiled_graph_direct_calls"] == 1 and figures["compiles"] == 0, figures
    for a, b in zip(results, results[1:], strict=False):
        assert not torch.equal(a, b)
    for result in results:
        kept = result >= 2
        assert ((result[kept] >= 2) & (result[kept] < 3)).all() and ((result[~kept] >= 0) & (result[~kept] < 1)).all()
    # The generator advances as in eager mode: under one seed, the plan draws eager's numbers, and
    # the next draw after it is eager's next draw too.
    for run in (f, compiled):
        torch.manual_seed(7)
        first, after = run(x).cpu(), torch.rand(8, device=TPU).cpu()
        results.append((first, after))
    assert torch.equal(results[-1][0], results[-2][0]) and torch.equal(results[-1][1], results[-2][1])


def test_a_graph_whose_dropout_keeps_everything_runs_from_its_plan():
    def f(x):
        return torch.ops.aten.native_dropout(x, 0.0, True)[0] * 2

    compiled = torch.compile(f, backend="tpu")
    x = make((64,))
    for _ in range(3):
        result, figures = counted(compiled, x.to(TPU))
        assert_close(result, x * 2, rtol=0, atol=0)
    assert figures["compiled_graph_direct_calls"] == 1, figures


def test_a_cpu_scalar_input_that_changes_is_honoured():
    def f(x, scale):
        return x * scale

    compiled = torch.compile(f, backend="tpu")
    x = make((5,))
    for value in (1.0, 2.0, 3.0):
        assert_close(compiled(x.to(TPU), torch.tensor(value)), x * value)


@pytest.mark.parametrize("first_call", ["strict", "defer_and_fuse"])
def test_a_compiled_graph_in_fused_mode_is_its_own_program_launched_from_its_plan(first_call):
    # The eager work pending before the graph is cut first, so the graph stays one program of its
    # own, which its plan launches again without recording it.
    def f(x):
        return x.exp() + 1

    compiled = torch.compile(f, backend="tpu")
    x = make((4,))
    with torch_tpu.execution_mode(first_call):
        assert_close(compiled(x.to(TPU) * 2), (x * 2).exp() + 1)
    with torch_tpu.execution_mode("defer_and_fuse"):
        for step in range(3):
            torch.tpu.synchronize()
            torch_tpu.metrics.reset()
            y = x.to(TPU) * (step + 3)
            z = compiled(y) - 1
            assert_close(z, (x * (step + 3)).exp())
            figures = torch_tpu.metrics.snapshot()
            assert figures["compiled_graph_direct_calls"] == 1, figures
            # y's program, the graph's, and z's at the read.
            assert figures["executions"] == 3 and figures["compiled_graph_executions"] == 1, figures
            if step > 0:
                assert figures["compiles"] == 0, figures


def test_a_graph_break_gives_two_programs_with_the_right_result():
    def f(x):
        y = x.sin() * 2
        print("graph break")
        return y.cos() + 1

    x = make((5,))
    compiled = torch.compile(f, backend="tpu")
    compiled(x.to(TPU))
    out, figures = counted(compiled, x.to(TPU))
    assert_close(out, f(x))
    assert figures["compiled_graph_calls"] == 2
    assert figures["executions"] == 2


def test_default_and_inductor_backends_are_routed_to_tpu_with_one_warning(monkeypatch):
    monkeypatch.setattr(routing, "_warned", False)

    def f(x):
        return (x * 3).relu().sum(0)

    x = make((4, 3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, figures = counted(torch.compile(f), x.to(TPU))
        assert_close(out, f(x))
        assert figures["compiled_graph_executions"] == 1
        torch._dynamo.reset()
        out = torch.compile(f, backend="inductor")(x.to(TPU) + 1)
        assert_close(out, f(x + 1))
    routed = [w for w in caught if "does not generate code for tpu" in str(w.message)]
    assert len(routed) == 1, [str(w.message) for w in caught]


def test_cpu_graphs_keep_inductor(monkeypatch):
    import torch._inductor.compile_fx as compile_fx

    seen = []

    def inductor(graph_module, example_inputs, **kwargs):
        seen.append([t.device.type for t in example_inputs if isinstance(t, torch.Tensor)])
        return graph_module.forward

    monkeypatch.setattr(compile_fx, "compile_fx", inductor)
    x = make((4,))
    torch.testing.assert_close(torch.compile(lambda t: t.exp() + 1)(x), x.exp() + 1)
    assert seen == [["cpu"]]


def test_dynamic_shapes_specialize_per_size_with_a_message():
    def f(x):
        return (x * 2).sum(0)

    compiled = torch.compile(f, backend="tpu", dynamic=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (3, 5, 7):
            x = make((n, 4))
            assert_close(compiled(x.to(TPU)), f(x))
    assert any("dynamic shapes" in str(w.message) for w in caught)
    # the same size again compiles nothing
    _, figures = counted(compiled, make((5, 4)).to(TPU))
    assert figures["compiles"] == 0


def test_new_sizes_of_a_compiled_graph_are_not_taken_for_a_volatile_fused_site():
    # Dynamo guards, counts and warns about a graph's new sizes; fused mode's detector of sites
    # whose programs keep changing shape is for eager recording, and must stay silent here.
    compiled = torch.compile(lambda x: (x * 2).sum(0), backend="tpu", dynamic=True)
    torch_tpu.metrics.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in range(20, 31):
            x = make((n, 4))
            assert_close(compiled(x.to(TPU)), (x * 2).sum(0))
    figures = torch_tpu.metrics.snapshot()
    assert figures["compiles"] + figures["disk_cache_hits"] >= 10 and figures["volatile_programs"] == 0, figures


def test_mark_dynamic_does_not_fail():
    def f(x):
        return x.softmax(-1)

    compiled = torch.compile(f, backend="tpu")
    for n in (2, 6):
        x = make((n, 4))
        tx = x.to(TPU)
        torch._dynamo.mark_dynamic(tx, 0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_close(compiled(tx), f(x))


def test_static_cache_generate_with_transformers_auto_compile_matches_cpu():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    cpu = transformers.LlamaForCausalLM(config).eval()
    tpu_model = copy.deepcopy(cpu).to(TPU)
    ids = torch.randint(0, 128, (2, 5))
    options = dict(max_new_tokens=6, do_sample=False, cache_implementation="static")
    expected = cpu.generate(ids, **options, disable_compile=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the routing note
        actual = tpu_model.generate(ids.to(TPU), **options)
    assert torch.equal(actual.cpu(), expected)
    assert torch_tpu.metrics.snapshot()["compiled_graph_calls"] > 0


def test_compiled_gpt2_training_step_matches_eager():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=96, n_positions=32, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0
    )
    model = transformers.GPT2LMHeadModel(config)
    model.config.attn_implementation = "eager"
    ids = [torch.randint(0, 96, (2, 12)) for _ in range(3)]

    def lm_loss(m, t):
        return m(input_ids=t, labels=t).loss

    params = {}
    for name in ("eager", "compiled"):
        m = copy.deepcopy(model).to(TPU).train()
        optimizer = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        step = make_train_step(m, optimizer, lm_loss)
        step = torch.compile(step, backend="tpu") if name == "compiled" else step
        for t in ids:
            step(t.to(TPU))
        params[name] = list(m.parameters())
    for p, p_eager in zip(params["compiled"], params["eager"], strict=True):
        assert_close(p, p_eager.cpu(), rtol=1e-4, atol=1e-5)


def test_a_compiled_graph_checks_its_indices_on_every_call():
    # The graph's plan launches its program again without recording: its checks still come back.
    def select_twice(x, index):
        return x.index_select(0, index) * 2

    compiled = torch.compile(select_twice, backend="tpu")
    x = make((5,)).to(TPU)
    for _ in range(3):
        index = torch.randint(0, 5, (3,))
        assert_close(compiled(x, index.to(TPU)), select_twice(x.cpu(), index))
    direct = torch_tpu.metrics.snapshot()["compiled_graph_direct_calls"]
    result = compiled(x, torch.tensor([0, 9, 4], device=TPU))
    assert torch_tpu.metrics.snapshot()["compiled_graph_direct_calls"] == direct + 1
    with pytest.raises(IndexError, match="index out of range in self") as raised:
        result.cpu()
    # The check names the user's line that the graph came from, not the graph's generated code.
    line = select_twice.__code__.co_firstlineno + 1
    assert f"{__file__}:{line} (return x.index_select(0, index) * 2)" in str(raised.value)
    torch.tpu.synchronize()


def test_a_compiled_graph_checks_argument_values_on_every_call():
    # binary_cross_entropy's input must be in [0, 1]: the plan's launches check it, as eager does.
    def loss(x, y):
        return torch.nn.functional.binary_cross_entropy(x, y)

    compiled = torch.compile(loss, backend="tpu")
    y = torch.rand(6).round()
    for _ in range(3):
        x = torch.rand(6) * 0.9 + 0.05
        assert_close(compiled(x.to(TPU), y.to(TPU)), loss(x, y))
    direct = torch_tpu.metrics.snapshot()["compiled_graph_direct_calls"]
    x[2] = 1.5
    result = compiled(x.to(TPU), y.to(TPU))
    assert torch_tpu.metrics.snapshot()["compiled_graph_direct_calls"] == direct + 1
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        result.cpu()
    torch.tpu.synchronize()


def test_a_failing_compiled_graph_names_the_op_and_the_user_line(tmp_path):
    # From a file: Dynamo keeps no stack traces for code without one (python -c).
    script = tmp_path / "user_script.py"
    script.write_text("""
import resource
resource.setrlimit(resource.RLIMIT_AS, (32 << 30, 32 << 30))
import torch, torch_tpu

def f(x):
    y = x * 2
    huge = torch.ones(2**38, device="tpu")
    return huge.sum() + y.sum()

try:
    torch.compile(f, backend="tpu")(torch.arange(4.0, device="tpu")).item()
except torch.OutOfMemoryError as error:
    print("ERROR", error)
print((torch.arange(4.0, device="tpu") + 1).cpu().tolist())
""")
    result = run_python(f"import runpy; runpy.run_path({str(script)!r})")
    assert result.returncode == 0, result.stderr
    assert "ERROR" in result.stdout, result.stdout
    assert f'The failing op: aten::fill_.Scalar at {script}:8 (huge = torch.ones(2**38, device="tpu"))' in result.stdout
    assert "[1.0, 2.0, 3.0, 4.0]" in result.stdout


def test_dump_programs_writes_the_graphs_and_their_programs(tmp_path):
    code = """
import torch, torch_tpu
f = torch.compile(lambda x: (x + 1).exp(), backend="tpu")
print(f(torch.ones(3, device="tpu")).cpu().tolist())
"""
    result = run_python(
        code, TORCH_TPU_DUMP_PROGRAMS="1", TORCH_TPU_DUMP_DIR=str(tmp_path), TORCH_TPU_CACHE_DIR=str(tmp_path / "c")
    )
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    graphs = [n for n in names if n.startswith("graph-")]
    assert graphs and any(n.startswith("program-") for n in names), names
    assert "aten.exp" in (tmp_path / graphs[0]).read_text()


def test_second_process_compiles_nothing(tmp_path):
    code = """
import torch, torch_tpu
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).to("tpu")
f = torch.compile(model, backend="tpu")
f(torch.ones(2, 8, device="tpu")).sum().backward()
torch.tpu.synchronize()
m = torch_tpu.metrics.snapshot()
print("COMPILES", m["compiles"], "GRAPHS", m["compiled_graph_calls"])
"""
    first = run_python(code, TORCH_TPU_CACHE_DIR=str(tmp_path))
    second = run_python(code, TORCH_TPU_CACHE_DIR=str(tmp_path))
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert "COMPILES 0 GRAPHS 2" not in first.stdout
    assert "COMPILES 0 GRAPHS 2" in second.stdout, second.stdout
