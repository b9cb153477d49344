"""Hugging Face Transformers runs unchanged on tpu: tiny GPT-2 and Llama models, built offline
from configs, give the CPU's logits, gradients, greedy generations and training losses, and load
onto tpu through from_pretrained(device_map=...)."""

from __future__ import annotations

import huggingface_hub
import pytest
import torch
from conftest import assert_close
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

import torch_tpu
import torch_tpu.metrics

TPU = torch.device("tpu")
VOCAB = 100
PAD, EOS = 0, VOCAB - 1


def gpt2() -> GPT2LMHeadModel:
    config = GPT2Config(
        n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=64, bos_token_id=EOS, eos_token_id=EOS
    )
    config.pad_token_id = PAD
    return GPT2LMHeadModel(config)


def llama() -> LlamaForCausalLM:
    # Fewer key/value heads than query heads: grouped-query attention repeats them.
    config = LlamaConfig(
        num_hidden_layers=2,
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        bos_token_id=EOS,
        eos_token_id=EOS,
        pad_token_id=PAD,
    )
    return LlamaForCausalLM(config)


MODELS = {"gpt2": gpt2, "llama": llama}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No hub access: huggingface_hub reads HF_HUB_OFFLINE at import, so set its constant too;
    any request then raises OfflineModeIsEnabled."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def cpu_and_tpu_models(name: str, train: bool = False):
    torch.manual_seed(0)
    cpu = MODELS[name]()
    device_model = type(cpu)(cpu.config)
    device_model.load_state_dict(cpu.state_dict())
    device_model.to(TPU)  # keeps tied weights tied (test_module_to_keeps_tied_weights)
    for model in (cpu, device_model):
        model.train(train)
    return cpu, device_model


def tokens(shape, seed: int) -> torch.Tensor:
    # Ids in [1, EOS): no pad or eos token inside the prompts.
    return torch.randint(1, EOS, shape, generator=torch.Generator().manual_seed(seed))


def left_padding_mask(batch: int, length: int) -> torch.Tensor:
    mask = torch.ones(batch, length, dtype=torch.long)
    mask[0, :3] = 0  # the first prompt is shorter, padded on the left
    return mask


@pytest.mark.parametrize("name", MODELS)
def test_forward_and_backward_match_cpu(name):
    cpu, device_model = cpu_and_tpu_models(name)
    ids = tokens((2, 9), seed=1)
    expected = cpu(ids, labels=ids)
    actual = device_model(ids.to(TPU), labels=ids.to(TPU))
    assert_close(actual.logits, expected.logits)
    assert_close(actual.loss, expected.loss)

    expected.loss.backward()
    actual.loss.backward()
    device_parameters = dict(device_model.named_parameters())
    for parameter_name, parameter in cpu.named_parameters():
        assert device_parameters[parameter_name].grad is not None, parameter_name
        assert_close(device_parameters[parameter_name].grad, parameter.grad)


def test_module_to_keeps_tied_weights():
    model = gpt2()
    embedding = model.transformer.wte.weight
    assert model.lm_head.weight is embedding
    model.to(TPU)
    assert model.lm_head.weight is model.transformer.wte.weight
    assert model.transformer.wte.weight is embedding  # moved in place, as on CUDA


@pytest.mark.parametrize("name", MODELS)
def test_forward_with_padding_mask_matches_cpu(name):
    cpu, device_model = cpu_and_tpu_models(name)
    ids = tokens((2, 8), seed=2)
    mask = left_padding_mask(2, 8)
    with torch.no_grad():
        expected = cpu(ids, attention_mask=mask).logits
        actual = device_model(ids.to(TPU), attention_mask=mask.to(TPU)).logits
    # Padded positions attend to nothing; only the real tokens' logits are defined.
    real = mask.bool()
    assert_close(actual[real.to(TPU)], expected[real])


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "left_padded"])
@pytest.mark.parametrize("name", MODELS)
def test_greedy_generate_matches_cpu(name, padded):
    cpu, device_model = cpu_and_tpu_models(name)
    ids = tokens((2, 6), seed=3)
    options = dict(max_new_tokens=10, do_sample=False)
    if padded:
        mask = left_padding_mask(2, 6)
        ids = ids.masked_fill(mask == 0, PAD)
        expected = cpu.generate(ids, attention_mask=mask, **options)
        actual = device_model.generate(ids.to(TPU), attention_mask=mask.to(TPU), **options)
    else:
        expected = cpu.generate(ids, **options)
        actual = device_model.generate(ids.to(TPU), **options)
    assert actual.device.type == "tpu"
    assert torch.equal(actual.cpu(), expected)


@pytest.mark.parametrize("name", MODELS)
def test_assisted_decoding_matches_cpu(name):
    # The assistant's candidates are checked with CPU index tensors (t[:, torch.tensor([0])]).
    cpu, device_model = cpu_and_tpu_models(name)
    torch.manual_seed(1)
    cpu_assistant = MODELS[name]()
    tpu_assistant = type(cpu_assistant)(cpu_assistant.config)
    tpu_assistant.load_state_dict(cpu_assistant.state_dict())
    tpu_assistant.to(TPU)
    ids = tokens((1, 6), seed=5)
    options = dict(max_new_tokens=10, do_sample=False)
    expected = cpu.generate(ids, assistant_model=cpu_assistant, **options)
    actual = device_model.generate(ids.to(TPU), assistant_model=tpu_assistant, **options)
    assert torch.equal(actual.cpu(), expected)


