"""Seeded random programs for the execution-mode fuzzer (tests/test_fused.py).

A program is a list of steps over a pool of live tensors. Each step reads tensors of the pool and
either adds a new one, writes one in place (directly, through a view, or through out=), drops one
(`del`), reads one on the host, or forces a flush. `run` plays a program on a device; the fuzzer
plays it on the CPU, on tpu in strict mode and on tpu in fused mode, and compares every tensor
still alive at the end. Random ops draw on tpu: the strict run records what they drew and the
other runs replay those values (the fused run checks it draws the same).
"""

from __future__ import annotations

import random

import torch

SHAPE = (4, 6)
FLOAT = torch.float32


def _bounded(x):
    return torch.tanh(x)


# Ops over floating tensors of SHAPE: name -> (arity, fn). Results stay bounded.
UNARY = {
    "exp_tanh": lambda a: torch.exp(torch.tanh(a)),
    "sigmoid": torch.sigmoid,
    "abs": torch.abs,
    "neg": torch.neg,
    "relu": torch.relu,
    "sin": torch.sin,
    "sqrt_abs": lambda a: torch.sqrt(a.abs() + 0.5),
    "log1p_abs": lambda a: torch.log1p(a.abs()),
    "gelu": torch.nn.functional.gelu,
    "softmax": lambda a: torch.softmax(a, dim=-1),
    "cumsum": lambda a: torch.cumsum(a, dim=1) / 6,
    "flip": lambda a: torch.flip(a, (0,)),
    "roll": lambda a: torch.roll(a, 2, 1),
    "clone": torch.clone,
    "contiguous_t": lambda a: a.t().contiguous().t(),
    "clamp": lambda a: torch.clamp(a, -0.5, 0.5),
}
BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": lambda a, b: a / (b.abs() + 1),
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "where": lambda a, b: torch.where(a > b, a, b * 0.5),
    "atan2": torch.atan2,
    "matmul": lambda a, b: _bounded(a @ b.t() @ a / 6),
    "lerp": lambda a, b: torch.lerp(a, b, 0.3),
}
REDUCTIONS = {
    "sum_rows": lambda a: a.sum(dim=1, keepdim=True).expand(SHAPE) / 6,  # a fresh tensor: / copies
    "mean_cols": lambda a: a.mean(dim=0, keepdim=True).expand(SHAPE).contiguous(),
    "amax": lambda a: a.amax(dim=1, keepdim=True) + a * 0,
    "norm": lambda a: a / (a.norm() + 1),
    "var": lambda a: a.var(dim=1, keepdim=True) + a,
}
KINDS = [
    "unary",
    "binary",
    "reduction",
    "scalar",
    "inplace",
    "inplace_view",
    "copy_into_view",
    "out",
    "index_put",
    "cat_split",
    "cast",
    "as_strided",
    "view_dtype",
    "random",
    "del",
    "host_read",
    "flush",
]


def generate(seed: int, length: int = 40) -> list[tuple]:
    rng = random.Random(seed)
    steps = []
    live = 3  # the program starts from three inputs
    for _ in range(length):
        kind = rng.choice(KINDS)

        def pick(live=live):
            return rng.randrange(live)

        if kind == "unary":
            steps.append((kind, rng.choice(sorted(UNARY)), pick()))
        elif kind == "binary":
            steps.append((kind, rng.choice(sorted(BINARY)), pick(), pick()))
        elif kind == "reduction":
            steps.append((kind, rng.choice(sorted(REDUCTIONS)), pick()))
        elif kind == "scalar":
            steps.append((kind, pick(), rng.uniform(-2, 2), rng.uniform(-1, 1)))
        elif kind in ("inplace", "out"):
            steps.append((kind, rng.choice(["add", "mul", "sub"]), pick(), pick()))
        elif kind == "inplace_view":
            steps.append((kind, pick(), rng.randrange(4), rng.uniform(-1, 1)))
        elif kind == "copy_into_view":
            steps.append((kind, pick(), pick(), rng.randrange(3)))
        elif kind == "index_put":
            index = [rng.randrange(4) for _ in range(3)]
            steps.append((kind, pick(), pick(), index, rng.random() < 0.5))
        elif kind == "cat_split":
            steps.append((kind, pick(), pick()))
        elif kind == "cast":
            steps.append((kind, pick(), rng.choice([torch.bfloat16, torch.int64, torch.bool])))
        elif kind == "as_strided":
            steps.append((kind, pick(), rng.randrange(3)))
        elif kind == "view_dtype":
            steps.append((kind, pick()))
        elif kind == "random":
            steps.append((kind, rng.choice(["rand", "randn", "dropout"]), pick()))
        elif kind == "del":
            if live > 2:
                steps.append((kind, pick()))
                live -= 1
            continue
        elif kind in ("host_read", "flush"):
            steps.append((kind, pick()))
            continue
        if kind not in ("inplace", "inplace_view", "copy_into_view", "index_put"):
            live += 1
    return steps


