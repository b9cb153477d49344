"""The compile cache: structural signatures, scalar parameters, compile-once, the disk cache."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import threading

import torch
from conftest import assert_close, make, run_python

import torch_tpu
from torch_tpu import _C

# One workload for the multi-process tests; prints the metrics as JSON on its last line.
WORKLOAD = """
import json, torch, torch_tpu
torch_tpu.metrics.reset()
x = torch.arange(12.0).reshape(3, 4).to("tpu")
y = (x + 2.5).t().contiguous() + x.t()
print(y.cpu().tolist())
print(json.dumps(torch_tpu.metrics.snapshot()))
"""
EXPECTED = (torch.arange(12.0).reshape(3, 4) * 2 + 2.5).t().tolist()


def run_workload(cache_dir, **env):
    result = run_python(WORKLOAD, TORCH_TPU_CACHE_DIR=str(cache_dir), **env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert json.loads(lines[-2].replace("'", '"')) == EXPECTED
    return json.loads(lines[-1]), result.stderr


def cache_entries(cache_dir):
    return sorted(pathlib.Path(cache_dir).glob("executables/*/*/*.bin"))


def test_new_scalar_value_does_not_recompile():
    x = make((7, 5)).to("tpu")

    def step(lr):
        assert_close(x + lr, x.cpu() + lr)
        param = x.clone()
        param.add_(x, alpha=-lr)  # an SGD-style update with a new learning rate
        assert_close(param, x.cpu().add(x.cpu(), alpha=-lr))

    step(0.125)  # compiles each program once
    before = torch_tpu.metrics.snapshot()
    for lr in (0.5, 1e-3, -7.0, 3):
        step(lr)
    after = torch_tpu.metrics.snapshot()
    assert after["compiles"] == before["compiles"], "a new Python scalar recompiled"
    assert after["memory_cache_hits"] > before["memory_cache_hits"]


def test_new_shape_does_compile():
    # The converse, so the test above can fail: a different shape is a different program.
    before = torch_tpu.metrics.snapshot()["compiles"] + torch_tpu.metrics.snapshot()["disk_cache_hits"]
    x = make((11, 13, 3)).to("tpu")
    assert_close(x + 1, x.cpu() + 1)
    after = torch_tpu.metrics.snapshot()["compiles"] + torch_tpu.metrics.snapshot()["disk_cache_hits"]
    assert after > before


def test_concurrent_requests_compile_once(tmp_path):
    result = run_python(
        """
import threading, json, torch, torch_tpu
x = torch.arange(17 * 19, dtype=torch.float32).reshape(17, 19).to("tpu")
barrier = threading.Barrier(8)
results = [None] * 8
def work(i):
    barrier.wait()
    results[i] = (x + 3).cpu()
