"""torch.distributed on tpu: the c10d backend against local math on the CPU.

Each world is launched once, like torchrun (one process per rank, loopback, a timeout on the
launch), and runs several cases from distributed_cases.py; the tests below check each case's
results. Inputs are small integers, so every reduction order gives the exact result.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
from conftest import run_python
from distributed_cases import DTYPES, PREMUL_FACTOR, SUBGROUPS, rank_input, reduce_ops_for

import torch_tpu

CASES_FILE = os.path.join(os.path.dirname(__file__), "distributed_cases.py")
LAUNCH_TIMEOUT_S = 240
# The worlds are launched once per module (fixtures below): under pytest-xdist every test here runs
# on one worker, or each worker would launch them again.
pytestmark = pytest.mark.xdist_group("distributed_worlds")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(cases: list[str], world: int, tmp_path, env: dict | None = None) -> list[dict]:
    """Runs `cases` on `world` ranks; returns each rank's {case: result}."""
    out = tmp_path / f"world{world}-{'-'.join(cases)}"
    out.mkdir()
    port = free_port()
    procs = []
    for rank in range(world):
        rank_env = dict(os.environ)
        rank_env.update(
            RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_RANK=str(rank),
            LOCAL_WORLD_SIZE=str(world),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            TORCH_TPU_TEST_OUT=str(out),
        )
        rank_env.pop("TORCH_TPU_NUM_DEVICES", None)
        rank_env.update(env or {})
        procs.append(
            subprocess.Popen(
                [sys.executable, CASES_FILE, ",".join(cases)],
                env=rank_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    logs = []
    try:
        for proc in procs:
            logs.append(proc.communicate(timeout=LAUNCH_TIMEOUT_S)[0])
    finally:
        for proc in procs:
            proc.kill()
    for rank, proc in enumerate(procs):
        assert proc.returncode == 0, f"rank {rank} exited with {proc.returncode}:\n{logs[rank][-4000:]}"
    return [torch.load(out / f"rank{rank}.pt", weights_only=False) for rank in range(world)]


def result(results: list[dict], case: str, rank: int):
    value = results[rank][case]
    if isinstance(value, dict) and "traceback" in value:
        pytest.fail(f"case {case} failed on rank {rank}:\n{value['traceback']}")
    return value


COMMON_CASES = ["collectives", "collective_details", "errors", "ddp", "fsdp", "dtensor", "tensor_parallel"]
# Subgroups and meshes need 4 ranks (HSDP a 2x2 mesh); the checkpoint saved at world 4 is loaded at
# world 2.
WORLD4_CASES = ["subgroup_collectives", "device_mesh", "hsdp", "checkpoint_save"]


_LAUNCHED: dict[int, list[dict]] = {}


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("checkpoint")


@pytest.fixture(scope="module")
def launched(tmp_path_factory, checkpoint_dir):
    """World size -> each rank's results; every world is launched once per module."""

    def results_for(world: int) -> list[dict]:
        if world not in _LAUNCHED:
            cases = COMMON_CASES + (WORLD4_CASES if world == 4 else [])
            env = {"TORCH_TPU_TEST_CKPT": str(checkpoint_dir / "world4")}
            _LAUNCHED[world] = launch(cases, world, tmp_path_factory.mktemp("dist"), env=env)
        return _LAUNCHED[world]

    yield results_for
    _LAUNCHED.clear()


@pytest.fixture(params=[2, 4], ids=lambda w: f"world{w}")
def world_results(request, launched):
    return request.param, launched(request.param)


@pytest.fixture
def world4_results(launched):
    return 4, launched(4)


# ---- Registration, in this process (world size 1) ----


@pytest.fixture
def single_rank_group():
    """Yields an init function for a one-rank group on a HashStore; destroys the group after."""

    def init(backend=None):
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
        return dist.group.WORLD

    yield init
    if dist.is_initialized():
        dist.destroy_process_group()


@pytest.mark.parametrize("backend", [None, "tpu", "tpu_dist", "cpu:gloo,tpu:tpu"])
def test_backend_names_and_the_default(single_rank_group, backend):
    group = single_rank_group(backend)
    assert isinstance(group._get_backend(torch.device("tpu")), torch_tpu._C._ProcessGroupTPU)
    t = torch.arange(4.0, device="tpu")
    dist.all_reduce(t)
    torch.testing.assert_close(t.cpu(), torch.arange(4.0))
    if backend == "cpu:gloo,tpu:tpu":
        c = torch.arange(3.0)
        dist.all_reduce(c)  # the CPU half of the string: Gloo
        assert dist.get_backend(group) == "cpu:gloo,tpu:tpu"
    elif backend is None:
        assert dist.Backend.default_device_backend_map["tpu"] == "tpu"


def test_transport_override(single_rank_group, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_DIST_TRANSPORT", "program")
    with pytest.raises(RuntimeError, match="TORCH_TPU_DIST_TRANSPORT=program: collectives inside the program need"):
        single_rank_group("tpu")
    monkeypatch.setenv("TORCH_TPU_DIST_TRANSPORT", "nccl")
    with pytest.raises(ValueError, match="TORCH_TPU_DIST_TRANSPORT must be one of host, program, got 'nccl'"):
        torch_tpu.distributed.transport()


# ---- Expected values, from every rank's inputs ----


def expected_reduction(op: str, inputs: list[torch.Tensor]) -> torch.Tensor:
    dtype = inputs[0].dtype
    stacked = torch.stack([x.to(torch.float64) for x in inputs])
    if op in ("SUM", "AVG"):
        value = stacked.sum(0)
        if op == "AVG":
            value = value / len(inputs) if dtype.is_floating_point else torch.trunc(value / len(inputs))
    elif op == "PREMUL_SUM":
        value = (stacked * PREMUL_FACTOR).sum(0)
    elif op == "PRODUCT":
        value = stacked.prod(0)
    else:
        value = stacked.amax(0) if op == "MAX" else stacked.amin(0)
    return value.to(dtype)


def assert_equal(actual, expected, what):
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, msg=lambda m: f"{what}: {m}")


def dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ---- Tests ----


def check_all_reduce(results, case: str, groups: list[list[int]], dtype) -> None:
    d = dtype_name(dtype)
    for members in groups:
        for op in reduce_ops_for(dtype):
            inputs = [rank_input(f"ar-{d}-{op}", r, (3, 5), dtype) for r in members]
            for r in members:
                actual = result(results, case, r)[f"all_reduce/{d}/{op}"]
                assert_equal(actual, expected_reduction(op, inputs), f"{case} all_reduce {op} rank {r}")


def check_data_movement(results, case: str, groups: list[list[int]], dtype) -> None:
    d = dtype_name(dtype)
    for members in groups:
        n, root, last = len(members), members[0], members[-1]
        expected_gather = torch.stack([rank_input(f"ag-{d}", r, (2, 3), dtype) for r in members])
        expected_gather_tensor = torch.cat([rank_input(f"agt-{d}", r, (2, 3), dtype) for r in members])
        reduced = expected_reduction("SUM", [rank_input(f"rs-{d}", r, (n * 2, 3), dtype) for r in members])
        a2a_inputs = [rank_input(f"a2a-{d}", r, (n * 2,), dtype) for r in members]
        for me, r in enumerate(members):
            got = result(results, case, r)
            what = f"{case} rank {r}"
            assert_equal(got[f"broadcast/{d}"], rank_input(f"bc-{d}", last, (7,), dtype), f"broadcast {what}")
            assert_equal(got[f"all_gather/{d}"], expected_gather, f"all_gather {what}")
            assert_equal(got[f"all_gather_into_tensor/{d}"], expected_gather_tensor, f"all_gather_into_tensor {what}")
            assert_equal(got[f"reduce_scatter_tensor/{d}"], reduced[2 * me : 2 * me + 2], f"reduce_scatter {what}")
            expected_a2a = torch.cat([source[2 * me : 2 * me + 2] for source in a2a_inputs])
            assert_equal(got[f"all_to_all_single/{d}"], expected_a2a, f"all_to_all_single {what}")
            assert_equal(got[f"scatter/{d}"], rank_input(f"sc-{d}-{me}", root, (3,), dtype), f"scatter {what}")
            left = members[(me - 1) % n]
            assert_equal(got[f"send_recv/{d}"], rank_input(f"p2p-{d}", left, (4,), dtype), f"recv {what}")
        reduce_inputs = [rank_input(f"red-{d}", r, (4,), dtype) for r in members]
        at_root = result(results, case, root)
        assert_equal(at_root[f"reduce/{d}"], expected_reduction("SUM", reduce_inputs), f"{case} reduce at the root")
        for me, r in enumerate(members[1:], start=1):  # a non-root's tensor is left as it was
            assert_equal(result(results, case, r)[f"reduce/{d}"], reduce_inputs[me], f"{case} reduce rank {r}")
        expected_pieces = torch.stack([rank_input(f"ga-{d}", r, (3,), dtype) for r in members])
        assert_equal(at_root[f"gather/{d}"], expected_pieces, f"{case} gather at the root")


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
def test_all_reduce_every_op(world_results, dtype):
    world, results = world_results
    check_all_reduce(results, "collectives", [list(range(world))], dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
def test_data_movement_collectives(world_results, dtype):
    world, results = world_results
    check_data_movement(results, "collectives", [list(range(world))], dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
def test_collective_matrix_on_subgroups(world4_results, dtype):
    _, results = world4_results
    check_all_reduce(results, "subgroup_collectives", SUBGROUPS, dtype)
    check_data_movement(results, "subgroup_collectives", SUBGROUPS, dtype)


def test_device_mesh_sub_meshes(world4_results):
    world, results = world4_results
    rows, columns = [[0, 1], [2, 3]], [[0, 2], [1, 3]]  # the tp groups, and the dp groups
    for name, groups in (("tp", rows), ("dp", columns)):
        for members in groups:
            expected = expected_reduction("SUM", [rank_input(f"mesh-{name}", r, (4,), torch.float32) for r in members])
            for r in members:
                assert_equal(result(results, "device_mesh", r)[name], expected, f"mesh['{name}'] rank {r}")


def test_uneven_all_to_all_async_views_and_coalescing(world_results):
    world, results = world_results
    f32 = torch.float32
    for r in range(world):
        got = result(results, "collective_details", r)
        pieces = []
        for src in range(world):
            splits = [i + src + 1 for i in range(world)]
            source = rank_input("a2a-uneven", src, (sum(splits), 2), f32)
            start = sum(splits[:r])
            pieces.append(source[start : start + splits[r]])
        assert_equal(got["all_to_all_uneven"], torch.cat(pieces), f"uneven all_to_all rank {r}")
        for key in ("async", "future"):
            expected = expected_reduction("SUM", [rank_input(key, s, (6,), f32) for s in range(world)])
            assert_equal(got[f"async_{'wait' if key == 'async' else 'future'}"], expected, f"{key} rank {r}")
        base = torch.zeros(4, 6)
        base[1:3, ::2] = expected_reduction("SUM", [rank_input("view", s, (2, 3), f32) for s in range(world)])
        assert_equal(got["view_base"], base, f"all_reduce into a view, rank {r}")
        for i, tensor in enumerate(got["coalesced"]):
            expected = expected_reduction("SUM", [rank_input(f"coal-{i}", s, (i + 2,), f32) for s in range(world)])
            assert_equal(tensor, expected, f"coalesced tensor {i} rank {r}")


def test_object_collectives_and_subgroups(world_results):
    world, results = world_results
    for r in range(world):
        got = result(results, "collective_details", r)
        assert got["all_gather_object"] == [{"rank": s, "square": s * s} for s in range(world)]
        assert got["broadcast_object_list"] == ["from-0", 0]
        assert got["scatter_object_list"] == ("to", r)
        assert got["gather_object"] == ([f"rank {s}" for s in range(world)] if r == 0 else None)
        assert got["current_device"] == r, "the device index is not the local rank"
        members = [s for s in range(world) if s % 2 == r % 2]
        expected = expected_reduction("SUM", [rank_input("subgroup", s, (5,), torch.float32) for s in members])
        assert_equal(got["subgroup_all_reduce"], expected, f"subgroup all_reduce rank {r}")
        gathered = torch.cat([rank_input("subgroup-ag", s, (2,), torch.float32) for s in members])
        assert_equal(got["subgroup_all_gather"], gathered, f"subgroup all_gather rank {r}")


def test_bad_input_fails_on_every_rank_with_a_clear_error(world_results):
    world, results = world_results
    for r in range(world):
        got = result(results, "errors", r)
        shape = got["shape_mismatch"]
        assert shape is not None and shape.startswith("ValueError: tpu: all_reduce was called with tensors that differ")
        assert "rank 0 has float32[3]" in shape and "rank 1 has float32[4]" in shape, shape
        dtype = got["dtype_mismatch"]
        assert dtype is not None and "rank 0 has float32[3]" in dtype and "rank 1 has int32[3]" in dtype, dtype
        assert got["cpu_tensor"] == "RuntimeError: No backend type associated with device type cpu"
        assert got["unsupported_op"] == "RuntimeError: Cannot use ReduceOp.BAND with non-integral dtype"
        assert_equal(got["after_errors"], torch.full((3,), float(world)), "a collective after the errors")


def test_a_missing_rank_times_out_naming_it(tmp_path):
    world = 2
    results = launch(["timeout"], world, tmp_path, env={"TORCH_TPU_TEST_PG_TIMEOUT": "5"})
    error = result(results, "timeout", 0)["error"]
    assert error is not None, "the collective completed without rank 1"
    assert error.startswith("DistBackendError: tpu: all_reduce (collective 2 of this group, rank 0 of 2)"), error
    assert "Ranks that never joined it: 1\n" in error + "\n", error


# ---- Training with the libraries, unchanged ----

# Data parallel training sums the same products in another order than one process does.
TRAINING_TOLERANCE = dict(rtol=1e-5, atol=1e-6)


def assert_same_training(got: dict, reference: dict, what: str, **tolerance) -> None:
    tolerance = tolerance or TRAINING_TOLERANCE
    for name, expected in reference["params"].items():
        torch.testing.assert_close(
            got["params"][name].float(), expected, **tolerance, msg=lambda m, name=name: f"{what} {name}: {m}"
        )
    losses, expected_losses = got.get("losses", []), reference.get("losses", [])
    assert len(losses) == len(expected_losses), f"{what}: {len(losses)} losses, expected {len(expected_losses)}"
    for step, (actual, expected) in enumerate(zip(losses, expected_losses, strict=True)):
        torch.testing.assert_close(actual, expected, **tolerance, msg=lambda m, step=step: f"{what} loss {step}: {m}")


def test_ddp_equals_single_process_training(world_results):
    world, results = world_results
    reference = result(results, "ddp", 0)
    for r in range(world):
        got = result(results, "ddp", r)
        for variant in ("buckets", "unused", "comm_hook", "no_sync"):
            assert_same_training(got[variant], reference[f"{variant}/reference"], f"DDP {variant} rank {r}")


def test_fsdp2_equals_single_process_training(world_results):
    world, results = world_results
    reference = result(results, "fsdp", 0)["reference"]
    for r in range(world):
        got = result(results, "fsdp", r)
        assert_same_training(got["reshard"], reference, f"FSDP2 rank {r}")
        assert_same_training(got["no_reshard"], reference, f"FSDP2 without resharding rank {r}")
        # bf16 compute with f32 reduction and master weights: within bf16's precision.
        assert_same_training(got["bf16"], reference, f"FSDP2 bf16 rank {r}", rtol=2e-2, atol=2e-3)
        assert got["bf16"]["params"]["first.weight"].dtype == torch.float32


def test_hsdp_on_a_2x2_mesh_equals_single_process_training(world4_results):
    world, results = world4_results
    reference = result(results, "hsdp", 0)["reference"]
    for r in range(world):
        assert_same_training(result(results, "hsdp", r)["hsdp"], reference, f"HSDP rank {r}")


def test_dtensor_redistribute_matrix_and_sharded_matmul(world_results):
    world, results = world_results
    f32 = torch.float32
    full = rank_input("dt-full", 0, (2 * world, 3 * world), f32)
    partial_sum = expected_reduction("SUM", [rank_input("dt-partial", r, full.shape, f32) for r in range(world)])
    a = rank_input("dt-a", 0, (2 * world, 4 * world), f32)
    b = rank_input("dt-b", 0, (4 * world, 3), f32)

    def local(tensor, placement, r):
        if placement == "R":
            return tensor
        return tensor.chunk(world, dim=int(placement[1]))[r]

    for r in range(world):
        got = result(results, "dtensor", r)
        assert_equal(got["shard0_local"], full.chunk(world)[r], f"distribute_tensor rank {r}")
        assert_equal(got["shard0_full"], full, f"full_tensor rank {r}")
        for key, actual in got.items():
            if not key.startswith("redistribute/"):
                continue
            source, target = key.removeprefix("redistribute/").split("->")
            expected_full = partial_sum if source == "P" else full
            assert_equal(actual, local(expected_full, target, r), f"{key} rank {r}")
        assert got["matmul_rows"][0] == "S(0)"
        assert_equal(got["matmul_rows"][1], a @ b, f"row-sharded matmul rank {r}")
        assert got["matmul_inner"][0] == "P(sum)"
        assert_equal(got["matmul_inner"][1], a @ b, f"contraction-sharded matmul rank {r}")
    assert len([k for k in result(results, "dtensor", 0) if k.startswith("redistribute/")]) == 9


def test_dtensor_rng_tracker(world_results):
    world, results = world_results
    sharded = [result(results, "dtensor", r)["random_sharded_full"] for r in range(world)]
    replicated = [result(results, "dtensor", r)["random_replicated"] for r in range(world)]
    for r in range(1, world):
        assert torch.equal(sharded[r], sharded[0]), "ranks disagree on a sharded random tensor"
        assert torch.equal(replicated[r], replicated[0]), "a replicated random tensor differs between ranks"
    shards = sharded[0].chunk(world)
    for i in range(1, world):
        assert not torch.equal(shards[i], shards[0]), "two shards drew the same random numbers"
    assert 0.7 < sharded[0].std().item() < 1.3 and abs(sharded[0].mean().item()) < 0.5
    assert 0.0 <= replicated[0].min().item() and replicated[0].max().item() <= 1.0


def test_tensor_parallel_transformer_block(world_results):
    world, results = world_results
    reference = result(results, "tensor_parallel", 0)["reference"]
    for r in range(world):
        got = result(results, "tensor_parallel", r)
        torch.testing.assert_close(got["output"], reference["output"], **TRAINING_TOLERANCE)
        assert_same_training(got, reference, f"tensor parallel rank {r}")


def test_checkpoint_saved_at_world_4_loads_at_world_2(world4_results, checkpoint_dir, tmp_path):
    world, results = world4_results
    saved = result(results, "checkpoint_save", 0)
    env = {"TORCH_TPU_TEST_CKPT": str(checkpoint_dir / "world4")}
    loaded = result(launch(["checkpoint_load"], 2, tmp_path, env=env), "checkpoint_load", 0)
    assert (
        set(loaded["model"])
        == set(saved["model"])
        == {f"{m}.{p}" for m in ("first", "second", "extra") for p in ("weight", "bias")}
    )
    for name, value in saved["model"].items():
        assert_equal(loaded["model"][name], value, f"parameter {name}")
    for name, state in saved["optim"].items():
        assert state["exp_avg"].abs().sum() > 0, "the saved optimizer state is empty"
        for key, value in state.items():
            assert_equal(loaded["optim"][name][key], value, f"optimizer {name}.{key}")


# ---- The two transports agree ----

IN_PROGRAM_CHILD = """
import os, torch, torch_tpu
from torch_tpu.distributed._in_program import run_collective
cases = torch.load(os.environ["CASES"])
results = {}
for name, (kind, op, inputs) in cases.items():
    outputs = run_collective(kind, [x.to(f"tpu:{i}") for i, x in enumerate(inputs)], op=op)
    results[name] = [o.cpu() for o in outputs]
torch.save(results, os.environ["RESULTS"])
"""


def test_in_program_collectives_equal_the_host_staged_ones(world4_results, tmp_path):
    """Transport (b), one process driving 4 CPU devices, against transport (a) at world 4."""
    world, results = world4_results
    cases, staged = {}, {}
    for dtype in (torch.float32, torch.bfloat16, torch.int32):
        d = dtype_name(dtype)
        for op in reduce_ops_for(dtype):
            if op == "PREMUL_SUM":
                continue  # its factor is fixed by the worker; the in-program test covers it
            inputs = [rank_input(f"ar-{d}-{op}", r, (3, 5), dtype) for r in range(world)]
            cases[f"ar-{d}-{op}"] = ("all_reduce", op.lower(), inputs)
            staged[f"ar-{d}-{op}"] = [result(results, "collectives", r)[f"all_reduce/{d}/{op}"] for r in range(world)]
        moves = {
            "agt": ("all_gather", "all_gather_into_tensor", (2, 3)),
            "rs": ("reduce_scatter", "reduce_scatter_tensor", (world * 2, 3)),
            "a2a": ("all_to_all", "all_to_all_single", (world * 2,)),
        }
        for key, (kind, staged_name, shape) in moves.items():
            cases[f"{key}-{d}"] = (kind, "sum", [rank_input(f"{key}-{d}", r, shape, dtype) for r in range(world)])
            staged[f"{key}-{d}"] = [result(results, "collectives", r)[f"{staged_name}/{d}"] for r in range(world)]
    torch.save(cases, tmp_path / "cases.pt")
    child = run_python(
        IN_PROGRAM_CHILD,
        TORCH_TPU_NUM_DEVICES="4",
        CASES=str(tmp_path / "cases.pt"),
        RESULTS=str(tmp_path / "results.pt"),
    )
    assert child.returncode == 0, child.stderr[-4000:]
    in_program = torch.load(tmp_path / "results.pt")
    assert set(in_program) == set(staged)
    for name, outputs in in_program.items():
        for r in range(world):
            assert_equal(outputs[r], staged[name][r], f"{name} rank {r}")
