"""Growing shapes (csrc/exec/bucketing.h): a tensor grown by appending with cat, step after step
(a KV cache, the ids generate() extends), is kept padded to a power-of-two bucket with its true
length passed as a runtime scalar, so n appends compile O(log n) programs, not n. So is a range
that grows by a little from call to call, and what pointwise ops, indexing and sums make of them
(the attention mask of a left-padded batch, ops/growing.h). Their values, views, writes and
attention over them match the CPU at every step, in strict and fused mode."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_close, make

import torch_tpu
import torch_tpu.metrics

TPU = torch.device("tpu")
MODES = ["strict", "defer_and_fuse"]


def programs_loaded() -> int:
    """Executables this process needed that were not in memory: compiled, or read from disk."""
    snapshot = torch_tpu.metrics.snapshot()
    return snapshot["compiles"] + snapshot["disk_cache_hits"]


# (shape of the first part, the dim that grows): a KV cache (batch, heads, length, head_dim), a
# batch of ids (batch, length), and a dim 0 that grows.
LAYOUTS = [((2, 3, 6, 5), 2), ((2, 7), -1), ((9, 3), 0)]


def appended_part(shape, dim, dtype, seed):
    shape = list(shape)
    shape[dim] = 1
    return make(shape, dtype, seed=seed)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize(("shape", "dim"), LAYOUTS, ids=["kv", "ids", "dim0"])
def test_appending_matches_cpu_at_every_step(shape, dim, dtype, mode):
    expected = make(shape, dtype, seed=0)
    with torch_tpu.execution_mode(mode):
        actual = expected.to(TPU)
        for step in range(40):
            part = appended_part(shape, dim, dtype, seed=step + 1)
            expected = torch.cat([expected, part], dim=dim)
            actual = torch.cat([actual, part.to(TPU)], dim=dim)
            if step % 7 == 0 or step > 35:
                # The whole tensor, its newest position, a reduction over the grown dim.
                assert_close(actual, expected)
                assert_close(actual.narrow(dim, -1, 1), expected.narrow(dim, -1, 1))
                if dtype != torch.bfloat16:
                    assert_close(actual.sum(dim), expected.sum(dim))
                assert actual.is_contiguous()


@pytest.mark.parametrize("mode", MODES)
def test_appending_compiles_per_bucket_not_per_length(mode):
    # Odd sizes: programs no other test has compiled. Lengths 34..64 share one bucket (64).
    # Alongside, a batch of 3 id rows, read a column at a time (the newest ids, a batch's last token).
    cache = make((1, 3, 10, 7)).to(TPU)
    query = make((1, 3, 1, 7)).to(TPU)
    ids = torch.zeros(3, 10, dtype=torch.int64, device=TPU)
    volatile_before = torch_tpu.metrics.snapshot()["volatile_programs"]

    def step(seed):
        nonlocal cache, ids
        cache = torch.cat([cache, make((1, 3, 1, 7), seed=seed).to(TPU)], dim=2)
        F.scaled_dot_product_attention(query, cache, cache).cpu()
        ids = torch.cat([ids, torch.full((3, 1), seed, device=TPU)], dim=1)
        assert ids[:, -1].tolist() == [seed] * 3
        assert (ids[:, -2] + 1).tolist() == [seed] * 3 or seed == 0

    with torch_tpu.execution_mode(mode):
        for seed in range(24):
            step(seed)
        assert cache.shape[2] == 34 and ids.shape[1] == 34
        before = programs_loaded()
        for seed in range(24, 54):
            step(seed)
        assert programs_loaded() == before
        # Bucketed growth is the cure for shapes that change every step, not a volatile site.
        assert torch_tpu.metrics.snapshot()["volatile_programs"] == volatile_before


@pytest.mark.parametrize("mode", MODES)
def test_reordering_a_grown_cache_by_beam_matches_cpu_and_compiles_per_bucket(mode):
    # Beam search: each step the cache's batch rows are reordered with index_select (dim 0, the
    # beams), then a token appended (dim 2). The reorder keeps the padded form, so lengths 34..64
    # share the programs of one bucket; a reorder along the grown dim itself takes the plain path.
    beams, heads, width = 3, 2, 5  # odd sizes: programs no other test compiled
    expected = make((beams, heads, 10, width), seed=0)
    actual = expected.to(TPU)
    query = make((beams, heads, 1, width), seed=1)
    generator = torch.Generator().manual_seed(2)

    def step(seed):
        nonlocal expected, actual
        order = torch.randint(0, beams, (beams,), generator=generator)
        expected = expected.index_select(0, order)
        actual = actual.index_select(0, order.to(TPU))
        part = make((beams, heads, 1, width), seed=seed)
        expected, actual = torch.cat([expected, part], 2), torch.cat([actual, part.to(TPU)], 2)
        attended = F.scaled_dot_product_attention(query.to(TPU), actual, actual)
        assert_close(attended, F.scaled_dot_product_attention(query, expected, expected), rtol=1e-5, atol=1e-5)

    with torch_tpu.execution_mode(mode):
        for seed in range(3, 27):
            step(seed)
        assert actual.shape[2] == 34
        assert_close(actual, expected)
        before = programs_loaded()
        for seed in range(27, 57):
            step(seed)
        assert programs_loaded() == before
        assert_close(actual, expected)
        assert_close(actual.sum(2), expected.sum(2), rtol=1e-5, atol=1e-5)
        positions = torch.tensor([0, 5, 63])
        assert_close(actual.index_select(2, positions.to(TPU)), expected.index_select(2, positions))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("is_causal", [False, True])
def test_attention_over_a_grown_cache_matches_cpu(is_causal, mode):
    key, value = make((2, 4, 8, 16), seed=1), make((2, 4, 8, 16), seed=2)
    tpu_key, tpu_value = key.to(TPU), value.to(TPU)
    with torch_tpu.execution_mode(mode):
        for step in range(20):
            new_key, new_value = make((2, 4, 1, 16), seed=10 + step), make((2, 4, 1, 16), seed=50 + step)
            key, value = torch.cat([key, new_key], 2), torch.cat([value, new_value], 2)
            tpu_key = torch.cat([tpu_key, new_key.to(TPU)], 2)
            tpu_value = torch.cat([tpu_value, new_value.to(TPU)], 2)
            query = make((2, 4, 2, 16), seed=90 + step)
            expected = F.scaled_dot_product_attention(query, key, value, is_causal=is_causal)
            actual = F.scaled_dot_product_attention(query.to(TPU), tpu_key, tpu_value, is_causal=is_causal)
            assert_close(actual, expected, rtol=1e-5, atol=1e-5)
        # A boolean mask over the true length takes the unpadded path; it still matches.
        mask = torch.rand(2, 1, 2, key.shape[2], generator=torch.Generator().manual_seed(3)) > 0.3
        expected = F.scaled_dot_product_attention(query, key, value, attn_mask=mask)
        actual = F.scaled_dot_product_attention(query.to(TPU), tpu_key, tpu_value, attn_mask=mask.to(TPU))
        assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def decoding_mask(padding_mask, length, device):
    """The attention bias a decoding step of a left-padded batch builds, as HF's sdpa_mask does:
    a range of the key positions, unsqueezed, compared with the query's position, and the 2-D
    padding mask indexed at the batch rows and those positions; then a float bias."""
    keys = torch.arange(length, device=device) + 0
    batch = torch.arange(padding_mask.shape[0], device=device)
    query_position = torch.tensor([length - 1], device=device)
    causal = keys[None, None, None, :] <= query_position[None, None, :, None]
    padded = padding_mask.bool()[batch[:, None, None, None], keys[None, None, None, :]]
    mask = (causal & padded).expand(padding_mask.shape[0], -1, 1, length)
    return torch.where(mask, torch.tensor(0.0), torch.tensor(float("-inf"))), padding_mask.bool().sum()


@pytest.mark.parametrize("mode", MODES)
def test_a_left_padded_decoding_mask_matches_cpu_and_compiles_per_bucket(mode):
    # The range of key positions grows by one each step, like the cache and the 2-D mask it
    # indexes: the comparisons, the gather, the sum and the attention over the bias all take the
    # padded form, so lengths 34..64 share the programs of one bucket. Odd sizes: programs no other
    # test compiled.
    batch, heads, width = 3, 2, 5
    padding_mask = torch.ones(batch, 9, dtype=torch.int64)
    padding_mask[0, :4] = 0
    padding_mask[2, :1] = 0
    key, value = make((batch, heads, 9, width), seed=1), make((batch, heads, 9, width), seed=2)
    tpu = {"mask": padding_mask.to(TPU), "key": key.to(TPU), "value": value.to(TPU)}
    cpu = {"mask": padding_mask, "key": key, "value": value}

    def step(seed, check):
        for state, device in ((cpu, "cpu"), (tpu, TPU)):
            state["mask"] = torch.cat([state["mask"], torch.ones(batch, 1, dtype=torch.int64, device=device)], 1)
            for name in ("key", "value"):
                part = make((batch, heads, 1, width), seed=seed + (name == "value")).to(device)
                state[name] = torch.cat([state[name], part], 2)
            length = state["mask"].shape[1]
            state["bias"], state["unmasked"] = decoding_mask(state["mask"], length, device)
            query = make((batch, heads, 1, width), seed=seed + 2).to(device)
            state["out"] = F.scaled_dot_product_attention(query, state["key"], state["value"], attn_mask=state["bias"])
        assert tpu["unmasked"].item() == cpu["unmasked"].item()
        if check:
            assert_close(tpu["bias"], cpu["bias"])
            assert_close(tpu["out"], cpu["out"], rtol=1e-5, atol=1e-5)

    with torch_tpu.execution_mode(mode):
        for seed in range(3, 28):
            step(seed, check=True)
        assert tpu["mask"].shape[1] == 34
        before = programs_loaded()
        for seed in range(28, 58):
            step(seed, check=False)
        assert programs_loaded() == before
        step(58, check=True)


def test_grown_ranges_give_the_cpu_values_through_negative_and_plain_operands():
    # A range read at negative positions of a grown tensor wraps by its true length; a plain
    # operand as long as the range (which cannot be padded) takes the plain path; a range that
    # shrinks, or is reduced without being grown, is an ordinary range.
    expected = torch.arange(24.0).reshape(2, 12)
    actual = expected.to(TPU)
    for step in range(20):
        part = torch.full((2, 1), float(step))
        expected, actual = torch.cat([expected, part], 1), torch.cat([actual, part.to(TPU)], 1)
        length = expected.shape[1]
        positions = torch.arange(length) - length
        tpu_positions = torch.arange(length, device=TPU) - length
        assert_close(tpu_positions, positions)
        rows = torch.tensor([[1], [0]])
        assert_close(actual[rows.to(TPU), tpu_positions[None, :]], expected[rows, positions[None, :]])
        plain = torch.linspace(0, 1, length)
        assert_close(torch.arange(length, device=TPU) * plain.to(TPU), torch.arange(length) * plain)
        assert_close((torch.arange(length, device=TPU) > 5).sum(), (torch.arange(length) > 5).sum())
    assert_close(torch.arange(7, device=TPU) * 2, torch.arange(7) * 2)


def grown(shape, dim, steps, dtype=torch.float32):
    """A CPU tensor and its tpu copy, both grown by `steps` appends (the tpu one is padded)."""
    expected = make(shape, dtype, seed=0)
    actual = expected.to(TPU)
    for step in range(steps):
        part = appended_part(shape, dim, dtype, seed=step + 1)
        expected, actual = torch.cat([expected, part], dim), torch.cat([actual, part.to(TPU)], dim)
    return expected, actual


@pytest.mark.parametrize(("shape", "dim"), LAYOUTS, ids=["kv", "ids", "dim0"])
def test_writes_views_and_copies_of_a_grown_tensor_match_cpu(shape, dim):
    expected, actual = grown(shape, dim, steps=5)
    # Through views: a write to the newest position, then to the whole tensor in place.
    expected.narrow(dim, -1, 1).fill_(7)
    actual.narrow(dim, -1, 1).fill_(7)
    assert_close(actual, expected)
    view, expected_view = actual.transpose(0, -1), expected.transpose(0, -1)
    assert_close(view * 2, expected_view * 2)
    assert_close(actual.flatten()[3:11], expected.flatten()[3:11])
    expected.mul_(3)
    actual.mul_(3)
    assert_close(actual, expected)
    # Appending goes on after the writes, and copies see the right elements.
    for step in range(6):
        part = appended_part(shape, dim, torch.float32, seed=100 + step)
        expected, actual = torch.cat([expected, part], dim), torch.cat([actual, part.to(TPU)], dim)
    assert torch.equal(actual.cpu(), expected)
    assert_close(actual.clone(), expected)
    assert_close(actual.to(torch.bfloat16), expected.to(torch.bfloat16))
    assert torch.equal(torch.from_numpy(actual.cpu().numpy()), expected)
    # Storage-level access: the untyped storage holds the tensor's elements, not its padding.
    assert actual.untyped_storage().nbytes() == expected.untyped_storage().nbytes()
    assert torch.equal(torch.empty(0).set_(actual.untyped_storage().cpu()), expected.flatten())
    # Resizing keeps the elements (the padding is not among them).
    resized, expected_resized = actual.clone(), expected.clone()
    assert_close(actual.view(-1), expected.view(-1))
    actual.resize_(actual.numel() + 4)
    expected.resize_(expected.numel() + 4)
    assert_close(actual[: resized.numel()], expected_resized.view(-1))


@pytest.mark.parametrize(("shape", "dim"), [((1, 8), 1), ((2, 8), 1)], ids=["row", "batch"])
def test_a_grown_tensor_viewed_as_another_dtype_matches_cpu(shape, dim):
    # Bytes grown to 20 per row (padded to 32), read as int32 (5 per row).
    expected, actual = grown(shape, dim, steps=12, dtype=torch.uint8)
    assert torch.equal(actual.view(torch.int32).cpu(), expected.view(torch.int32))
    assert torch.equal(actual.view(torch.int32)[:, -1].cpu(), expected.view(torch.int32)[:, -1])


def test_cat_out_into_a_view_and_type_promotion_match_cpu():
    expected, actual = grown((2, 3, 6, 5), 2, steps=4)
    part = make((2, 3, 1, 5), torch.bfloat16, seed=7)
    # f32 cache + bf16 token: the result is f32, the token converted.
    assert_close(torch.cat([actual, part.to(TPU)], 2), torch.cat([expected, part], 2))
    # out= into a view of a larger buffer cannot take the padded layout: written through the view.
    out, expected_out = torch.zeros(2, 3, 12, 5, device=TPU), torch.zeros(2, 3, 12, 5)
    torch.cat([actual, part.float().to(TPU)], 2, out=out[:, :, :11])
    torch.cat([expected, part.float()], 2, out=expected_out[:, :, :11])
    assert_close(out, expected_out)
    # A cat of comparable parts is not padded, and a cat onto it is exact.
    halves = torch.cat([actual, actual], 2)
    assert_close(torch.cat([halves, part.float().to(TPU)], 2), torch.cat([expected, expected, part.float()], 2))


def test_grown_tensor_as_a_compiled_function_input_matches_cpu(fresh_dynamo):
    expected, actual = grown((2, 3, 6, 5), 2, steps=12)

    def f(x):
        return (x * 2).softmax(-2) + 1

    compiled = torch.compile(f, backend="tpu")
    for _ in range(2):
        assert_close(compiled(actual), f(expected))


def test_padding_counts_in_memory_and_is_freed():
    torch.tpu.synchronize()
    baseline = torch.tpu.memory_allocated()
    expected, actual = grown((1, 2, 20, 8), 2, steps=5)  # length 25, padded to 32
    assert_close(actual, expected)
    assert torch.tpu.memory_allocated() - baseline == 1 * 2 * 32 * 8 * 4
    del actual
    assert torch.tpu.memory_allocated() == baseline