def inputs(seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.rand(SHAPE, generator=generator) * 2 - 1 for _ in range(3)]


def run(
    steps, device, draws: list[torch.Tensor], draw: str, host_reads: list[torch.Tensor], seed: int
) -> list[torch.Tensor]:
    """Plays `steps` on `device` and returns the live pool.

    Random ops: `draw="record"` appends what they drew to `draws`; "check" draws and asserts it
    equals the recorded draw; "replay" (the CPU) uses the recorded draws."""
    pool = [t.to(device) for t in inputs(seed)]
    draw_index = 0
    for step in steps:
        kind = step[0]
        if kind == "unary":
            pool.append(UNARY[step[1]](pool[step[2]].float()))
        elif kind == "binary":
            pool.append(BINARY[step[1]](pool[step[2]].float(), pool[step[3]].float()))
        elif kind == "reduction":
            pool.append(REDUCTIONS[step[1]](pool[step[2]].float()))
        elif kind == "scalar":
            pool.append(pool[step[1]].float() * step[2] + step[3])
        elif kind == "inplace":
            target, source = pool[step[2]], pool[step[3]]
            if target.dtype.is_floating_point:
                getattr(target, step[1] + "_")(_bounded(source.float()).to(target.dtype))
            elif target.dtype == torch.int64:
                target.add_(source.to(torch.int64))
        elif kind == "inplace_view":
            target = pool[step[1]]
            if target.dtype.is_floating_point:
                views = [target[1:3], target[:, ::2], target.t()[2], target.reshape(-1)[5:17].view(3, 4)]
                views[step[2]].mul_(step[3]).add_(0.25)
        elif kind == "copy_into_view":
            target, source = pool[step[1]], pool[step[2]]
            if target is source:  # an overlapping copy is an error on every device
                continue
            views = [(target[::2], source[1::2]), (target[:, 1:4], source[:, :3]), (target.t()[:3], source.t()[3:])]
            dst, src = views[step[3]]
            dst.copy_(src)
        elif kind == "out":
            a, b = pool[step[2]].float(), pool[step[3]].float()
            out = torch.empty(0, device=device)
            getattr(torch, step[1])(a, b, out=out)
            pool.append(out)
        elif kind == "index_put":
            target, source = pool[step[1]], pool[step[2]]
            index = torch.tensor(step[3], device=device)
            values = source[: len(step[3])].to(target.dtype)
            if values.untyped_storage().data_ptr() == target.untyped_storage().data_ptr():
                values = values.clone()  # the CPU refuses values that overlap the target
            target.index_put_((index,), values, accumulate=step[4] and target.dtype != torch.bool)
        elif kind == "cat_split":
            joined = torch.cat([pool[step[1]].float(), pool[step[2]].float()], dim=0)
            pool.append(joined[2:6] - joined[4:8])
        elif kind == "cast":
            source = pool[step[1]]
            pool.append((source.float() * 3).to(step[2]) if step[2] != torch.bool else source > 0)
        elif kind == "as_strided":
            base = pool[step[1]].float().contiguous()
            sizes, strides, offset = [((4, 6), (6, 1), 0), ((4, 6), (1, 0), 2), ((4, 6), (2, 3), 1)][step[2]]
            pool.append(base.as_strided(sizes, strides, offset) * 1)
        elif kind == "view_dtype":
            source = pool[step[1]].float().contiguous()
            bits = source.view(torch.int32)
            pool.append((bits & 0x7FFFFFFF).view(torch.float32) - source.abs())  # |x| - |x| = 0 through the bits
        elif kind == "random":
            like = pool[step[2]].float()
            if draw == "replay":
                drawn = draws[draw_index].clone()
            else:
                drawn = {
                    "rand": lambda: torch.rand(SHAPE, device=device),
                    "randn": lambda: torch.randn(SHAPE, device=device) * 0.1,
                    "dropout": lambda like=like: torch.nn.functional.dropout(like, 0.5),
                }[step[1]]()
                if draw == "record":
                    draws.append(drawn.cpu())
                else:
                    torch.testing.assert_close(drawn.cpu(), draws[draw_index], rtol=1e-5, atol=1e-5)
            draw_index += 1
            pool.append(drawn)
        elif kind == "del":
            del pool[step[1]]
        elif kind == "host_read":
            host_reads.append(pool[step[1]].cpu())
        elif kind == "flush" and device != "cpu":
            torch.tpu.synchronize()
    return pool
