"""SkipReduce in the DDP hooks (docs/skipreduce.md, issue 11 part 4).

The options: every bad field is refused with a ValueError naming it.
The schedule: protection by index and by parameter name, warm-up, the DDP
iteration, and that it asks libatp's SkipPolicy (the shift Python sees is
the C++ one). The ring hook under DDP: 4 (and 3) ranks as processes, each
parameter's gradient on rank r is pattern x 2^r (pattern: small integers),
so every element of a result names the ranks summed into it; for every
bucket of every iteration, every rank's result equals a reference built
from atp.SkipPlan slice by slice (which ranks' contributions each slice
holds, the divisor), and all ranks hold the same bytes.
"""
import os
import pickle
import tempfile

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

import atp
import atp._atp as core
from atp import hook
from atp.options import SkipReduceOptions
from atp.skip import SkipSchedule

# --- options ---------------------------------------------------------------


@pytest.mark.parametrize("changes, field", [
    (dict(mode="sometimes"), "mode"),
    (dict(mode="random", rate=1.5), "rate"),
    (dict(mode="random", rate=-0.1), "rate"),
    (dict(mode="random", rate=float("nan")), "rate"),
    (dict(mode="random", rate="half"), "rate"),
    (dict(mode="none", rate=0.5), "rate"),
    (dict(mode="static", rate=0.0), "rate"),
    (dict(mode="selective", rate=0.5), "protected_params"),
    (dict(mode="random", rate=0.5, protected_params=["a", 3]), "protected_params"),
    (dict(mode="random", rate=0.5, protected_buckets=[-1]), "protected_buckets"),
    (dict(mode="random", rate=0.5, protected_buckets=[True]), "protected_buckets"),
    (dict(mode="none", protected_buckets=[0]), "protected_buckets"),
    (dict(mode="random", rate=0.5, warmup_steps=-2), "warmup_steps"),
    (dict(mode="random", rate=0.5, warmup_steps=1.5), "warmup_steps"),
    (dict(mode="random", rate=0.5, divisor="half"), "divisor"),
    (dict(mode="random", rate=0.5, seed=-1), "seed"),
    (dict(mode="random", rate=0.5, seed=2 ** 64), "seed"),
])
def test_bad_options_are_refused_naming_the_field(changes, field):
    with pytest.raises(ValueError, match=r"^SkipReduceOptions\.%s: " % field):
        SkipReduceOptions(**changes).validate()


def test_good_options_become_libatps_policy():
    o = SkipReduceOptions(mode="selective", rate=0.5, protected_buckets=[2], warmup_steps=3,
                          divisor="drop", seed=7)
    p = o.policy()
    assert p.mode == core.SkipMode.RANDOM  # selective = random + protection (the seed's 4.4)
    assert (p.rate, p.seed, p.warmup_iterations) == (0.5, 7, 3)
    assert p.divisor == core.SkipDivisor.CONTRIBUTORS
    assert p.protected_tensors == [2]
    assert SkipReduceOptions(mode="static", rate=0.25).policy().mode == core.SkipMode.STATIC


def test_the_plan_is_libatps():
    # Values from the C++ closed forms (atp/skip_reduce.h): k = round(rate x N),
    # static keeps shift 0, slice j lacks ranks j..j+k-1.
    assert [core.skip_steps_for_rate(r, 4) for r in (0.25, 0.5, 0.75, 1.0)] == [1, 2, 3, 3]
    skip = core.SkipOptions()
    skip.mode, skip.reduce_scatter_steps = core.SkipMode.STATIC, 1
    plan = core.SkipPlan.create(skip, 4)
    assert plan.shift == 0 and plan.contributors() == 3 and plan.average_divisor() == 4
    assert [[plan.contribution_included(j, r) for r in range(4)] for j in range(4)] == [
        [False, True, True, True], [True, False, True, True],
        [True, True, False, True], [True, True, True, False]]
    assert core.slice_range(10, 4, 0) == (0, 3) and core.slice_range(10, 4, 3) == (8, 2)
    skip.reduce_scatter_steps = 4
    with pytest.raises(ValueError, match="reduce_scatter_steps"):
        core.SkipPlan.create(skip, 4)
    shifts = {core.random_shift(1, i, 0, 8) for i in range(64)}
    assert shifts == set(range(8))  # varies with the iteration, covers every shift


# --- the schedule, with stand-in buckets -----------------------------------