torch_tpu.metrics.reset()
threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join()
expected = torch.arange(17 * 19, dtype=torch.float32).reshape(17, 19) + 3
assert all(r.equal(expected) for r in results)
print(json.dumps(torch_tpu.metrics.snapshot()))
""",
        TORCH_TPU_CACHE_DIR=str(tmp_path),
        TORCH_TPU_DEFER_AND_FUSE="0",  # strict: each thread's op is one program, the same one
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["compiles"] == 1, figures
    assert figures["executions"] >= 8
    assert figures["memory_cache_hits"] == 7


def test_threads_in_process_share_results():
    x = make((9, 4)).to("tpu")
    errors = []

    def work():
        try:
            for _ in range(5):
                assert_close(x + 2, x.cpu() + 2)
        except Exception as error:  # reported below, on the main thread
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_second_process_with_warm_cache_compiles_nothing(tmp_path):
    cold, _ = run_workload(tmp_path)
    assert cold["compiles"] > 0 and cold["disk_cache_hits"] == 0
    entries = cache_entries(tmp_path)
    assert len(entries) == cold["compiles"]
    warm, _ = run_workload(tmp_path)
    assert warm["compiles"] == 0, warm
    assert warm["disk_cache_hits"] == cold["compiles"]


def test_another_build_of_the_extension_does_not_load_this_builds_programs(tmp_path):
    # A program's signature covers its ops, not how a build lowers them: a build that fixed a
    # lowering must not load the programs an older build compiled. Another build here is a copy
    # of the package whose extension file differs by one trailing byte.
    cache = tmp_path / "cache"
    cold, _ = run_workload(cache)
    assert cold["compiles"] > 0
    package = pathlib.Path(torch_tpu.__file__).parent
    other = tmp_path / "other_build"
    shutil.copytree(package, other / "torch_tpu", ignore=shutil.ignore_patterns("__pycache__"))
    extension = next((other / "torch_tpu").glob("_C*.so"))
    extension.write_bytes(extension.read_bytes() + b"\0")
    paths = os.pathsep.join([str(other)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    rebuilt, _ = run_workload(cache, PYTHONPATH=paths)
    assert rebuilt["disk_cache_hits"] == 0 and rebuilt["compiles"] == cold["compiles"], rebuilt
    assert len({entry.parent for entry in cache_entries(cache)}) == 2  # one folder per build
    warm, _ = run_workload(cache)
    assert warm["compiles"] == 0 and warm["disk_cache_hits"] == cold["compiles"], warm


def test_folders_of_other_builds_and_plugins_are_pruned_to_the_most_recently_used(tmp_path):
    # Each rebuild or plugin upgrade starts a folder that no other build loads; beside the one in
    # use, the three most recently used are kept and older ones removed, so the cache stays bounded.
    platform = _C._platform()
    executables = tmp_path / "executables"
    plugin = executables / platform["plugin_identity"]

    def stale(folder, age_days):
        folder.mkdir(parents=True)
        (folder / "0123.bin").write_bytes(b"old program")
        stamp = 1_700_000_000 - age_days * 86400
        os.utime(folder, (stamp, stamp))

    for age in range(6):
        stale(plugin / f"ext-old{age}", age)
    for age in range(5):
        stale(executables / f"plugin-old{age}", age)
    os.utime(plugin, (1_600_000_000, 1_600_000_000))  # the plugin in use is stamped when used
    cold, _ = run_workload(tmp_path)
    assert cold["compiles"] > 0
    assert sorted(p.name for p in plugin.iterdir()) == sorted(
        [platform["extension_identity"], "ext-old0", "ext-old1", "ext-old2"]
    )
    assert sorted(p.name for p in executables.iterdir()) == sorted(
        [platform["plugin_identity"], "plugin-old0", "plugin-old1", "plugin-old2"]
    )
    # The build in use keeps its programs: a second process loads them all.
    warm, _ = run_workload(tmp_path)
    assert warm["compiles"] == 0 and warm["disk_cache_hits"] == cold["compiles"], warm
    assert (plugin / "ext-old0" / "0123.bin").exists()


def test_corrupt_entry_is_recompiled_with_a_warning(tmp_path):
    cold, _ = run_workload(tmp_path)
    entries = cache_entries(tmp_path)
    assert entries
    victim = entries[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the payload: the checksum must catch it
    victim.write_bytes(bytes(data))
    again, stderr = run_workload(tmp_path)
    assert "is corrupt; recompiling" in stderr and str(victim) in stderr
    assert again["compiles"] == 1 and again["disk_cache_hits"] == cold["compiles"] - 1
    # The entry was replaced: a third process is fully warm.
    third, stderr = run_workload(tmp_path)
    assert third["compiles"] == 0 and "corrupt" not in stderr


def test_truncated_entry_is_recompiled(tmp_path):
    run_workload(tmp_path)
    victim = cache_entries(tmp_path)[0]
    victim.write_bytes(victim.read_bytes()[:10])
    again, stderr = run_workload(tmp_path)
    assert again["compiles"] == 1 and str(victim) in stderr


def test_disk_cache_can_be_disabled(tmp_path):
    result = run_python(WORKLOAD, TORCH_TPU_CACHE_DIR=str(tmp_path), TORCH_TPU_DISK_CACHE="0")
    assert result.returncode == 0, result.stderr
    assert not cache_entries(tmp_path)


def test_cache_key_includes_plugin_and_extension_identity(tmp_path):
    run_workload(tmp_path)
    platform = _C._platform()
    assert {(entry.parent.parent.name, entry.parent.name) for entry in cache_entries(tmp_path)} == {
        (platform["plugin_identity"], platform["extension_identity"])
    }
    assert torch_tpu.platform()


def test_memory_cache_is_bounded_and_reloads_from_disk(tmp_path):
    # Each loaded executable holds JIT code in memory mappings; an unbounded process-wide cache
    # reaches the kernel's mapping limit after some tens of thousands of programs, where the
    # plugin's code generation fails. Past the bound the least recently used are dropped and
    # come back from the disk cache, with the same results.
    code = """
