"""Collectives inside the program on the CPU plugin: one process with 4 devices compiles each
collective for 4 replicas (replica i on tpu:i) and runs it once on all of them; every result is
compared with the same collective computed on the CPU from the same random inputs.

The test process has one device, so the collectives run in a child process with
TORCH_TPU_NUM_DEVICES=4; the parent makes the inputs, the child returns what each device got.
"""

from __future__ import annotations

import json

import pytest
import torch
from conftest import TOLERANCES, make, run_python

WORLD = 4
GROUPINGS = {
    "world": None,
    "pairs": [[0, 1], [2, 3]],
    "strided": [[0, 2], [1, 3]],
}
REDUCE_OPS = ("sum", "max", "min", "product", "avg", "premul_sum")
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "i32": torch.int32}
SHAPE = (8, 3)  # dim 0 splits into 4 and into 2
FACTOR = 0.3
RING = [(r, (r + 1) % WORLD) for r in range(WORLD)]
# The 4-device child runs once per module (the `runs` fixture): under pytest-xdist every test here
# runs on one worker, or each worker would run it again.
pytestmark = pytest.mark.xdist_group("distributed_in_program")

# Reads the cases, runs each on the 4 devices, saves what every device got (or the error).
CHILD = """
import json, os, torch, torch_tpu
from torch_tpu.distributed._in_program import run_collective

def on_devices(tensors, layout):
    placed = []
    for i, t in enumerate(tensors):
        device = {"same-device": "tpu:0", "cpu": "cpu"}.get(layout, f"tpu:{i}")
        if layout == "noncontiguous":  # a transposed view of every other column of a larger base
            base = torch.zeros(t.shape[1], t.shape[0] * 2, dtype=t.dtype, device=device)
            view = base[:, ::2].t()
            view.copy_(t)
            placed.append(view)
        else:
            placed.append(t.to(device))
    return placed

cases = torch.load(os.environ["CASES"])
torch_tpu.metrics.reset()
results = {}
for name, case in cases.items():
    inputs = on_devices(case["inputs"], case.get("layout"))
    before = torch_tpu.metrics.snapshot()["executions"]
    try:
        outputs = run_collective(case["kind"], inputs, op=case["op"], groups=case["groups"],
                                 pairs=case["pairs"], factor=case["factor"])
    except Exception as error:
        results[name] = {"error": type(error).__name__, "message": str(error)}
        continue
    results[name] = {
        "executions": torch_tpu.metrics.snapshot()["executions"] - before,
        "outputs": [o.cpu() for o in outputs],
        "devices": [str(o.device) for o in outputs],
        "inputs_after": [t.cpu() for t in inputs],
    }
torch.save(results, os.environ["RESULTS"])
print(json.dumps(torch_tpu.metrics.snapshot()))
"""


def random_inputs(dtype, shape=SHAPE):
    """Fresh random inputs, one per rank. bf16 values are multiples of 1/8 below 3 in magnitude,
    so sums of up to 4 are exact in bf16 and only products and scalings round."""
    if dtype == torch.bfloat16:
        return [(make(shape, torch.int32, low=-24, high=25) / 8).to(dtype) for _ in range(WORLD)]
    return [make(shape, dtype) for _ in range(WORLD)]


def case(kind, dtype="f32", op="sum", grouping="world", pairs=None, shape=SHAPE, layout=None):
    return {
        "kind": kind,
        "op": op,
        "groups": GROUPINGS[grouping],
        "pairs": pairs,
        "factor": FACTOR if op == "premul_sum" else None,
        "inputs": random_inputs(DTYPES[dtype], shape),
        "layout": layout,
    }