class FakeBucket:
    """What SkipSchedule reads of torch's GradBucket."""

    def __init__(self, index, params, last):
        self._index, self._params, self._last = index, params, last

    def index(self):
        return self._index

    def parameters(self):
        return self._params

    def buffer(self):
        return torch.zeros(sum(p.numel() for p in self._params))

    def is_last(self):
        return self._last


def three_layers():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))


def buckets_of(model):
    # DDP's order: the last layer's parameters are ready first (bucket 0).
    layers = [model[4], model[2], model[0]]
    return [FakeBucket(i, [m.weight, m.bias], last=(i == 2)) for i, m in enumerate(layers)]


def test_schedule_protects_by_name_and_index_warms_up_and_counts_iterations():
    model = three_layers()
    options = SkipReduceOptions(mode="selective", rate=0.5, protected_params=["module.0.weight"],
                                protected_buckets=[0], warmup_steps=2, seed=3)
    schedule = SkipSchedule(options, 4, model.named_parameters())
    policy = options.policy()
    for iteration in range(6):
        skips = [schedule.for_bucket(b) for b in buckets_of(model)]
        assert [s.iteration for s in skips] == [iteration] * 3
        assert skips[0].mode == core.SkipMode.NONE  # protected index
        assert skips[2].mode == core.SkipMode.NONE  # holds "0.weight"
        if iteration < 2:
            assert skips[1].mode == core.SkipMode.NONE  # warm-up
        else:
            assert skips[1].mode == core.SkipMode.RANDOM and skips[1].reduce_scatter_steps == 2
            expected = policy.for_tensor(1, iteration, 4)
            assert core.SkipPlan.create(skips[1], 4).shift == \
                core.SkipPlan.create(expected, 4).shift
    assert schedule.iteration == 6
    # Bucket 1 (8x8 + 8 = 72 of 162 elements) skipped half in 4 of 6 iterations.
    assert schedule.skipped_fraction() == pytest.approx(72 * 0.5 * 4 / (162 * 6))


def test_schedule_protects_buckets_by_size():
    model = three_layers()
    options = SkipReduceOptions(mode="selective", rate=0.5, protect_size=18)
    schedule = SkipSchedule(options, 4, model.named_parameters())
    skips = [schedule.for_bucket(b) for b in buckets_of(model)]
    # Bucket 0 holds 8x2 + 2 = 18 elements (protected: at most 18); 1 and 2 hold 72.
    assert [s.mode for s in skips] == [core.SkipMode.NONE, core.SkipMode.RANDOM,
                                       core.SkipMode.RANDOM]


def test_schedule_refuses_an_unknown_parameter_name():
    options = SkipReduceOptions(mode="selective", rate=0.5, protected_params=["9.weight"])
    with pytest.raises(ValueError, match=r"^AtpOptions\.skip\.protected_params: '9\.weight'"):
        SkipSchedule(options, 4, three_layers().named_parameters(), field="AtpOptions.skip")
    with pytest.raises(ValueError, match=r"protected_params: needs the model"):
        SkipSchedule(options, 4, None)


# --- the ring hook under DDP -------------------------------------------------

SIZES = (1001, 517, 66, 3)  # uneven slices, and a bucket smaller than some slices
ITERATIONS = 5
PATTERN_PERIOD = 7


def pattern(n):
    return (np.arange(n) % PATTERN_PERIOD + 1).astype(np.float32)


class Scaled(nn.Module):
    """loss = sum_i <p_i, pattern> x input: each parameter's gradient is
    pattern x input, exactly (small integers times a power of two)."""

    def __init__(self):
        super().__init__()
        self.ps = nn.ParameterList([nn.Parameter(torch.zeros(n)) for n in SIZES])
        self.patterns = [torch.from_numpy(pattern(n)) for n in SIZES]

    def forward(self, x):
        return sum((p * w).sum() for p, w in zip(self.ps, self.patterns)) * x


CASES = {
    "static": SkipReduceOptions(mode="static", rate=0.5),
    "random": SkipReduceOptions(mode="random", rate=0.25, seed=11),
    "selective": SkipReduceOptions(mode="selective", rate=0.75, seed=5, warmup_steps=2,
                                   protected_params=["ps.1"], divisor="drop"),
}


