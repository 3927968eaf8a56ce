#!/usr/bin/env python3
"""Trains a small MLP on scikit-learn's bundled digits (8x8 images, 10
classes; no download) with DistributedDataParallel over gloo and over ATP,
with the same seeds, and compares them.

  # both backends at 2 and 4 ranks, the plot, a summary table:
  python3 examples/pytorch/train.py --compare --world_sizes=2,4 --out=/tmp/atp-train

  # one backend under torchrun (the local mode starts atp-switchd + atp-ps):
  torchrun --nproc_per_node=2 examples/pytorch/train.py --backend=atp

  # SkipReduce through the c10d backend (AtpOptions.skip): no skipping,
  # static and random at 50%, 2 ranks; prints whether the loss fell and
  # whether every rank ended with bit-identical parameters:
  python3 examples/pytorch/train.py --compare --backends=atp --skips=none,static,random \
      --skip_rate=0.5 --world_sizes=2 --epochs=3 --out=/tmp/atp-train-skip

--backend: gloo, atp (the c10d backend: dist.init_process_group("atp")) or
atp-hook (gloo process group + the ATP DDP communication hook). PYTHONPATH
must reach the package atp (build/python in a build tree).

Per step the ATP runs log the worker's counters: fragments aggregated in the
switch vs at the PS (collisions and overflows), retransmissions, and the
fraction of fragments that took the float32 overflow path. Results differ
from gloo's only by quantization: ATP sums round(g * 1e8) as integers, so each
averaged gradient is exact to 1e-8 (absolute), where gloo's float sum is
exact to a relative 2^-24; over an epoch that shifts weights by ~1e-7 and may
flip the prediction of a test image that sits on a decision boundary.
"""
import argparse
import hashlib
import json
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def load_data(seed):
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=seed,
                                                        stratify=y)
    return (torch.from_numpy(x_train), torch.from_numpy(y_train), torch.from_numpy(x_test),
            torch.from_numpy(y_test))


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def atp_options(args):
    import atp
    options = atp.AtpOptions.from_env()
    if args.skip != "none":
        # SkipReduce (docs/skipreduce.md): on the backend, allreduce call c is
        # the random shift's iteration; warmup_calls skip nothing.
        options.skip.mode = args.skip
        options.skip.rate = args.skip_rate
        options.skip.seed = args.seed
        if args.backend == "atp":
            options.skip.warmup_calls = args.skip_warmup_calls
        else:
            options.skip.warmup_steps = args.skip_warmup_calls
    return options


def init_backend(args):
    """Returns (hook_state or None, counters or None)."""
    backend = args.backend
    if backend == "gloo":
        dist.init_process_group("gloo")
        return None, None
    import atp
    if backend == "atp":
        import atp.backend
        atp.backend.register(atp_options(args))
        dist.init_process_group("atp")
        return None, atp.backend.counters()
    from atp import hook
    dist.init_process_group("gloo")
    state = hook.AtpHookState.create(atp_options(args))
    return state, state.counters