def long_context(name: str):
    """The test's model with room for 72 positions: no pad_token_id in the config (with one and no
    attention mask, every forward checks the ids for it on the host, a second cut per token)."""
    torch.manual_seed(0)
    if name == "gpt2":
        config = GPT2Config(
            n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=128, bos_token_id=EOS, eos_token_id=EOS
        )
        return GPT2LMHeadModel(config).eval()
    config = LlamaConfig(
        num_hidden_layers=2,
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention
        vocab_size=VOCAB,
        max_position_embeddings=128,
        bos_token_id=EOS,
        eos_token_id=EOS,
    )
    return LlamaForCausalLM(config).eval()


@pytest.mark.parametrize(
    ("name", "masked_batch", "beams"), [("gpt2", False, 1), ("llama", False, 1), ("gpt2", True, 1), ("gpt2", False, 2)]
)
def test_generate_compiles_per_bucket_of_the_cache_length(name, masked_batch, beams):
    # The default DynamicCache appends a token per step, so keys, values and ids grow: they are
    # kept padded to power-of-two buckets (csrc/exec/bucketing.h), and each new length is no new
    # program. Beam search also reorders the cache by beam each step (index_select), which keeps
    # the padding. Programs are counted from an empty in-memory cache (a disk hit counts as one).
    cpu = long_context(name)
    device_model = type(cpu)(cpu.config).eval()
    device_model.load_state_dict(cpu.state_dict())
    device_model.to(TPU)
    # A batch of two with its attention mask (all ones: the mask grows with the ids), or one prompt.
    ids = tokens((2, 8) if masked_batch else (1, 8), seed=6)
    mask = {"attention_mask": torch.ones_like(ids)} if masked_batch else {}
    options = dict(do_sample=False, pad_token_id=PAD, num_beams=beams)
    expected = cpu.generate(ids, max_new_tokens=64, min_new_tokens=64, **mask, **options)

    def programs(new_tokens: int, mode: str) -> int:
        torch_tpu._C._clear_memory_cache()
        torch_tpu.metrics.reset()
        with torch_tpu.execution_mode(mode):
            device_mask = {name: value.to(TPU) for name, value in mask.items()}
            lengths = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens)
            actual = device_model.generate(ids.to(TPU), **device_mask, **lengths, **options)
        assert torch.equal(actual.cpu(), expected[:, : 8 + new_tokens])
        snapshot = torch_tpu.metrics.snapshot()
        return snapshot["compiles"] + snapshot["disk_cache_hits"]

    strict_8, strict_64 = programs(8, "strict"), programs(64, "strict")
    assert strict_64 <= 1.5 * strict_8, (strict_8, strict_64)
    assert programs(64, "defer_and_fuse") <= 2 * 6 + 8


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_left_padded_generate_compiles_per_bucket_of_the_mask_length(mode):
    # A left-padded batch's 4-D attention mask is rebuilt every step from a range of the key
    # positions (transformers' sdpa_mask): the range grows like the cache, so the ops that build
    # the mask take its padded form too (csrc/ops/growing.h). Lengths 48 and 60 share a bucket
    # (64): generating up to either compiles the same programs, from an empty in-memory cache.
    cpu = long_context("gpt2")
    device_model = type(cpu)(cpu.config).eval()
    device_model.load_state_dict(cpu.state_dict())
    device_model.to(TPU)
    ids = tokens((2, 8), seed=6)
    mask = torch.ones_like(ids)
    ids[0, :3], mask[0, :3] = PAD, 0
    options = dict(do_sample=False, pad_token_id=PAD)
    expected = cpu.generate(ids, attention_mask=mask, max_new_tokens=52, min_new_tokens=52, **options)

    def programs(new_tokens: int) -> int:
        torch_tpu._C._clear_memory_cache()
        torch_tpu.metrics.reset()
        with torch_tpu.execution_mode(mode):
            lengths = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens)
            actual = device_model.generate(ids.to(TPU), attention_mask=mask.to(TPU), **lengths, **options)
        assert torch.equal(actual.cpu(), expected[:, : 8 + new_tokens])
        snapshot = torch_tpu.metrics.snapshot()
        return snapshot["compiles"] + snapshot["disk_cache_hits"]

    assert programs(52) == programs(40)