def ring_run(rank, world, init_file, out_dir):
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    dist._DEFAULT_FIRST_BUCKET_BYTES = 1  # one parameter per bucket, also after the rebuild
    records = []
    try:
        for case, skip in CASES.items():
            model = Scaled()
            ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1e-6)
            names = {p.data_ptr(): n for n, p in model.named_parameters()}
            state = hook.RingHookState.create(atp.AtpOptions(skip=skip), model=ddp)

            def recording(state, bucket, case=case, names=names):
                entry = {"case": case, "iteration": state.schedule.iteration,
                         "bucket": bucket.index(), "input": bucket.buffer().numpy().copy(),
                         "params": [names[p.data_ptr()] for p in bucket.parameters()]}

                def done(future):
                    entry["output"] = future.value().numpy().copy()
                    records.append(entry)
                    return future.value()
                return hook.ring_allreduce_hook(state, bucket).then(done)
            ddp.register_comm_hook(state, recording)
            for _ in range(ITERATIONS):
                ddp.zero_grad()
                ddp(torch.tensor(float(2 ** rank))).backward()
            state.close()
    finally:
        dist.destroy_process_group()
    with open(os.path.join(out_dir, "rank%d.pkl" % rank), "wb") as f:
        pickle.dump(records, f)


def reference(entry, options, world):
    """The bucket's result from atp.SkipPlan: slice j sums pattern x 2^r
    over the ranks r whose contribution the plan includes, times 1/divisor
    (float32, as the ring scales)."""
    protected = any(n in options.protected_params for n in entry["params"])
    if protected:
        skip = core.SkipOptions()
    else:
        skip = options.policy().for_tensor(entry["bucket"], entry["iteration"], world)
    plan = core.SkipPlan.create(skip, world)
    n = entry["input"].size
    pat = entry["input"]  # rank 0's input: the pattern itself (x 2^0)
    out = np.empty(n, dtype=np.float32)
    scale = np.float32(1) / np.float32(plan.average_divisor())
    for j in range(world):
        begin, size = core.slice_range(n, world, j)
        mask = sum(2 ** r for r in range(world) if plan.contribution_included(j, r))
        out[begin:begin + size] = (pat[begin:begin + size] * np.float32(mask)) * scale
    return out, plan


@pytest.mark.parametrize("world", [4, 3])
def test_ring_hook_results_follow_the_skip_plan_on_every_rank(world):
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(ring_run, args=(world, os.path.join(d, "init"), d), nprocs=world, join=True)
        ranks = []
        for r in range(world):
            with open(os.path.join(d, "rank%d.pkl" % r), "rb") as f:
                ranks.append(pickle.load(f))
    # Every parameter in exactly one bucket per iteration (DDP's first
    # iteration may bucket them differently: it rebuilds after it).
    per_iteration = {}
    for entry in ranks[0]:
        per_iteration.setdefault((entry["case"], entry["iteration"]), []).extend(entry["params"])
    assert sorted(per_iteration) == sorted((c, i) for c in CASES for i in range(ITERATIONS))
    assert all(sorted(p) == ["ps.%d" % i for i in range(len(SIZES))]
               for p in per_iteration.values())
    shifts, skipped = {}, {}
    for i, entry in enumerate(ranks[0]):
        for r in range(1, world):
            other = ranks[r][i]
            assert (other["case"], other["iteration"], other["bucket"]) == \
                (entry["case"], entry["iteration"], entry["bucket"])
            np.testing.assert_array_equal(other["output"], entry["output"])  # identical
            np.testing.assert_array_equal(other["input"], entry["input"] * np.float32(2 ** r))
        options = CASES[entry["case"]]
        expected, plan = reference(entry, options, world)
        np.testing.assert_array_equal(entry["output"], expected,
                                      err_msg="%s iteration %d bucket %d" % (
                                          entry["case"], entry["iteration"], entry["bucket"]))
        key = (entry["case"], entry["bucket"])
        shifts.setdefault(key, set()).add(plan.shift)
        skipped.setdefault(entry["case"], []).append(
            (entry["iteration"], entry["params"], plan.skipped_reduce_scatter_steps))
    k = {c: core.skip_steps_for_rate(o.rate, world) for c, o in CASES.items()}
    # Static: every bucket skipped k steps every iteration, at the same slices.
    assert all(steps == k["static"] for _, _, steps in skipped["static"])
    assert all(shifts[("static", b)] == {0} for b in range(len(SIZES)))
    # Random: skipped every iteration; the shift moves with the iteration.
    assert all(steps == k["random"] for _, _, steps in skipped["random"])
    assert any(len(shifts[("random", b)]) > 1 for b in range(len(SIZES)))
    # Selective: nothing in warm-up; afterwards the bucket of "ps.1" never,
    # every other bucket k steps.
    for iteration, params, steps in skipped["selective"]:
        if iteration < 2 or "ps.1" in params:
            assert steps == 0
        else:
            assert steps == k["selective"]