def valid_cases():
    cases = {}
    for dtype in DTYPES:
        for grouping in GROUPINGS:
            for kind in ("all_reduce", "reduce_scatter"):
                for op in REDUCE_OPS:
                    if not (op == "premul_sum" and dtype == "i32"):
                        cases[f"{kind}-{op}-{dtype}-{grouping}"] = case(kind, dtype, op, grouping)
            for kind in ("all_gather", "all_to_all"):
                cases[f"{kind}-{dtype}-{grouping}"] = case(kind, dtype, grouping=grouping)
        cases[f"collective_permute-{dtype}-ring"] = case("collective_permute", dtype, pairs=RING)
    # A permutation that leaves ranks 0 and 3 without a source: they receive zeros.
    cases["collective_permute-f32-partial"] = case("collective_permute", pairs=[(0, 1), (3, 2)])
    cases["all_reduce-sum-f32-world-scalar"] = case("all_reduce", shape=())
    cases["all_gather-f32-world-3d"] = case("all_gather", shape=(2, 3, 5))
    cases["all_reduce-sum-f32-world-noncontiguous"] = case("all_reduce", layout="noncontiguous")
    cases["all_to_all-f32-pairs-noncontiguous"] = case("all_to_all", grouping="pairs", layout="noncontiguous")
    return cases


# name: (case, expected error type, a piece of the expected message)
def error_cases():
    three = case("all_reduce")
    three["inputs"] = three["inputs"][:3]
    mixed_shapes = case("all_gather")
    mixed_shapes["inputs"][2] = make((4, 3))
    mixed_dtypes = case("all_reduce")
    mixed_dtypes["inputs"][1] = mixed_dtypes["inputs"][1].double()
    indivisible = case("reduce_scatter", shape=(6, 3))
    return {
        "three-inputs-for-four-devices": (three, "ValueError", "one input per tpu device (4), got 3"),
        "inputs-on-one-device": (dict(case("all_reduce"), layout="same-device"), "ValueError", "input 1 is on tpu:0"),
        "inputs-on-the-cpu": (dict(case("all_gather"), layout="cpu"), "ValueError", "input 0 is on cpu"),
        "mismatched-shapes": (mixed_shapes, "ValueError", "same dtype and shape"),
        "mismatched-dtypes": (mixed_dtypes, "ValueError", "same dtype and shape"),
        "overlapping-groups": (
            dict(case("all_reduce"), groups=[[0, 1], [1, 2]]),
            "ValueError",
            "rank 1 appears twice",
        ),
        "groups-missing-a-rank": (
            dict(case("all_gather"), groups=[[0, 1], [2]]),
            "ValueError",
            "into groups of one size",
        ),
        "group-rank-out-of-range": (
            dict(case("all_reduce"), groups=[[0, 1], [2, 4]]),
            "ValueError",
            "rank 4 is out of range",
        ),
        "rank-in-no-group": (dict(case("all_reduce"), groups=[[0, 1]]), "ValueError", "rank 2 is missing"),
        "dim-0-does-not-split": (indivisible, "ValueError", "must split into as many equal parts"),
        "permute-target-twice": (
            case("collective_permute", pairs=[(0, 1), (2, 1)]),
            "ValueError",
            "rank 1 is a target twice",
        ),
        "premul-sum-on-integers": (case("all_reduce", "i32", "premul_sum"), "ValueError", "floating-point"),
        "unknown-kind": (dict(case("all_reduce"), kind="broadcast"), "ValueError", "unknown collective"),
    }


