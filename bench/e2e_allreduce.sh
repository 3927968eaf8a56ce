#!/usr/bin/env bash
# bench/e2e_allreduce.sh: libatp's allreduce beside gloo's and Open MPI's, in
# one invocation, same ranks and sizes, every result verified, ratios printed.
#
#   flock /work/.busy.lock bench/e2e_allreduce.sh [--build=DIR] [--workers=N]
#       [--floats=F] [--iterations=I] [--io_threads=T] [--racks=R]
#
# Defaults: 2 workers x 16 Mi floats (64 MiB) x 3 iterations, build dir
# ./build. Each system runs N ranks (processes for gloo and MPI; the
# in-process cluster's worker threads for libatp). Every program checks every
# result against the exact sum and exits non-zero on a wrong one; the runner
# then fails. Output: one line per system (per-worker bandwidth, ratio to
# gloo), then the JSON lines the programs printed.
#
# Then small operations (issue 9's wake-up floor): one 62-float fragment, 2
# ranks: gloo's average allreduce time over --small_count operations beside
# atp-ping --transport=kernel_udp's p50 (--small_count pings).
#
# Cases of issue 9 item 7 not run yet by this runner: libatp as processes
# (2 workers + atp-switchd + atp-ps over memif, and over the kernel UDP
# overlay: scripts/testbed) and the demo's two-rack topology; they print as
# "not run".
set -euo pipefail

build=build
workers=2
floats=$((16 * 1024 * 1024))
iterations=3
io_threads=1
racks=1
small_count=2000
for arg in "$@"; do
  case "$arg" in
    --build=*) build="${arg#*=}" ;;
    --workers=*) workers="${arg#*=}" ;;
    --floats=*) floats="${arg#*=}" ;;
    --iterations=*) iterations="${arg#*=}" ;;
    --io_threads=*) io_threads="${arg#*=}" ;;
    --racks=*) racks="${arg#*=}" ;;
    --small_count=*) small_count="${arg#*=}" ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "e2e_allreduce: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
for pair in "workers:$workers" "floats:$floats" "iterations:$iterations" \
            "io_threads:$io_threads" "racks:$racks" "small_count:$small_count"; do
  name="${pair%%:*}"; value="${pair#*:}"
  if ! [[ "$value" =~ ^[1-9][0-9]*$ ]]; then
    echo "e2e_allreduce: --$name must be a positive integer, got '$value'" >&2
    exit 2
  fi
done

gloo="$build/bench/peers/gloo-allreduce"
mpi="$build/bench/peers/mpi-allreduce"
atp="$build/examples/atp_throughput/atp-throughput"
ping="$build/examples/atp_ping/atp-ping"
for bin in "$gloo" "$mpi" "$atp" "$ping"; do
  [[ -x "$bin" ]] || { echo "e2e_allreduce: $bin missing: build it (cmake --build $build --target $(basename "$bin"))" >&2; exit 2; }
done