def test_the_backend_refuses_the_hooks_fields_naming_them():
    import atp.backend
    skip = SkipReduceOptions(mode="random", rate=0.5, warmup_steps=2)
    with pytest.raises(ValueError, match=r"^AtpOptions\.skip\.warmup_steps: the c10d backend"):
        atp.backend.register(atp.AtpOptions(skip=skip))
    with pytest.raises(ValueError, match=r"^AtpOptions\.skip\.rate: "):
        atp.backend.register(atp.AtpOptions(skip=SkipReduceOptions(mode="random", rate=2.0)))


# --- the ATP hook with SkipReduce: whole slices of fragments ---------------

FRAGMENT_FLOATS = 62  # floats per ATP fragment (ATP-SPEC)
ATP_CASE = SkipReduceOptions(mode="selective", rate=0.5, seed=9, warmup_steps=1,
                             protected_params=["ps.2"])


def atp_run(rank, world, init_file, out_dir):
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    dist._DEFAULT_FIRST_BUCKET_BYTES = 1
    records = []
    model = Scaled()
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1e-6)
    names = {p.data_ptr(): n for n, p in model.named_parameters()}
    state = hook.AtpHookState.create(atp.AtpOptions(skip=ATP_CASE), model=ddp)
    try:
        def recording(state, bucket):
            entry = {"iteration": state.schedule.iteration, "bucket": bucket.index(),
                     "input": bucket.buffer().numpy().copy(),
                     "params": [names[p.data_ptr()] for p in bucket.parameters()]}

            def done(future):
                entry["output"] = future.value().numpy().copy()
                records.append(entry)
                return future.value()
            return hook.atp_allreduce_hook(state, bucket).then(done)
        ddp.register_comm_hook(state, recording)
        for _ in range(3):
            ddp.zero_grad()
            ddp(torch.tensor(float(2 ** rank))).backward()
    finally:
        state.close()
        dist.destroy_process_group()
    with open(os.path.join(out_dir, "rank%d.pkl" % rank), "wb") as f:
        pickle.dump(records, f)


@pytest.mark.skipif(not hook.atp_push_pull_skips(),
                    reason="Worker.push_pull has no skip= in this build (issue 11 part 3)")
def test_atp_hook_drops_the_planned_fragment_slices_on_every_rank():
    from conftest import exact_sum
    world = 2
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(atp_run, args=(world, os.path.join(d, "init"), d), nprocs=world, join=True)
        ranks = []
        for r in range(world):
            with open(os.path.join(d, "rank%d.pkl" % r), "rb") as f:
                ranks.append(pickle.load(f))
    dropped_any = False
    for i, entry in enumerate(ranks[0]):
        np.testing.assert_array_equal(ranks[1][i]["output"], entry["output"])  # identical
        if any(n in ATP_CASE.protected_params for n in entry["params"]):
            skip = core.SkipOptions()
        else:
            skip = ATP_CASE.policy().for_tensor(entry["bucket"], entry["iteration"], world)
        plan = core.SkipPlan.create(skip, world)
        n = entry["input"].size
        fragments = -(-n // FRAGMENT_FLOATS)
        expected = exact_sum([ranks[r][i]["input"] for r in range(world)]) / np.float32(
            plan.average_divisor())
        for j in range(world):
            if plan.slice_dropped(j):
                begin, size = core.slice_range(fragments, world, j)
                expected[begin * FRAGMENT_FLOATS:(begin + size) * FRAGMENT_FLOATS] = 0
                dropped_any = dropped_any or size > 0
        np.testing.assert_array_equal(entry["output"], expected, err_msg="iteration %d bucket %d" % (
            entry["iteration"], entry["bucket"]))
        if entry["iteration"] < 1 or "ps.2" in entry["params"]:
            assert plan.skipped_reduce_scatter_steps == 0
    assert dropped_any


@pytest.mark.skipif(hook.atp_push_pull_skips(), reason="this build's push_pull skips")
def test_atp_hook_without_skip_support_refuses_skip_options():
    import torch.distributed as d
    store = d.HashStore()
    skip = SkipReduceOptions(mode="random", rate=0.5)
    with pytest.raises(ValueError, match=r"^AtpOptions\.skip: this build's Worker\.push_pull"):
        hook.AtpHookState.create(atp.AtpOptions(skip=skip), store=store, rank=0, world_size=2)
