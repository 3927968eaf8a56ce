"""The DDP communication hook: two ranks (torch.multiprocessing, gloo for
DDP's own traffic) whose gradients after one backward pass equal an exact
reference: the quantized sum of both ranks' local gradients, divided by the
world size, computed independently here."""
import os
import tempfile

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

import atp
from atp import hook
from conftest import exact_sum

WORLD = 2


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))


def batch(rank):
    g = torch.Generator().manual_seed(100 + rank)
    return torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)


def local_grads(rank):
    model = make_model()
    x, y = batch(rank)
    nn.functional.cross_entropy(model(x), y).backward()
    return [p.grad.detach().numpy().copy() for p in model.parameters()]


def run(rank, init_file):
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=WORLD)
    try:
        # Twice: the second state's local cluster is a new one, and rank 1
        # must not read the first's (stopped) from the store.
        for _ in range(2):
            one_step(rank)
    finally:
        dist.destroy_process_group()


def one_step(rank):
    state = hook.AtpHookState.create(atp.AtpOptions())
    try:
        model = nn.parallel.DistributedDataParallel(make_model())
        model.register_comm_hook(state, hook.atp_allreduce_hook)
        x, y = batch(rank)
        nn.functional.cross_entropy(model(x), y).backward()
        per_rank = [local_grads(r) for r in range(WORLD)]
        for i, p in enumerate(model.parameters()):
            expected = exact_sum([g[i] for g in per_rank]) / np.float32(WORLD)
            np.testing.assert_array_equal(p.grad.numpy(), expected)
        counters = state.counters.step()
        assert counters["fragments_sent"] > 0
        assert counters["aggregated_in_switch"] + counters["aggregated_at_ps"] > 0
    finally:
        state.close()


def test_hook_result_equals_the_exact_reference():
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(run, args=(os.path.join(d, "init"),), nprocs=WORLD, join=True)