work=$(mktemp -d /tmp/e2e_allreduce.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# json_field FILE KEY: a number or word from a one-line JSON object.
json_field() { sed -n "s/.*\"$2\": *\([^,}]*\).*/\1/p" "$1" | head -1; }

# gloo: N processes, TCP transport, file store rendezvous.
mkdir -p "$work/store"
for ((r = 1; r < workers; ++r)); do
  "$gloo" --rank=$r --size="$workers" --floats="$floats" --iterations="$iterations" \
      --store="$work/store" > /dev/null &
  pids+=($!)
done
"$gloo" --rank=0 --size="$workers" --floats="$floats" --iterations="$iterations" \
    --store="$work/store" > "$work/gloo.json"
for p in "${pids[@]}"; do wait "$p"; done
pids=()

# Open MPI: N processes (root needs --allow-run-as-root; --oversubscribe
# lets N exceed the cores).
mpirun --allow-run-as-root --oversubscribe -n "$workers" "$mpi" "$floats" "$iterations" \
    > "$work/mpi.json"

# libatp, in-process cluster: N workers, switches and PS as threads of one
# process, loopback transport.
"$atp" --role=cluster --workers="$workers" --racks="$racks" --io_threads="$io_threads" \
    --tensor_floats="$floats" --iterations="$iterations" --json --progress=false \
    > "$work/atp_cluster.json"

# Small operations: 62 floats, 2 ranks.
rm -rf "$work/store" && mkdir -p "$work/store"
"$gloo" --rank=1 --size=2 --floats=62 --iterations="$small_count" --store="$work/store" > /dev/null &
pids+=($!)
"$gloo" --rank=0 --size=2 --floats=62 --iterations="$small_count" --store="$work/store" \
    > "$work/gloo_small.json"
for p in "${pids[@]}"; do wait "$p"; done
pids=()
"$ping" --transport=kernel_udp --workers=2 --count="$small_count" --json > "$work/ping.json"

gloo_mbps=$(json_field "$work/gloo.json" bandwidth_MBps)
mpi_mbps=$(json_field "$work/mpi.json" bandwidth_MBps)
atp_bps=$(json_field "$work/atp_cluster.json" goodput_bytes_per_s)
atp_errors=$(json_field "$work/atp_cluster.json" errors)
atp_timeouts=$(json_field "$work/atp_cluster.json" timeouts)
[[ "$(json_field "$work/gloo.json" exact)" == "true" ]] || { echo "gloo: wrong result" >&2; exit 1; }
[[ "$(json_field "$work/mpi.json" exact)" == "true" ]] || { echo "openmpi: wrong result" >&2; exit 1; }
[[ "$atp_errors" == "0" ]] || { echo "libatp in-process: $atp_errors wrong results" >&2; exit 1; }
[[ "$(json_field "$work/gloo_small.json" exact)" == "true" ]] || { echo "gloo (62 floats): wrong result" >&2; exit 1; }
[[ "$(json_field "$work/ping.json" errors)" == "0" ]] || { echo "atp-ping: wrong results" >&2; exit 1; }
gloo_small_us=$(awk -v s="$(json_field "$work/gloo_small.json" seconds_per_op)" 'BEGIN { printf "%.1f", s * 1e6 }')
ping_p50_us=$(sed -n 's/.*"p50": *\([^,}]*\).*/\1/p' "$work/ping.json" | head -1)

awk -v w="$workers" -v f="$floats" -v it="$iterations" -v g="$gloo_mbps" -v m="$mpi_mbps" \
    -v a="$atp_bps" -v t="$atp_timeouts" 'BEGIN {
  printf "allreduce, %d ranks x %d floats (%.1f MiB) x %d iterations; MB/s per worker, ratio to gloo\n",
         w, f, f * 4 / 1048576, it
  printf "  %-44s %10.1f  1.00x\n", "gloo ring allreduce (tcp, processes)", g
  printf "  %-44s %10.1f  %.2fx\n", "Open MPI MPI_Allreduce (processes)", m, m / g
  printf "  %-44s %10.1f  %.2fx  (timeouts %d)\n", "libatp in-process cluster (atp-throughput)", a / 1e6, a / 1e6 / g, t
  printf "  %-44s %10s\n", "libatp processes over memif", "not run"
  printf "  %-44s %10s\n", "libatp processes over kernel UDP", "not run"
  printf "  %-44s %10s\n", "libatp demo topology (2 racks)", "not run"
}'
awk -v g="$gloo_small_us" -v p="$ping_p50_us" -v n="$small_count" 'BEGIN {
  printf "small operations, 2 ranks x 62 floats, %d each: microseconds\n", n
  printf "  %-44s %10.1f\n", "gloo allreduce, average", g
  printf "  %-44s %10.1f  (%.2fx gloo average)\n", "atp-ping --transport=kernel_udp, p50", p, p / g
}'
echo "--- raw"
cat "$work/gloo.json" "$work/mpi.json" "$work/atp_cluster.json" "$work/gloo_small.json" "$work/ping.json"