import torch, torch_tpu
def work(n):
    return (torch.arange(float(n), device="tpu") * 3 + 1).sum().item()
first = [work(n) for n in range(1, 41)]
torch_tpu.metrics.reset()
again = [work(n) for n in range(1, 41)]
m = torch_tpu.metrics.snapshot()
print("SAME", first == again, "COMPILES", m["compiles"], "DISK", m["disk_cache_hits"] > 0)
"""
    # Strict: 40 sizes are 40 programs (fused mode would bucket them into fewer than the bound).
    result = run_python(
        code, TORCH_TPU_CACHE_DIR=str(tmp_path), TORCH_TPU_MEMORY_CACHE_ENTRIES="16", TORCH_TPU_DEFER_AND_FUSE="0"
    )
    assert result.returncode == 0, result.stderr
    assert "SAME True COMPILES 0 DISK True" in result.stdout, result.stdout


def test_loaded_executables_keep_within_the_kernels_mapping_limit(tmp_path):
    # Each loaded executable holds its JIT code in memory mappings, about twenty for a fused
    # program; a process past vm.max_map_count fails to load code, then crashes. The memory cache
    # measures the mappings per executable and keeps them within half the limit (here a stand-in
    # of 1,800); what it drops comes back from the disk cache with the same results.
    code = """
import json, torch, torch_tpu
def maps():
    return len(open("/proc/self/maps").readlines())
x = torch.randn(16, 16, device="tpu")
torch.tpu.synchronize()  # x is a buffer, not part of program(0)'s cut: the second loop repeats it
def program(n):  # another sequence of ops for each n: another program
    y = x
    for bit in range(8):
        y = (y @ x).sin() if n >> bit & 1 else torch.tanh(y * 1.5).exp()
    return y.sum().item()
first = [program(n) for n in range(100)]
after_first = maps()
torch_tpu.metrics.reset()
again = [program(n) for n in range(30)]  # the least recently used
m = torch_tpu.metrics.snapshot()
print(json.dumps(dict(maps=after_first, same=first[:30] == again, disk=m["disk_cache_hits"])))
"""
    figures = {}
    # One disk cache for both runs: the second loads the first's 100 programs instead of compiling
    # them again (its own memory cache never drops one, so it reads the disk only while warming).
    for limit in ("1800", "1000000"):
        result = run_python(
            code,
            TORCH_TPU_CACHE_DIR=str(tmp_path / "cache"),
            TORCH_TPU_MAX_MAP_COUNT=limit,
            TORCH_TPU_DEFER_AND_FUSE="1",
        )
        assert result.returncode == 0, result.stderr
        figures[limit] = json.loads(result.stdout.strip().splitlines()[-1])
        assert figures[limit]["same"]
    bounded, unbounded = figures["1800"], figures["1000000"]
    assert bounded["maps"] < 1800 < unbounded["maps"], figures
    assert bounded["disk"] >= 25 and unbounded["disk"] == 0, figures


# The XLA_FLAGS a process saw, before and after its device started, and the cache folder it used.
FLAGS_WORKLOAD = """
import json, os, torch, torch_tpu
before = os.environ.get("XLA_FLAGS", "unset")
torch.arange(6.0, device="tpu").sum().item()
print(json.dumps([before, os.environ.get("XLA_FLAGS", "unset"), torch_tpu._C._platform()["plugin_identity"]]))
"""


def test_xla_flags_are_left_as_they_were_and_key_the_cache(tmp_path):
    # torch_tpu's defaults for XLA's CPU compiler are set only while the plugin reads them, so
    # another XLA in the process (JAX's) never sees them; a user's flags change the programs, so
    # they get a cache folder of their own.
    def identity(flags):
        env = {"TORCH_TPU_CACHE_DIR": str(tmp_path)}
        if flags is not None:
            env["XLA_FLAGS"] = flags
        unset = "import os; os.environ.pop('XLA_FLAGS', None)\n"
        result = run_python(FLAGS_WORKLOAD if flags is not None else unset + FLAGS_WORKLOAD, **env)
        assert result.returncode == 0, result.stderr
        before, after, folder = json.loads(result.stdout.strip().splitlines()[-1])
        assert before == after == (flags if flags is not None else "unset")
        return folder

    default = identity(None)
    own = identity("--xla_cpu_experimental_ynn_fusion_type=LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT")
    assert own != default
    assert {entry.parent.parent.name for entry in cache_entries(tmp_path)} >= {default, own}
