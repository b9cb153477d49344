"""Worker side of tests/test_distributed.py: one process per rank, launched like torchrun (RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment).

``python tests/distributed_cases.py CASE[,CASE...]`` runs the cases in order on one process group
and saves ``{case: result}`` to ``$TORCH_TPU_TEST_OUT/rank<r>.pt``; a case that raises records
its traceback instead, so one failure does not hide the others. Inputs come from
``rank_input``, which the test process calls too, to compute the expected results on the CPU.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.uint8]
REDUCE_OPS = ["SUM", "AVG", "MAX", "MIN", "PRODUCT", "PREMUL_SUM"]
PREMUL_FACTOR = 0.5


def rank_input(key: str, rank: int, shape, dtype) -> torch.Tensor:
    """Small integers, exact in every dtype, so any reduction order gives the same result."""
    seed = (sum(map(ord, key)) * 7919 + rank * 104729) % (2**31)
    generator = torch.Generator().manual_seed(seed)
    low = 0 if dtype == torch.uint8 else -2
    return torch.randint(low, 3, shape, generator=generator).to(dtype)


def reduce_op(name: str):
    if name == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(PREMUL_FACTOR)
    return getattr(dist.ReduceOp, name)


def reduce_ops_for(dtype) -> list[str]:
    # PREMUL_SUM scales by a fraction: floating point only, as with NCCL.
    return [op for op in REDUCE_OPS if dtype.is_floating_point or op != "PREMUL_SUM"]


def _cpu(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cpu(v) for v in value)
    return value


# ---- Collectives ----


SUBGROUPS = [[0, 2], [1, 3]]  # at world 4: strided, so a group's ranks are not neighbours


def collective_matrix(rank: int, members: list[int], group) -> dict:
    """Every collective over every dtype on `group` (global ranks `members`). Inputs are keyed by
    global rank, so data that crossed from another group would show."""
    tpu = torch.device("tpu", torch.tpu.current_device())
    me, n = members.index(rank), len(members)
    out = {}
    for dtype in DTYPES:
        d = str(dtype).removeprefix("torch.")
        for op in reduce_ops_for(dtype):
            t = rank_input(f"ar-{d}-{op}", rank, (3, 5), dtype).to(tpu)
            dist.all_reduce(t, op=reduce_op(op), group=group)
            out[f"all_reduce/{d}/{op}"] = t
        t = rank_input(f"bc-{d}", rank, (7,), dtype).to(tpu)
        dist.broadcast(t, src=members[-1], group=group)
        out[f"broadcast/{d}"] = t
        gathered = [torch.empty(2, 3, dtype=dtype, device=tpu) for _ in range(n)]
        dist.all_gather(gathered, rank_input(f"ag-{d}", rank, (2, 3), dtype).to(tpu), group=group)
        out[f"all_gather/{d}"] = torch.stack(gathered)
        whole = torch.empty(n * 2, 3, dtype=dtype, device=tpu)
        dist.all_gather_into_tensor(whole, rank_input(f"agt-{d}", rank, (2, 3), dtype).to(tpu), group=group)
        out[f"all_gather_into_tensor/{d}"] = whole
        shard = torch.empty(2, 3, dtype=dtype, device=tpu)
        dist.reduce_scatter_tensor(shard, rank_input(f"rs-{d}", rank, (n * 2, 3), dtype).to(tpu), group=group)
        out[f"reduce_scatter_tensor/{d}"] = shard
        received = torch.empty(n * 2, dtype=dtype, device=tpu)
        dist.all_to_all_single(received, rank_input(f"a2a-{d}", rank, (n * 2,), dtype).to(tpu), group=group)
        out[f"all_to_all_single/{d}"] = received
        t = rank_input(f"red-{d}", rank, (4,), dtype).to(tpu)
        dist.reduce(t, dst=members[0], op=dist.ReduceOp.SUM, group=group)
        out[f"reduce/{d}"] = t
        pieces = [torch.empty(3, dtype=dtype, device=tpu) for _ in range(n)] if me == 0 else None
        dist.gather(rank_input(f"ga-{d}", rank, (3,), dtype).to(tpu), pieces, dst=members[0], group=group)
        out[f"gather/{d}"] = torch.stack(pieces) if me == 0 else None
        mine = torch.empty(3, dtype=dtype, device=tpu)
        sources = [rank_input(f"sc-{d}-{i}", rank, (3,), dtype).to(tpu) for i in range(n)] if me == 0 else None
        dist.scatter(mine, sources, src=members[0], group=group)
        out[f"scatter/{d}"] = mine
        # A ring of send/recv: even group ranks send first, so no pair waits on the other.
        received = torch.empty(4, dtype=dtype, device=tpu)
        payload = rank_input(f"p2p-{d}", rank, (4,), dtype).to(tpu)
        right, left = members[(me + 1) % n], members[(me - 1) % n]
        if me % 2 == 0:
            dist.send(payload, right, group=group)
            dist.recv(received, left, group=group)
        else:
            dist.recv(received, left, group=group)
            dist.send(payload, right, group=group)
        out[f"send_recv/{d}"] = received
    return _cpu(out)


def case_collectives(rank: int, world: int) -> dict:
    return collective_matrix(rank, list(range(world)), None)


def case_subgroup_collectives(rank: int, world: int) -> dict:
    groups = [dist.new_group(members) for members in SUBGROUPS]
    index = next(i for i, members in enumerate(SUBGROUPS) if rank in members)
    return collective_matrix(rank, SUBGROUPS[index], groups[index])


def case_device_mesh(rank: int, world: int) -> dict:
    """A 2x2 mesh's sub-meshes: each row's and each column's group reduces only its own ranks."""
    from torch.distributed.device_mesh import init_device_mesh

    tpu = torch.device("tpu", torch.tpu.current_device())
    mesh = init_device_mesh("tpu", (2, world // 2), mesh_dim_names=("dp", "tp"))
    out = {}
    for name in ("dp", "tp"):
        t = rank_input(f"mesh-{name}", rank, (4,), torch.float32).to(tpu)
        dist.all_reduce(t, group=mesh[name].get_group())
        out[name] = t
    return _cpu(out)


def case_collective_details(rank: int, world: int) -> dict:
    """Uneven all_to_all, async work and futures, views, coalescing, objects, subgroups."""
    tpu = torch.device("tpu", torch.tpu.current_device())
    out = {}
    # Uneven all_to_all_single: rank r sends (i + r + 1) rows to rank i.
    input_splits = [i + rank + 1 for i in range(world)]
    output_splits = [rank + i + 1 for i in range(world)]
    source = rank_input("a2a-uneven", rank, (sum(input_splits), 2), torch.float32).to(tpu)
    received = torch.empty(sum(output_splits), 2, device=tpu)
    dist.all_to_all_single(received, source, output_splits, input_splits)
    out["all_to_all_uneven"] = received
    # async_op: Work.wait() and Work.get_future() complete with the tensors.
    t = rank_input("async", rank, (6,), torch.float32).to(tpu)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    out["async_wait"] = t
    t2 = rank_input("future", rank, (6,), torch.float32).to(tpu)
    future = dist.all_reduce(t2, async_op=True).get_future()
    out["async_future"] = future.wait()[0]
    # The result lands in the storage: a view of a larger tensor sees it.
    base = torch.zeros(4, 6, device=tpu)
    view = base[1:3, ::2]
    view.copy_(rank_input("view", rank, (2, 3), torch.float32).to(tpu))
    dist.all_reduce(view)
    out["view_base"] = base
    # Coalesced all_reduce, as DDP and FSDP call it.
    tensors = [rank_input(f"coal-{i}", rank, (i + 2,), torch.float32).to(tpu) for i in range(3)]
    with dist._coalescing_manager():
        for x in tensors:
            dist.all_reduce(x)
    out["coalesced"] = tensors
    # Object collectives.
    objects = [None] * world
    dist.all_gather_object(objects, {"rank": rank, "square": rank * rank})
    out["all_gather_object"] = objects
    listing = [f"from-{rank}", rank] if rank == 0 else [None, None]
    dist.broadcast_object_list(listing, src=0)
    out["broadcast_object_list"] = listing
    received = [None]
    dist.scatter_object_list(received, [("to", r) for r in range(world)] if rank == 0 else None, src=0)
    out["scatter_object_list"] = received[0]
    gathered_objects = [None] * world if rank == 0 else None
    dist.gather_object(f"rank {rank}", gathered_objects, dst=0)
    out["gather_object"] = gathered_objects
    # One process per device: under torchrun the current device is the local rank's.
    out["current_device"] = torch.tpu.current_device()
    # A subgroup of the even ranks, and one of the odd ranks.
    groups = [dist.new_group([r for r in range(world) if r % 2 == parity]) for parity in (0, 1)]
    mine = groups[rank % 2]
    t = rank_input("subgroup", rank, (5,), torch.float32).to(tpu)
    dist.all_reduce(t, group=mine)
    out["subgroup_all_reduce"] = t
    members = dist.get_world_size(mine)
    gathered = torch.empty(members * 2, device=tpu)
    dist.all_gather_into_tensor(gathered, rank_input("subgroup-ag", rank, (2,), torch.float32).to(tpu), group=mine)
    out["subgroup_all_gather"] = gathered
    dist.barrier()
    return _cpu(out)


def case_errors(rank: int, world: int) -> dict:
    """Bad input fails on every rank with a clear message, and the group stays usable."""
    tpu = torch.device("tpu", torch.tpu.current_device())
    out = {}

    def message(fn):
        try:
            fn()
        except Exception as error:  # noqa: BLE001 - the message is the result
            return f"{type(error).__name__}: {error}"
        return None

    out["shape_mismatch"] = message(lambda: dist.all_reduce(torch.ones(3 + rank, device=tpu)))
    dtype = torch.float32 if rank == 0 else torch.int32
    out["dtype_mismatch"] = message(lambda: dist.broadcast(torch.ones(3, dtype=dtype, device=tpu), src=0))
    out["cpu_tensor"] = message(lambda: dist.all_reduce(torch.ones(3)))
    out["unsupported_op"] = message(lambda: dist.all_reduce(torch.ones(3, device=tpu), op=dist.ReduceOp.BAND))
    t = torch.ones(3, device=tpu)
    dist.all_reduce(t)
    out["after_errors"] = t
    return _cpu(out)


def case_timeout(rank: int, world: int) -> dict:
    """The last rank skips a collective: the others fail within the group's timeout, naming it."""
    tpu = torch.device("tpu", torch.tpu.current_device())
    t = torch.ones(4, device=tpu)
    dist.all_reduce(t)  # everyone joins the first one
    if rank == world - 1:
        # Stays alive (a lost peer is a different error) until the others have timed out.
        time.sleep(float(os.environ["TORCH_TPU_TEST_PG_TIMEOUT"]) + 10)
        return {"skipped": True}
    try:
        dist.all_reduce(t)
    except Exception as error:  # noqa: BLE001
        return {"error": f"{type(error).__name__}: {error}"}
    return {"error": None}


# ---- Training: each rank takes its slice of a global batch ----

STEPS = 3


class TinyNet(torch.nn.Module):
    """Two linear layers, plus a branch that `use_extra=False` leaves unused."""

    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(8, 16)
        self.second = torch.nn.Linear(16, 4)
        self.extra = torch.nn.Linear(16, 4)

    def forward(self, x, use_extra=True):
        hidden = torch.nn.functional.gelu(self.first(x))
        out = self.second(hidden)
        return out + self.extra(hidden) if use_extra else out


def global_batch(step: int, world: int):
    generator = torch.Generator().manual_seed(1000 + step)
    return torch.randn(4 * world, 8, generator=generator), torch.randn(4 * world, 4, generator=generator)


def local_slice(tensor: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    return tensor.chunk(world)[rank]


def fresh_model(device) -> TinyNet:
    torch.manual_seed(0)
    return TinyNet().to(device)


def train(model, optimizer, batches, use_extra=True):
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x, use_extra), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return losses


def single_process_reference(device, world: int, use_extra=True) -> dict:
    """Plain training on the whole global batch, on this rank's device."""
    model = fresh_model(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [tuple(t.to(device) for t in global_batch(s, world)) for s in range(STEPS)]
    losses = train(model, optimizer, batches, use_extra)
    return {"losses": losses, "params": dict(model.named_parameters())}


def case_ddp(rank: int, world: int) -> dict:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    tpu = torch.device("tpu", torch.tpu.current_device())
    out = {}
    variants = {
        "buckets": dict(bucket_cap_mb=0.0005, use_extra=True, hook=False),
        "unused": dict(bucket_cap_mb=25, use_extra=False, hook=False, find_unused_parameters=True),
        "comm_hook": dict(bucket_cap_mb=25, use_extra=True, hook=True),
    }
    for name, config in variants.items():
        use_extra = config.pop("use_extra")
        hook = config.pop("hook")
        model = DDP(fresh_model(tpu), **config)
        if hook:
            model.register_comm_hook(state=None, hook=default_hooks.allreduce_hook)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        batches = []
        for s in range(STEPS):
            x, y = global_batch(s, world)
            batches.append((local_slice(x, rank, world).to(tpu), local_slice(y, rank, world).to(tpu)))
        losses = train(model, optimizer, batches, use_extra)
        # The mean of the ranks' losses is the global batch's loss.
        for loss in losses:
            dist.all_reduce(loss, op=dist.ReduceOp.AVG)
        out[name] = {"losses": losses, "params": dict(model.module.named_parameters())}
        if rank == 0:
            out[f"{name}/reference"] = single_process_reference(tpu, world, use_extra)
    # no_sync: two micro-batches, the first without communication, equal one step on both.
    model = DDP(fresh_model(tpu))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = global_batch(0, world)
    x, y = local_slice(x, rank, world).to(tpu), local_slice(y, rank, world).to(tpu)
    with model.no_sync():
        torch.nn.functional.mse_loss(model(x[:2]), y[:2]).backward()
    torch.nn.functional.mse_loss(model(x[2:]), y[2:]).backward()
    optimizer.step()
    out["no_sync"] = {"params": dict(model.module.named_parameters())}
    if rank == 0:
        reference = fresh_model(tpu)
        optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
        gx, gy = (t.to(tpu) for t in global_batch(0, world))
        for half in (slice(0, 2), slice(2, 4)):
            rows = torch.cat([gx.chunk(world)[r][half] for r in range(world)])
            targets = torch.cat([gy.chunk(world)[r][half] for r in range(world)])
            (torch.nn.functional.mse_loss(reference(rows), targets) * 1.0).backward()
        optimizer.step()
        out["no_sync/reference"] = {"params": dict(reference.named_parameters())}
    return _cpu(out)


def sharded_training(rank: int, world: int, shard, device, steps=STEPS) -> dict:
    """Trains fresh_model() wrapped by `shard` on this rank's slices; full params after each run."""
    model = shard(fresh_model(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for s in range(steps):
        x, y = global_batch(s, world)
        x, y = local_slice(x, rank, world).to(device), local_slice(y, rank, world).to(device)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        dist.all_reduce(loss.detach(), op=dist.ReduceOp.AVG)
        losses.append(loss.detach())
    params = {}
    for name, param in model.named_parameters():
        params[name] = param.full_tensor() if hasattr(param, "full_tensor") else param
    return {"losses": losses, "params": params}


def case_fsdp(rank: int, world: int) -> dict:
    """FSDP2: per-layer and root fully_shard, with and without resharding, and bf16 compute."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    tpu = torch.device("tpu", torch.tpu.current_device())
    out = {}
    policies = {
        "reshard": dict(reshard_after_forward=True),
        "no_reshard": dict(reshard_after_forward=False),
        "bf16": dict(mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)),
    }
    for name, options in policies.items():

        def shard(model, options=options):
            for layer in (model.first, model.second, model.extra):
                fully_shard(layer, **options)
            return fully_shard(model, **options)

        out[name] = sharded_training(rank, world, shard, tpu)
    if rank == 0:
        out["reference"] = single_process_reference(tpu, world)
    return _cpu(out)


def case_hsdp(rank: int, world: int) -> dict:
    """FSDP2 on a 2-D mesh: replicated across dim 0, sharded across dim 1."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    tpu = torch.device("tpu", torch.tpu.current_device())
    mesh = init_device_mesh("tpu", (2, world // 2), mesh_dim_names=("replicate", "shard"))

    def shard(model):
        for layer in (model.first, model.second, model.extra):
            fully_shard(layer, mesh=mesh)
        return fully_shard(model, mesh=mesh)

    out = {"hsdp": sharded_training(rank, world, shard, tpu)}
    if rank == 0:
        out["reference"] = single_process_reference(tpu, world)
    return _cpu(out)


# ---- DTensor and tensor parallelism ----


def placement_matrix():
    from torch.distributed.tensor import Partial, Replicate, Shard

    return {"S0": Shard(0), "S1": Shard(1), "R": Replicate(), "P": Partial()}


def case_dtensor(rank: int, world: int) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

    tpu = torch.device("tpu", torch.tpu.current_device())
    mesh = init_device_mesh("tpu", (world,))
    out = {}
    full = rank_input("dt-full", 0, (2 * world, 3 * world), torch.float32)
    sharded = distribute_tensor(full.to(tpu), mesh, [Shard(0)])
    out["shard0_local"] = sharded.to_local()
    out["shard0_full"] = sharded.full_tensor()
    # Every placement to every other; Partial sources hold each rank's own addend.
    placements = placement_matrix()
    for source_name, source in placements.items():
        if source_name == "P":
            local = rank_input("dt-partial", rank, (2 * world, 3 * world), torch.float32).to(tpu)
            start = DTensor.from_local(local, mesh, [source])
        else:
            start = distribute_tensor(full.to(tpu), mesh, [source])
        for target_name, target in placements.items():
            if target_name == "P" or target_name == source_name:
                continue
            moved = start.redistribute(mesh, [target])
            out[f"redistribute/{source_name}->{target_name}"] = moved.to_local()
    # A sharded matmul: row-sharded A times replicated B, and the contraction dim sharded.
    a = rank_input("dt-a", 0, (2 * world, 4 * world), torch.float32)
    b = rank_input("dt-b", 0, (4 * world, 3), torch.float32)
    rows = distribute_tensor(a.to(tpu), mesh, [Shard(0)]) @ distribute_tensor(b.to(tpu), mesh, [Replicate()])
    out["matmul_rows"] = (str(rows.placements[0]), rows.full_tensor())
    inner = distribute_tensor(a.to(tpu), mesh, [Shard(1)]) @ distribute_tensor(b.to(tpu), mesh, [Shard(0)])
    out["matmul_inner"] = (str(inner.placements[0]), inner.full_tensor())
    # The RNG tracker: random init of a sharded DTensor gives each shard its own stream, and a
    # replicated one the same values everywhere.
    torch.manual_seed(5)
    random_sharded = distribute_tensor(torch.empty(4 * world, 4, device=tpu), mesh, [Shard(0)])
    torch.nn.init.normal_(random_sharded)
    random_replicated = distribute_tensor(torch.empty(8, 4, device=tpu), mesh, [Replicate()])
    torch.nn.init.uniform_(random_replicated)
    out["random_sharded_full"] = random_sharded.full_tensor()
    out["random_replicated"] = random_replicated.to_local()
    return _cpu(out)


class Block(torch.nn.Module):
    """A pre-norm transformer block: attention with 4 heads, then an MLP."""

    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.norm = torch.nn.LayerNorm(dim)
        self.q, self.k, self.v, self.o = (torch.nn.Linear(dim, dim) for _ in range(4))
        self.up, self.down = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, s, _ = x.shape
        h = self.norm(x)
        q, k, v = (proj(h).view(b, s, -1, self.head_dim).transpose(1, 2) for proj in (self.q, self.k, self.v))
        attention = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(attention.transpose(1, 2).reshape(b, s, -1))
        return x + self.down(torch.nn.functional.gelu(self.up(x)))


def case_tensor_parallel(rank: int, world: int) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    tpu = torch.device("tpu", torch.tpu.current_device())
    mesh = init_device_mesh("tpu", (world,))
    torch.manual_seed(0)
    model = Block().to(tpu)
    plan = {name: ColwiseParallel() for name in ("q", "k", "v", "up")}
    plan.update(o=RowwiseParallel(), down=RowwiseParallel())
    model = parallelize_module(model, mesh, plan)
    # The norm's parameters stay plain tensors, which a foreach step cannot mix with DTensors.
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, foreach=False)
    x = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(3)).to(tpu)
    output = model(x)
    output.square().mean().backward()
    optimizer.step()
    params = {n: p.full_tensor() if hasattr(p, "full_tensor") else p for n, p in model.named_parameters()}
    out = {"output": output, "params": params}
    if rank == 0:
        torch.manual_seed(0)
        reference = Block().to(tpu)
        optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
        expected = reference(x)
        expected.square().mean().backward()
        optimizer.step()
        out["reference"] = {"output": expected, "params": dict(reference.named_parameters())}
    return _cpu(out)


# ---- Distributed checkpoints: saved at one world size, loaded at another ----


def checkpointed_model(device):
    from torch.distributed.fsdp import fully_shard

    model = fresh_model(device)
    for layer in (model.first, model.second, model.extra):
        fully_shard(layer)
    model = fully_shard(model)
    return model, torch.optim.AdamW(model.parameters(), lr=0.01)


def full_state(model, optimizer) -> dict:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    model_state, optim_state = get_state_dict(model, optimizer, options=options)
    return {"model": model_state, "optim": optim_state.get("state", {})}  # only rank 0 gets them


def case_checkpoint_save(rank: int, world: int) -> dict:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    tpu = torch.device("tpu", torch.tpu.current_device())
    model, optimizer = checkpointed_model(tpu)
    x, y = global_batch(0, world)
    torch.nn.functional.mse_loss(
        model(local_slice(x, rank, world).to(tpu)), local_slice(y, rank, world).to(tpu)
    ).backward()
    optimizer.step()
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=os.environ["TORCH_TPU_TEST_CKPT"])
    return _cpu(full_state(model, optimizer))


def case_checkpoint_load(rank: int, world: int) -> dict:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    tpu = torch.device("tpu", torch.tpu.current_device())
    model, optimizer = checkpointed_model(tpu)
    # The optimizer needs its state allocated before loading: one step with zero gradients.
    for param in model.parameters():
        param.grad = torch.zeros_like(param)
    optimizer.step()
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optim": optim_state}
    dcp.load(state, checkpoint_id=os.environ["TORCH_TPU_TEST_CKPT"])
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return _cpu(full_state(model, optimizer))


CASES = {name.removeprefix("case_"): fn for name, fn in globals().items() if name.startswith("case_")}


def main() -> None:
    import torch_tpu  # noqa: F401  (torch's autoload imports it too; explicit for clarity)

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    timeout = datetime.timedelta(seconds=float(os.environ.get("TORCH_TPU_TEST_PG_TIMEOUT", "60")))
    dist.init_process_group(timeout=timeout)
    results = {}
    for name in sys.argv[1].split(","):
        try:
            results[name] = CASES[name](rank, world)
        except Exception:  # noqa: BLE001 - recorded for the test to report
            results[name] = {"traceback": traceback.format_exc()}
    torch.save(results, os.path.join(os.environ["TORCH_TPU_TEST_OUT"], f"rank{rank}.pt"))
    if "timeout" not in sys.argv[1]:
        dist.destroy_process_group()
    else:
        os._exit(0)  # a rank that skipped a collective must not wait in destroy


if __name__ == "__main__":
    main()