def test_greedy_generate_with_static_cache_matches_cpu():
    # The static cache writes each step into preallocated key/value tensors (index_copy_).
    # disable_compile: on tpu, transformers would torch.compile the decoding step with backend "tpu".
    cpu, device_model = cpu_and_tpu_models("llama")
    ids = tokens((2, 5), seed=4)
    options = dict(max_new_tokens=6, do_sample=False, cache_implementation="static", disable_compile=True)
    expected = cpu.generate(ids, **options)
    actual = device_model.generate(ids.to(TPU), **options)
    assert torch.equal(actual.cpu(), expected)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_greedy_generate_with_static_cache_compiles_nothing_on_a_second_call(mode):
    cpu, device_model = cpu_and_tpu_models("llama")
    ids = tokens((1, 5), seed=7)
    options = dict(max_new_tokens=8, do_sample=False, cache_implementation="static", disable_compile=True)
    expected = cpu.generate(ids, **options)
    with torch_tpu.execution_mode(mode):
        assert torch.equal(device_model.generate(ids.to(TPU), **options).cpu(), expected)
        torch_tpu.metrics.reset()
        assert torch.equal(device_model.generate(ids.to(TPU), **options).cpu(), expected)
    snapshot = torch_tpu.metrics.snapshot()
    assert snapshot["compiles"] + snapshot["disk_cache_hits"] == 0


@pytest.mark.parametrize(("name", "device_map"), [("gpt2", "tpu"), ("llama", "tpu"), ("llama", "auto")])
def test_from_pretrained_with_device_map_loads_onto_tpu(name, device_map, tmp_path):
    torch.manual_seed(0)
    cpu = MODELS[name]().eval()
    cpu.save_pretrained(tmp_path)
    assert huggingface_hub.constants.is_offline_mode()

    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, device_map=device_map)
    assert type(loaded) is type(cpu)
    for tensor_name, tensor in [*loaded.named_parameters(), *loaded.named_buffers()]:
        assert tensor.device == torch.device("tpu", 0), tensor_name
    if name == "gpt2":
        # The tied output projection stays tied on the device.
        assert loaded.lm_head.weight is loaded.transformer.wte.weight

    ids = tokens((2, 7), seed=5)
    with torch.no_grad():
        assert_close(loaded(ids.to(TPU)).logits, cpu(ids).logits)


def test_adamw_training_tracks_cpu():
    cpu, device_model = cpu_and_tpu_models("llama", train=True)
    cpu_optimizer = torch.optim.AdamW(cpu.parameters(), lr=1e-2)
    device_optimizer = torch.optim.AdamW(device_model.parameters(), lr=1e-2)
    cpu_losses, device_losses = [], []
    ids = tokens((2, 12), seed=10)  # one batch, so the loss must fall
    for _ in range(4):
        for model, optimizer, inputs, losses in (
            (cpu, cpu_optimizer, ids, cpu_losses),
            (device_model, device_optimizer, ids.to(TPU), device_losses),
        ):
            optimizer.zero_grad()
            loss = model(inputs, labels=inputs).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.detach())
    assert_close(torch.stack(device_losses), torch.stack(cpu_losses), rtol=1e-5, atol=1e-6)
    assert device_losses[-1].item() < device_losses[0].item()
    # AdamW divides by sqrt(v): rounding in near-zero gradients moves a weight by up to ~lr per
    # step, so the weights are compared looser than the losses.
    device_parameters = dict(device_model.named_parameters())
    for parameter_name, parameter in cpu.named_parameters():
        assert_close(device_parameters[parameter_name].detach(), parameter.detach(), rtol=1e-4, atol=1e-4)


def test_trainer_with_default_arguments_trains_like_the_cpu(tmp_path):
    # transformers' Trainer picks the tpu device itself, and its default optimizer for torch >= 2.8
    # is AdamW with fused=True (csrc/aten/fused_optimizers.cc). lr 1e-3 keeps AdamW's amplified
    # rounding of near-zero gradients (up to ~lr per step, test_adamw_training_tracks_cpu) under
    # the weights' tolerance: measured 1.8e-5, the same as with optim="adamw_torch".
    from transformers import Trainer, TrainingArguments

    ids = tokens((12, 10), seed=11)
    examples = [{"input_ids": row, "labels": row} for row in ids]
    runs = {}
    for device, model in zip(("cpu", "tpu"), cpu_and_tpu_models("llama", train=True), strict=True):
        arguments = TrainingArguments(
            output_dir=str(tmp_path / device), per_device_train_batch_size=4, max_steps=3, learning_rate=1e-3,
            logging_steps=1, report_to=[], save_strategy="no", disable_tqdm=True, use_cpu=device == "cpu",
        )  # fmt: skip
        assert arguments.optim == "adamw_torch_fused"
        trainer = Trainer(model=model, args=arguments, train_dataset=examples)
        trainer.train()
        assert trainer.optimizer.defaults["fused"] and next(model.parameters()).device.type == device
        losses = torch.tensor([entry["loss"] for entry in trainer.state.log_history if "loss" in entry])
        runs[device] = (losses, dict(model.named_parameters()))
    (cpu_losses, cpu_parameters), (tpu_losses, tpu_parameters) = runs["cpu"], runs["tpu"]
    assert len(tpu_losses) == 3
    torch.testing.assert_close(tpu_losses, cpu_losses, rtol=1e-5, atol=1e-5)
    for name, parameter in cpu_parameters.items():
        assert_close(tpu_parameters[name].detach(), parameter.detach(), rtol=1e-4, atol=1e-4)
