#!/usr/bin/env bash
# bench/smoke.sh BENCH_DIR: every benchmark that checks its own result runs
# once (the shortest timing Google Benchmark allows, the long cases filtered
# out) and must finish without an error. Benchmarks are not in the tests'
# path otherwise, so a change that breaks what one verifies (BM_PsMulticast
# reported "wrong result" for days) would go unseen until someone measured.
# Timings mean nothing here. Skips for a kernel this CPU lacks (AVX-512) are
# not errors. ctest: bench_smoke (label bench).
set -uo pipefail
dir=${1:?usage: bench/smoke.sh BENCH_DIR}
[[ -d "$dir" ]] || { echo "bench/smoke.sh: $dir: no such directory" >&2; exit 2; }

# NAME FILTER (a --benchmark_filter regex; "." for every case). Left out:
# collectives_bench (gloo ranks over TCP for minutes) and sim_bench's
# 32-worker experiments (seconds each; the 4- and 8-worker ones run).
cases=(
  "runtime_host_bench ."
  "switch_host_bench ."
  "atp_skip_bench ."
  "capture_bench ."
  "transport_bench ."
  "wire_bench ."
  "quantize_bench /62$|/65536$"
  "switch_pipeline_bench aggregators:64/"
  "sim_bench BM_EventQueue|BM_LinkFrames|BM_Experiment/(4|8)/"
)
# What a benchmark may report and still pass: a kernel this CPU cannot run.
cpu_skip="not supported on this CPU|has no AVX-512"

failed=0
for c in "${cases[@]}"; do
  name=${c%% *}
  filter=${c#* }
  bin="$dir/$name"
  if [[ ! -x "$bin" ]]; then  # every one listed is built with the benchmarks
    echo "FAIL $name: $bin is missing"
    failed=1
    continue
  fi
  out=$("$bin" --benchmark_filter="$filter" --benchmark_min_time=0.000001 2>&1)
  rc=$?
  cases_run=$(grep -c '^BM_' <<< "$out")
  errors=$(grep 'ERROR OCCURRED' <<< "$out" | grep -Ev "$cpu_skip")
  if [[ $rc -ne 0 || -n "$errors" || $cases_run -eq 0 ]]; then
    echo "FAIL $name (exit $rc, $cases_run cases):"
    if [[ -n "$errors" ]]; then echo "$errors"; else tail -n 20 <<< "$out"; fi
    failed=1
  else
    echo "ok   $name: $cases_run cases"
  fi
done
exit $failed