def run_child(cases, tmp_path, cache_dir):
    cases_path, results_path = tmp_path / "cases.pt", tmp_path / "results.pt"
    torch.save(cases, cases_path)
    result = run_python(
        CHILD,
        TORCH_TPU_NUM_DEVICES=str(WORLD),
        TORCH_TPU_CACHE_DIR=str(cache_dir),
        CASES=str(cases_path),
        RESULTS=str(results_path),
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return torch.load(results_path), json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One child process runs every case; the parent keeps the cases to compute references."""
    tmp_path = tmp_path_factory.mktemp("in_program")
    cases = valid_cases()
    errors = error_cases()
    all_cases = {**{name: spec for name, (spec, _, _) in errors.items()}, **cases}
    results, metrics = run_child(all_cases, tmp_path, tmp_path / "cache")
    return {"cases": cases, "errors": errors, "results": results, "metrics": metrics, "tmp": tmp_path}


# ---- References on the CPU ----


def wide(t):
    return t.to(torch.float32) if t.dtype.is_floating_point else t.to(torch.int64)


def group_of(rank, groups):
    for group in groups or [list(range(WORLD))]:
        if rank in group:
            return group
    raise AssertionError(f"rank {rank} is in no group")


def reduce(tensors, op):
    stacked = torch.stack([wide(t) for t in tensors])
    if op in ("sum", "avg", "premul_sum"):
        total = stacked.sum(0)
        if op == "avg" and not total.dtype.is_floating_point:
            return torch.div(total, len(tensors), rounding_mode="trunc")
        if op == "avg":
            return total / len(tensors)
        return total * FACTOR if op == "premul_sum" else total
    if op == "product":
        return stacked.prod(0)
    return stacked.amax(0) if op == "max" else stacked.amin(0)


def reference(spec, rank):
    inputs, dtype = spec["inputs"], spec["inputs"][0].dtype
    if spec["kind"] == "collective_permute":
        sources = [source for source, target in spec["pairs"] if target == rank]
        return inputs[sources[0]] if sources else torch.zeros_like(inputs[rank])
    group = group_of(rank, spec["groups"])
    members = [inputs[r] for r in group]
    position = group.index(rank)
    if spec["kind"] == "all_reduce":
        return reduce(members, spec["op"]).to(dtype)
    if spec["kind"] == "reduce_scatter":
        return reduce(members, spec["op"]).chunk(len(group))[position].to(dtype)
    if spec["kind"] == "all_gather":
        return torch.cat(members)
    return torch.cat([member.chunk(len(group))[position] for member in members])  # all_to_all


def check_case(spec, result):
    assert "error" not in result, f"{result.get('error')}: {result.get('message')}"
    assert result["devices"] == [f"tpu:{r}" for r in range(WORLD)]
    if spec["layout"] is None:  # dense inputs need no copy: one launch runs all 4 replicas
        assert result["executions"] == 1, result["executions"]
    for rank in range(WORLD):
        expected = reference(spec, rank)
        actual = result["outputs"][rank]
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, (rank, actual.shape)
        tolerance = TOLERANCES.get(expected.dtype, dict(rtol=0, atol=0))
        torch.testing.assert_close(actual, expected, **tolerance, msg=lambda m, rank=rank: f"rank {rank}: {m}")
        assert torch.equal(result["inputs_after"][rank], spec["inputs"][rank]), "an input changed"


VALID = list(valid_cases())  # names only; the fixture makes fresh inputs


@pytest.mark.parametrize("name", VALID)
def test_collective_matches_cpu(runs, name):
    check_case(runs["cases"][name], runs["results"][name])


@pytest.mark.parametrize("name", list(error_cases()))
def test_bad_input_is_a_clear_error(runs, name):
    _, error_type, message = runs["errors"][name]
    result = runs["results"][name]
    assert result.get("error") == error_type, result
    assert message in result["message"], result["message"]


def test_executables_come_back_from_the_disk_cache(runs):
    # A new process with the same cache loads the replicated executables (with their device
    # assignment) instead of compiling, and they still give every device its own result.
    names = ["all_reduce-sum-f32-world", "reduce_scatter-avg-bf16-strided", "all_to_all-i32-pairs"]
    subset = {name: dict(runs["cases"][name]) for name in names}
    results, metrics = run_child(subset, runs["tmp"], runs["tmp"] / "cache")
    assert metrics["compiles"] == 0 and metrics["disk_cache_hits"] == len(names), metrics
    for name in names:
        check_case(subset[name], results[name])
