#!/usr/bin/env python3
"""SkipReduce on a real training run (issue 11 part 6): baseline vs static vs
random vs selective SkipReduce at several skip rates, several seeds, through
the DDP hook (atp.hook: ring path, libatp's ring allreduce over gloo's TCP;
or the ATP path, Worker.push_pull(skip=) through a local switch + PS).

  PYTHONPATH=build/python flock /work/.busy.lock /usr/bin/python3 \\
      examples/pytorch/skip_experiment.py --out=/tmp/skip-exp \\
      --plot=docs/images/skipreduce-training.png

The model: an MLP on scikit-learn's bundled digits (8x8 images, 10 classes,
nothing downloaded), by default 64-1024-512-10 (0.6 M parameters, 2.4 MB of
gradient per step): wider than examples/pytorch/train.py's 64-256-128-10 so
that a step is dominated by the allreduce (--hidden changes it; the run
prints the fraction of a step spent in the collective, measured by a step
with a no-op hook beside the baseline). DDP buckets are one layer each
(--bucket_kb), so selective SkipReduce can protect layers: by default the
first layer (the input projection, as the seed protects VGG's first
convolution) and the classifier, 12% of the parameters.

All ranks are processes spawned once (torch.multiprocessing, gloo process
group for DDP's own traffic); the configurations of one seed run one after
the other inside them, interleaved, so machine load falls on all alike.
Writes results.json (every run: accuracy curve, step times, skipped
fraction) and summary.json/summary.md (mean and standard deviation over the
seeds) to --out, and the plot (test accuracy against training wall time,
mean over seeds, min-max band) to --plot.
"""
import argparse
import json
import os
import statistics
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

MODES = ("baseline", "static", "random", "selective")


def load_data():
    """digits, a fixed split (the test set is the same for every seed)."""
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, random_state=0,
                                                        stratify=y)
    return [torch.from_numpy(a) for a in (x_train, y_train, x_test, y_test)]


def make_model(hidden, seed):
    torch.manual_seed(seed)
    layers, width = [], 64
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, 10))
    return nn.Sequential(*layers)


def configs(args):
    """(name, mode, rate) in run order: the baseline, then every mode at every rate."""
    out = [("baseline", "baseline", 0.0)]
    for rate in args.rates:
        for mode in args.modes:
            if mode != "baseline":
                out.append(("%s-%d" % (mode, round(rate * 100)), mode, rate))
    return out


def skip_options(mode, rate, seed, args, last_linear):
    from atp.options import SkipReduceOptions
    if mode == "baseline":
        return SkipReduceOptions()
    protected = []
    if mode == "selective":
        protected = ["0.weight", "0.bias", "%d.weight" % last_linear, "%d.bias" % last_linear]
    return SkipReduceOptions(mode=mode, rate=rate, seed=seed, protected_params=protected,
                             warmup_steps=args.warmup_steps)


def noop_hook(state, bucket):
    """No communication: the compute-only step, for the collective's share."""
    future = torch.futures.Future()
    future.set_result(bucket.buffer())
    return future


def hook_state(args, ddp, skip):
    import atp
    from atp import hook
    options = atp.AtpOptions(skip=skip)
    if args.path == "ring":
        return hook.RingHookState.create(options, model=ddp), hook.ring_allreduce_hook
    return hook.AtpHookState.create(options, model=ddp), hook.atp_allreduce_hook


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item() * 100