def train(args):
    """One rank's run (torchrun env:// or spawned); rank 0 returns the results."""
    state, counters = init_backend(args)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    x_train, y_train, x_test, y_test = load_data(args.seed)
    model = nn.parallel.DistributedDataParallel(make_model(args.seed))
    if state is not None:
        from atp import hook
        model.register_comm_hook(state, hook.atp_allreduce_hook)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    sampler = torch.utils.data.DistributedSampler(torch.utils.data.TensorDataset(x_train, y_train),
                                                  num_replicas=world, rank=rank, seed=args.seed,
                                                  drop_last=True)
    losses, step_times, per_step = [], [], []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        order = torch.tensor(list(iter(sampler)))
        for start in range(0, len(order) - args.batch + 1, args.batch):
            idx = order[start:start + args.batch]
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x_train[idx]), y_train[idx])
            loss.backward()
            opt.step()
            step_times.append(time.perf_counter() - t0)
            losses.append(loss.item())
            if counters is not None:
                c = counters.step()
                per_step.append(c)
                if rank == 0 and args.log_every and len(losses) % args.log_every == 0:
                    print("[%s w=%d] step %d loss %.4f: %d fragments, %d in switch, %d at PS, "
                          "%d retransmissions, overflow %.4f" % (
                              args.backend, world, len(losses), loss.item(), c["fragments_sent"],
                              c["aggregated_in_switch"], c["aggregated_at_ps"],
                              c["retransmissions"], c["overflow_fraction"]), flush=True)
    with torch.no_grad():
        accuracy = (model.module(x_test).argmax(1) == y_test).float().mean().item() * 100
    final = {}
    if state is not None:
        state.close()
        final = state.final_stats
        dist.destroy_process_group()
    elif args.backend == "atp":
        import atp.backend
        atp.backend.shutdown()
    else:
        dist.destroy_process_group()
    # The parameters' bytes: DDP keeps replicas identical only if every rank
    # received the same averaged gradients, skipped or not.
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes()
                                     for p in model.module.parameters())).hexdigest()
    if rank != 0:
        return {"rank": rank, "param_sha256": digest}
    totals = {k: sum(c[k] for c in per_step) for k in per_step[0]} if per_step else {}
    if totals:
        totals["overflow_fraction"] = (totals["float_results"] / totals["parameter_packets"]
                                       if totals["parameter_packets"] else 0.0)
    warm = step_times[len(step_times) // 10:]  # the first 10% warm up caches and windows
    return {"backend": args.backend, "world_size": world, "accuracy": accuracy,
            "losses": losses, "step_time_s": float(np.median(warm)),
            "step_time_mean_s": float(np.mean(warm)), "steps": len(losses),
            "atp_totals": totals, "local_cluster": final, "skip": args.skip,
            "skip_rate": args.skip_rate if args.skip != "none" else 0.0, "rank": 0,
            "param_sha256": digest}


def spawned(rank, world, port, args, out):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    result = train(args)
    with open("%s.%d" % (out, rank), "w") as f:
        json.dump(result, f)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_spawned(args, backend, world):
    run_args = argparse.Namespace(**dict(vars(args), backend=backend))
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "result.json")
        mp.spawn(spawned, args=(world, free_port(), run_args, out), nprocs=world, join=True)
        ranks = []
        for rank in range(world):
            with open("%s.%d" % (out, rank)) as f:
                ranks.append(json.load(f))
        result = ranks[0]
        result["ranks_identical"] = len({r["param_sha256"] for r in ranks}) == 1
        return result


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    worlds = sorted({r["world_size"] for r in results})
    fig, axes = plt.subplots(1, len(worlds), figsize=(6 * len(worlds), 4), squeeze=False)
    for ax, world in zip(axes[0], worlds):
        for r in results:
            if r["world_size"] != world:
                continue
            k = 10  # a moving average over 10 steps
            smooth = np.convolve(r["losses"], np.ones(k) / k, mode="valid")
            name = r["backend"] + ("" if r["skip"] == "none" else
                                   " %s %d%%" % (r["skip"], round(r["skip_rate"] * 100)))
            ax.plot(smooth, label="%s (acc %.2f%%)" % (name, r["accuracy"]),
                    linestyle="-" if r["backend"] == "gloo" else "--")
        ax.set_title("digits MLP, DDP, %d ranks" % world)
        ax.set_xlabel("step")
        ax.set_ylabel("training loss (rank 0, 10-step mean)")
        ax.set_yscale("log")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def compare(args):
    results = []
    for world in [int(w) for w in args.world_sizes.split(",")]:
        for backend in args.backends.split(","):
            for skip in args.skips.split(","):
                if skip != "none" and backend == "gloo":
                    continue
                print("== %s, %d ranks, skip %s" % (backend, world, skip), flush=True)
                results.append(run_spawned(argparse.Namespace(**dict(vars(args), skip=skip)),
                                           backend, world))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f)
    plot(results, os.path.join(args.out, "loss.png"))
    ok = summarize(results)
    print("\nloss curves: %s" % os.path.join(args.out, "loss.png"))
    return 0 if ok else 1


