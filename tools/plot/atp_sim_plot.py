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
for a while after the jobs end).

With `atp-sim --scenario=NAME --plot=FILE` the JSON is the scenario's table
instead: {"scenario", "title", "finding", "columns": [name...], "rows":
[[cell...]]}; the figure has one bar panel per numeric column (goodput and
completion time first, at most four), the rows labelled by their text
columns. Needs Debian's python3-matplotlib.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def plot_table(data, out):
    columns, rows = data["columns"], data["rows"]
    text = [i for i, c in enumerate(columns) if c != "exact" and all(isinstance(r[i], str) for r in rows)]
    numeric = [i for i, c in enumerate(columns) if all(isinstance(r[i], (int, float)) for r in rows)]
    preferred = [i for i in numeric if columns[i] in ("goodput_gbps", "jct_ms")]
    panels = (preferred + [i for i in numeric if i not in preferred])[:4]
    labels = ["\n".join(f"{columns[i]}={r[i]}" for i in text) for r in rows]
    fig, axes = plt.subplots(len(panels), 1, sharex=True, figsize=(8, 2.6 * len(panels)), squeeze=False)
    for ax, i in zip(axes[:, 0], panels):
        ax.bar(range(len(rows)), [r[i] for r in rows])
        ax.set_ylabel(columns[i])
        ax.grid(True, axis="y", alpha=0.3)
    axes[-1, 0].set_xticks(range(len(rows)), labels, fontsize="small")
    fig.suptitle(f"{data['scenario']}: {data['finding']}", fontsize="medium")
    fig.tight_layout()
    fig.savefig(out)
    return 0


def refuse(message):
    """Bad input: the message on stderr, exit status 2 (as the tools)."""
    print(f"atp_sim_plot.py: {message}", file=sys.stderr)
    return 2


def main(argv):
    if len(argv) != 3 or not argv[2].endswith((".png", ".svg")):
        return refuse("usage: atp_sim_plot.py SAMPLES.json OUT.png|OUT.svg")
    source, out = argv[1], argv[2]
    out_dir = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(out_dir):
        return refuse(f"{out}: no directory {out_dir}")
    try:
        with open(source) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        return refuse(f"{source}: {e}")
    if not isinstance(data, dict) or ("columns" not in data and "samples" not in data):
        return refuse(f"{source}: not what atp-sim --plot writes (no 'samples' nor 'columns')")
    if "columns" in data:
        if not data.get("rows"):
            return refuse(f"{source}: the table has no rows to plot")
        return plot_table(data, out)
    samples = data["samples"]
    if not samples:
        return refuse(f"{source}: no samples to plot")
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
    fig.savefig(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