def train_one(rank, world, args, data, name, mode, rate, seed):
    """One run; rank 0 returns its record."""
    x_train, y_train, x_test, y_test = data
    model = make_model(args.hidden, seed)
    last_linear = 2 * len(args.hidden)
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_kb / 1024)
    state = None
    if mode == "compute-only":
        ddp.register_comm_hook(None, noop_hook)
    else:
        state, fn = hook_state(args, ddp, skip_options(mode, rate, seed, args, last_linear))
        ddp.register_comm_hook(state, fn)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    g = torch.Generator().manual_seed(seed)
    per_rank = len(x_train) // world
    order, cursor = None, per_rank
    step_times, curve, train_time = [], [], 0.0
    for step in range(1, args.steps + 1):
        if cursor + args.batch > per_rank:  # a new epoch: every rank draws the same permutation
            order = torch.randperm(len(x_train), generator=g)[rank * per_rank:(rank + 1) * per_rank]
            cursor = 0
        idx = order[cursor:cursor + args.batch]
        cursor += args.batch
        t0 = time.perf_counter()
        opt.zero_grad()
        nn.functional.cross_entropy(ddp(x_train[idx]), y_train[idx]).backward()
        opt.step()
        dt = time.perf_counter() - t0
        step_times.append(dt)
        train_time += dt
        if rank == 0 and (step % args.eval_every == 0 or step == args.steps):
            curve.append((step, train_time, accuracy(model, x_test, y_test)))
    skipped = state.schedule.skipped_fraction() if state is not None else 0.0
    if state is not None:
        state.close()
    if rank != 0:
        return None
    warm = step_times[len(step_times) // 10:]
    return {"config": name, "mode": mode, "rate": rate, "seed": seed, "world_size": world,
            "path": args.path, "steps": args.steps, "accuracy": curve[-1][2],
            "step_time_s": statistics.median(warm), "train_time_s": train_time,
            "skipped_fraction": skipped, "curve": curve}


def rank_main(rank, world, init_file, args, out_path):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    # One DDP bucket per layer, also for DDP's first bucket (1 MiB by default).
    dist._DEFAULT_FIRST_BUCKET_BYTES = args.bucket_kb * 1024
    data = load_data()
    todo = configs(args)
    try:
        for seed in args.seeds:
            runs = ([("compute-only", "compute-only", 0.0)] if args.compute_only else []) + todo
            for name, mode, rate in runs:
                record = train_one(rank, world, args, data, name, mode, rate, seed)
                if record is not None:
                    with open(out_path, "a") as f:
                        f.write(json.dumps(record) + "\n")
                    print("seed %d %-14s acc %6.2f%%  step %7.2f ms  skipped %.3f" % (
                        seed, name, record["accuracy"], record["step_time_s"] * 1e3,
                        record["skipped_fraction"]), flush=True)
    finally:
        dist.destroy_process_group()


def mean_std(values):
    values = list(values)
    return (statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0)


def time_to(curve, target):
    """Training wall time (s) at the first evaluation reaching `target`%."""
    for _, t, acc in curve:
        if acc >= target:
            return t
    return None


def summarize(results, args):
    by = {}
    for r in results:
        by.setdefault(r["config"], []).append(r)
    # Step times are compared with the baseline of the same seed (run
    # minutes apart at most, interleaved): the machine's load drifts more
    # between seeds than within one.
    base = {r["seed"]: r["step_time_s"] for r in by.get("baseline", [])}
    compute = {r["seed"]: r["step_time_s"] for r in by.get("compute-only", [])}
    share = statistics.mean(1 - compute[s] / base[s] for s in compute if s in base) \
        if compute else None
    rows = []
    for name, runs in by.items():
        acc = mean_std(r["accuracy"] for r in runs)
        step = mean_std(r["step_time_s"] * 1e3 for r in runs)
        ratios = [r["step_time_s"] / base[r["seed"]] for r in runs if r["seed"] in base]
        # The median and range: one seed's load spike would dominate a mean.
        ratio = (statistics.median(ratios), min(ratios), max(ratios))
        # Theory: the collective's share of a baseline step, shortened by the
        # ring steps skipped (k of 2(N-1) in a skipped bucket; weighted by size).
        k_mean = statistics.mean(r["skipped_fraction"] for r in runs) * args.world
        theory = (1 - share * k_mean / (2 * (args.world - 1))) if share is not None else None
        tta = [time_to(r["curve"], args.target) for r in runs]
        reached = [t for t in tta if t is not None]
        rows.append({"config": name, "mode": runs[0]["mode"], "rate": runs[0]["rate"],
                     "seeds": len(runs), "accuracy_mean": acc[0], "accuracy_std": acc[1],
                     "accuracy_min": min(r["accuracy"] for r in runs),
                     "step_ms_mean": step[0], "step_ms_std": step[1],
                     "step_vs_baseline": ratio[0], "step_vs_baseline_min": ratio[1],
                     "step_vs_baseline_max": ratio[2],
                     "step_vs_baseline_theory": theory if name != "compute-only" else None,
                     "collective_share": share,
                     "skipped_fraction": statistics.mean(r["skipped_fraction"] for r in runs),
                     "tta_s_mean": statistics.mean(reached) if reached else None,
                     "tta_reached": len(reached)})
    return rows


def markdown(rows, args):
    lines = ["| config | skipped | accuracy %% (mean ± sd, min) | step ms (mean ± sd) | "
             "step / baseline's (same seed; median [min, max]) | theory | "
             "time to %g%% (s, mean of runs reaching it) | runs reaching it |" % args.target,
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        tta = "%.2f" % r["tta_s_mean"] if r["tta_s_mean"] is not None else "-"
        theory = ("%.3f" % r["step_vs_baseline_theory"]
                  if r["step_vs_baseline_theory"] is not None else "-")
        lines.append("| %s | %.3f | %.2f ± %.2f (%.2f) | %.1f ± %.1f | %.3f [%.2f, %.2f] | %s | %s | %d/%d |" % (
            r["config"], r["skipped_fraction"], r["accuracy_mean"], r["accuracy_std"],
            r["accuracy_min"], r["step_ms_mean"], r["step_ms_std"], r["step_vs_baseline"],
            r["step_vs_baseline_min"], r["step_vs_baseline_max"], theory, tta, r["tta_reached"],
            r["seeds"]))
    if rows and rows[0]["collective_share"] is not None:
        lines.append("\nThe collective's share of a baseline step (1 - compute-only / baseline, "
                     "mean over seeds): %.3f\n" % rows[0]["collective_share"])
    return "\n".join(lines) + "\n"


def plot(results, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    by = {}
    for r in results:
        if r["mode"] != "compute-only":
            by.setdefault(r["config"], []).append(r)
    colors = {"baseline": "black", "static": "tab:red", "random": "tab:blue",
              "selective": "tab:green"}
    fig, axes = plt.subplots(2, len(args.rates), figsize=(5.5 * len(args.rates), 8.0),
                             squeeze=False, sharey=True)
    for row, x_index, x_label in ((0, 1, "training wall time (s, rank 0; a loaded machine)"),
                                  (1, 0, "step (independent of the machine's load)")):
        plot_row(axes[row], by, args, colors, x_index, x_label)
    axes[0][0].set_ylabel("test accuracy % (mean of seeds, band: min-max)")
    axes[1][0].set_ylabel("test accuracy % (mean of seeds, band: min-max)")
    fig.suptitle("SkipReduce through atp's DDP hook (%s path): digits MLP %s, %d ranks" % (
        args.path, "-".join(["64"] + [str(h) for h in args.hidden] + ["10"]), args.world))
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(args.plot)), exist_ok=True)
    fig.savefig(args.plot, dpi=100)


def plot_row(axes, by, args, colors, x_index, x_label):
    for ax, rate in zip(axes, args.rates):
        for name, runs in by.items():
            mode = runs[0]["mode"]
            if mode != "baseline" and abs(runs[0]["rate"] - rate) > 1e-9:
                continue
            n = min(len(r["curve"]) for r in runs)
            t = np.mean([[c[x_index] for c in r["curve"][:n]] for r in runs], axis=0)
            acc = np.array([[c[2] for c in r["curve"][:n]] for r in runs])
            ax.plot(t, acc.mean(0), color=colors[mode], label="%s (%d seeds)" % (name, len(runs)),
                    linestyle="-" if mode in ("baseline", "selective") else "--")
            ax.fill_between(t, acc.min(0), acc.max(0), color=colors[mode], alpha=0.12)
        ax.axhline(args.target, color="grey", linewidth=0.8, linestyle=":")
        ax.set_title("%d%% skipped (k = %d of %d ranks)" % (
            round(rate * 100), max(0, min(args.world - 1, round(rate * args.world))), args.world))
        ax.set_xlabel(x_label)
        ax.set_ylim(max(0, args.plot_ymin), 100)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)


