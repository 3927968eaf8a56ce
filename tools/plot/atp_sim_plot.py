#!/usr/bin/python3
"""tools/plot/atp_sim_plot.py: draws what `atp-sim --plot=FILE` sampled.

    atp_sim_plot.py SAMPLES.json OUT.png|OUT.svg

SAMPLES.json is written by atp-sim (examples/atp_sim/visibility.cc):
{"title", "interval_us", "jobs": [id...], "link_kinds": [name...], "tors": [name...],
 "samples": [{"t_us", "goodput_gbps": [per job], "window": [per job],
              "depth": [per link kind], "aggregators_in_use": [per ToR]}]}

Four panels over simulated time: goodput per job (worker 0's completed
fragments per interval), worker 0's congestion window per job (queue 0), the
deepest egress queue of each link kind, and the aggregators in use per ToR.
Samples after the last job's last completion are left out (atp-sim settles
for a while after the jobs end). Needs Debian's python3-matplotlib.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) != 3 or not argv[2].endswith((".png", ".svg")):
        print("usage: atp_sim_plot.py SAMPLES.json OUT.png|OUT.svg", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        data = json.load(f)
    samples = data["samples"]
    last = max((i for i, s in enumerate(samples) if any(g > 0 for g in s["goodput_gbps"])), default=len(samples) - 1)
    samples = samples[: last + 2]
    t = [s["t_us"] for s in samples]

    fig, axes = plt.subplots(4, 1, sharex=True, figsize=(8, 10))
    for j, job in enumerate(data["jobs"]):
        axes[0].plot(t, [s["goodput_gbps"][j] for s in samples], label=f"job {job}")
        axes[1].plot(t, [s["window"][j] for s in samples], label=f"job {job}")
    axes[0].set_ylabel("goodput (Gbit/s)")
    axes[1].set_ylabel("window (fragments)")
    for k, kind in enumerate(data["link_kinds"]):
        series = [s["depth"][k] for s in samples]
        if any(series):
            axes[2].plot(t, series, label=kind)
    axes[2].set_ylabel("deepest queue (frames)")
    for r, tor in enumerate(data["tors"]):
        axes[3].plot(t, [s["aggregators_in_use"][r] for s in samples], label=tor)
    axes[3].set_ylabel("aggregators in use")
    axes[3].set_xlabel("simulated time (us)")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper right", fontsize="small")
    if data.get("title"):
        fig.suptitle(data["title"])
    fig.tight_layout()
    fig.savefig(argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
