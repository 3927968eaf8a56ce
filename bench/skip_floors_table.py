#!/usr/bin/env python3
"""The SkipReduce floors table (docs/skipreduce.md, bench/RESULTS.md) from
collectives_bench's JSON:

    flock /work/.busy.lock build/bench/collectives_bench --benchmark_filter=SkipReduce \\
        --skip_rounds=30 --benchmark_format=json > skip.json
    bench/skip_floors_table.py skip.json

Ratios to theory: median over rounds [95% interval]; min-of-R. Random vs
static: median [interval]; min-of-R; pooled (sum over rounds) [bootstrap
interval]. Floors: ratios to theory >= 0.9; |random vs static| <= 2%.
"""
import json
import re
import sys


def main(path):
    data = json.load(open(path))
    print("| N | k | rounds | theory | plain ms (wall; CPU) | static / theory, wall | "
          "random / theory, wall | static / theory, CPU | random / theory, CPU | "
          "random vs static, wall | random vs static, CPU |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for b in data["benchmarks"]:
        m = re.search(r"ranks:(\d+)/MiB:\d+/k:(\d+)", b["name"])
        if not m:
            continue
        if b.get("error_occurred"):
            print("| %s | %s | error: %s |" % (m.group(1), m.group(2), b.get("error_message")))
            continue

        def ratio(name):
            return "%.3f [%.3f, %.3f]; %.3f" % tuple(
                b[name + s] for s in ("", "_lo", "_hi", "_min"))

        def percent(name):
            text = "%+.1f%% [%+.1f, %+.1f]; %+.1f%%" % tuple(
                100 * b[name + s] for s in ("", "_lo", "_hi", "_min"))
            if name + "_pooled" not in b:  # runs before the pooled figure existed
                return text
            return text + "; pooled %+.1f%% [%+.1f, %+.1f]" % tuple(
                100 * b[name + s] for s in ("_pooled", "_plo", "_phi"))

        print("| %s | %s | %d | %.3f | %.0f; %.0f | %s | %s | %s | %s | %s | %s |" % (
            m.group(1), m.group(2), b["iterations"], b["theory"], b["plain_ms"],
            b["plain_ms_cpu"], ratio("static_of_theory"), ratio("random_of_theory"),
            ratio("static_of_theory_cpu"), ratio("random_of_theory_cpu"),
            percent("random_vs_static"), percent("random_vs_static_cpu")))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: skip_floors_table.py COLLECTIVES_BENCH.json")
    main(sys.argv[1])