def summarize(results):
    """Prints the table of `results` and whether the loss fell and the ranks
    ended bit-identical; with gloo among them, also each run's step time and
    loss against gloo's at its world size, and whether unskipped accuracy is
    within 0.5 points of gloo's (without gloo there is nothing to compare
    with: those columns are left out). Returns whether all of it holds."""
    gloo = {r["world_size"]: r for r in results if r["backend"] == "gloo"}
    print("\n%-9s %-11s %5s %9s %12s" % ("backend", "skip", "ranks", "accuracy", "step (ms)") +
          (" %9s" % "vs gloo" if gloo else "") +
          " %10s %10s %8s %9s" % ("in switch", "at PS", "retrans", "overflow") +
          (" %12s" % "max dloss" if gloo else "") +
          " %15s %9s" % ("loss first/last", "ranks =="))
    ok = True
    for r in results:
        # The training loss over the first and the last 10% of steps (means).
        tenth = max(1, len(r["losses"]) // 10)
        first, last = np.mean(r["losses"][:tenth]), np.mean(r["losses"][-tenth:])
        ok &= bool(last < first) and r["ranks_identical"]
        t = r["atp_totals"]
        ref = gloo.get(r["world_size"])
        skip = r["skip"] if r["skip"] == "none" else "%s %d%%" % (r["skip"],
                                                                  round(r["skip_rate"] * 100))
        line = "%-9s %-11s %5d %8.2f%% %12.3f" % (r["backend"], skip, r["world_size"],
                                                 r["accuracy"], r["step_time_s"] * 1e3)
        if gloo:
            line += (" %8.2fx" % (r["step_time_s"] / ref["step_time_s"]) if ref
                     else " %9s" % "-")
        line += " %10s %10s %8s %9s" % (
            t.get("aggregated_in_switch", "-"), t.get("aggregated_at_ps", "-"),
            t.get("retransmissions", "-"), "%.5f" % t["overflow_fraction"] if t else "-")
        if gloo:
            # The largest difference of the training loss from gloo's at the same step.
            line += (" %12.2e" % max(abs(a - b) for a, b in zip(r["losses"], ref["losses"]))
                     if ref else " %12s" % "-")
        line += " %7.3f/%-7.3f %9s" % (first, last, "yes" if r["ranks_identical"] else "NO")
        print(line)
        if ref and r["skip"] == "none" and abs(r["accuracy"] - ref["accuracy"]) > 0.5:
            ok = False
    print("loss fell, ranks bit-identical%s: %s"
          % (", unskipped accuracy within 0.5 points of gloo's" if gloo else "",
             "yes" if ok else "NO"))
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="atp", choices=["gloo", "atp", "atp-hook"])
    p.add_argument("--compare", action="store_true",
                   help="run --backends at each of --world_sizes (spawned ranks), plot, compare")
    p.add_argument("--backends", default="gloo,atp")
    p.add_argument("--world_sizes", default="2,4")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--log_every", type=int, default=0, help="ATP counters every N steps (0: none)")
    p.add_argument("--out", default="atp-train-out", help="--compare: results.json, loss.png")
    p.add_argument("--skip", default="none", choices=["none", "static", "random"],
                   help="SkipReduce on the ATP backends (AtpOptions.skip.mode)")
    p.add_argument("--skips", default="none",
                   help="--compare: the --skip values to run on each ATP backend")
    p.add_argument("--skip_rate", type=float, default=0.5, help="AtpOptions.skip.rate")
    p.add_argument("--skip_warmup_calls", type=int, default=0,
                   help="first allreduce calls (backend) / DDP steps (hook) not skipped")
    args = p.parse_args()
    if args.compare:
        return compare(args)
    result = train(args)
    if result is not None:
        print(json.dumps({k: v for k, v in result.items() if k != "losses"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