def parse_list(kind):
    return lambda text: [kind(v) for v in text.split(",") if v]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", type=int, default=4, help="ranks (processes)")
    p.add_argument("--seeds", type=parse_list(int), default=[1, 2, 3, 4, 5])
    p.add_argument("--rates", type=parse_list(float), default=[0.25, 0.5, 0.75])
    p.add_argument("--modes", type=parse_list(str), default=list(MODES))
    p.add_argument("--path", choices=["ring", "atp"], default="ring")
    p.add_argument("--hidden", type=parse_list(int), default=[1024, 512])
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--batch", type=int, default=16, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--warmup_steps", type=int, default=0)
    p.add_argument("--bucket_kb", type=int, default=1,
                   help="DDP bucket cap (1: one layer per bucket, so selective can protect layers)")
    p.add_argument("--eval_every", type=int, default=10)
    p.add_argument("--target", type=float, default=95.0, help="accuracy %% for time to accuracy")
    p.add_argument("--compute_only", action="store_true",
                   help="also run a step with no communication per seed (the collective's share)")
    p.add_argument("--out", default="skip-experiment-out")
    p.add_argument("--plot", default="")
    p.add_argument("--plot_ymin", type=float, default=50.0)
    p.add_argument("--replot", action="store_true", help="only re-read --out and re-plot")
    args = p.parse_args()
    for name, ok in (("--world", 2 <= args.world <= 16), ("--steps", args.steps > 0),
                     ("--batch", args.batch > 0), ("--eval_every", args.eval_every > 0),
                     ("--bucket_kb", args.bucket_kb > 0), ("--seeds", bool(args.seeds)),
                     ("--rates", all(0 < r <= 1 for r in args.rates) and bool(args.rates)),
                     ("--modes", all(m in MODES for m in args.modes)),
                     ("--hidden", bool(args.hidden) and all(h > 0 for h in args.hidden))):
        if not ok:
            print("skip_experiment: bad %s" % name, file=sys.stderr)
            return 2
    os.makedirs(args.out, exist_ok=True)
    out_path = os.path.join(args.out, "results.jsonl")
    if not args.replot:
        if os.path.exists(out_path):
            os.remove(out_path)
        started = time.time()
        with tempfile.TemporaryDirectory() as d:
            mp.spawn(rank_main, args=(args.world, os.path.join(d, "init"), args, out_path),
                     nprocs=args.world, join=True)
        print("wall time of the matrix: %.1f s" % (time.time() - started))
    with open(out_path) as f:
        results = [json.loads(line) for line in f]
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"args": vars(args), "runs": results}, f)
    rows = summarize(results, args)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(rows, f, indent=1)
    table = markdown(rows, args)
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(table)
    print(table)
    if args.plot:
        plot(results, args)
        print("plot: %s" % args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
