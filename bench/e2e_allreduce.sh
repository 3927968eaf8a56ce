#!/usr/bin/env bash
# bench/e2e_allreduce.sh: libatp's allreduce beside gloo's and Open MPI's, in
# one invocation, same ranks and sizes, every result verified, ratios printed.
#
#   flock /work/.busy.lock bench/e2e_allreduce.sh [--build=DIR] [--workers=N]
#       [--floats=F] [--iterations=I] [--io_threads=T] [--racks=1|2]
#       [--demo_workers_per_rack=M] [--small_count=C] [--only=LIST]
#       [--testbed_flags='--slots=S --window=W'] (passed to scripts/testbed up)
#       [--rounds=R]
#
# Defaults: 2 workers x 16 Mi floats (64 MiB) x 3 iterations, 1 I/O thread,
# build dir ./build. Systems (--only: a comma-separated subset, default all):
#
#   gloo     gloo's ring allreduce, N processes (tcp, file store)
#   mpi      Open MPI's MPI_Allreduce, N processes
#   cluster  libatp's in-process cluster: N workers, switches and PS as
#            threads of one process (atp-throughput --role=cluster)
#   memif    libatp as processes on scripts/testbed over DPDK memif: N workers
#            in --racks racks (1: one atp-switchd aggregating both levels, and
#            atp-ps: "2 workers + atp-switchd + atp-ps"; 2: the demo's four
#            switches), each worker with --io_threads queues
#   udp      the same over the kernel UDP overlay (no DPDK)
#   demo     the demo's topology (scripts/demo: memif, 2 racks x M workers,
#            tor0 and tor1 at level 1, a forwarding core, torps at level 2)
#            against gloo and MPI with 2*M ranks (run again at that size when
#            2*M != N)
#   small    one 62-float fragment, 2 ranks: gloo's average allreduce time
#            over C operations beside atp-ping --transport=kernel_udp's p50
#
# --rounds=R (default 1): the whole comparison R times, one after the other
# (so the systems alternate), each round's table printed, then a summary:
# per row the median MB/s and the median, lowest and highest ratio to gloo
# over the rounds. gloo alone moves by 2x from run to run on this 2-core
# machine, so one round's ratio is a sample, not a figure.
#
# Every program checks every result against the exact sum and exits non-zero
# on a wrong one; the runner then fails (exit 1). Timing: every timed
# operation starts behind a barrier, so that no rank's time includes another
# rank's preparation (MPI_Barrier, gloo's BarrierAllToAll, atp-throughput's
# --start_barrier: a one-fragment operation); gloo and MPI time I iterations
# after an untimed warm-up; the process jobs run I+1 iterations and the first
# is left out, likewise, from each worker's per-iteration times; the
# in-process cluster (one thread submits every worker's operation) times all
# I. Bandwidth: tensor bytes / time per operation, per worker (the
# mean over a job's workers). Output: a table (MB/s per worker, ratio to gloo
# with the same ranks; for process jobs also each worker's window and
# smoothed round trip at the end, and the CPU time atp-switchd and atp-ps used
# and their time runnable but waiting for a CPU, as shares of the job's wall
# time, from /proc/PID/task/*/schedstat), then the JSON lines the programs
# printed. Exit 2 on a bad flag or a missing binary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

build=build
workers=2
floats=$((16 * 1024 * 1024))
iterations=3
io_threads=1
racks=1
demo_per_rack=2
small_count=2000
testbed_flags=()
rounds=1
only="gloo,mpi,cluster,memif,udp,demo,small"
usage() { sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; }
for arg in "$@"; do
  case "$arg" in
    --build=*) build="${arg#*=}" ;;
    --workers=*) workers="${arg#*=}" ;;
    --floats=*) floats="${arg#*=}" ;;
    --iterations=*) iterations="${arg#*=}" ;;
    --io_threads=*) io_threads="${arg#*=}" ;;
    --racks=*) racks="${arg#*=}" ;;
    --demo_workers_per_rack=*) demo_per_rack="${arg#*=}" ;;
    --small_count=*) small_count="${arg#*=}" ;;
    --only=*) only="${arg#*=}" ;;
    --testbed_flags=*) read -r -a testbed_flags <<< "${arg#*=}" ;;
    --rounds=*) rounds="${arg#*=}" ;;
    -h|--help) usage; exit 0 ;;
    *) echo "e2e_allreduce: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
for pair in "workers:$workers" "floats:$floats" "iterations:$iterations" \
            "io_threads:$io_threads" "racks:$racks" "demo_workers_per_rack:$demo_per_rack" \
            "small_count:$small_count" "rounds:$rounds"; do
  name="${pair%%:*}"; value="${pair#*:}"
  if ! [[ "$value" =~ ^[1-9][0-9]{0,9}$ ]]; then
    echo "e2e_allreduce: --$name must be a positive integer, got '$value'" >&2
    exit 2
  fi
done
bad() { echo "e2e_allreduce: $*" >&2; exit 2; }
[[ $racks -le 2 ]] || bad "--racks=$racks: 1 or 2 (scripts/testbed's topologies)"
[[ $((workers % racks)) -eq 0 && $((workers / racks)) -le 32 ]] ||
  bad "--workers=$workers --racks=$racks: the racks hold the workers evenly, at most 32 each"
[[ $io_threads -le 16 ]] || bad "--io_threads=$io_threads: 1..16"
[[ $demo_per_rack -le 32 ]] || bad "--demo_workers_per_rack=$demo_per_rack: 1..32"
if [[ $rounds -gt 1 ]]; then
  # Each round is this script with --rounds=1; the summary reads their tables.
  round_args=()
  for arg in "$@"; do [[ "$arg" == --rounds=* ]] || round_args+=("$arg"); done
  tables=$(mktemp -d /tmp/e2e_rounds.XXXXXX)
  trap 'rm -rf "$tables"' EXIT
  for ((i = 1; i <= rounds; ++i)); do
    echo "=== round $i of $rounds"
    "$0" "${round_args[@]}" --rounds=1 | tee "$tables/round$i"
    [[ ${PIPESTATUS[0]} -eq 0 ]] || { echo "e2e_allreduce: round $i failed" >&2; exit 1; }
  done
  echo "=== summary over $rounds rounds: median MB/s (or us), median ratio to gloo [lowest..highest]"
  /usr/bin/python3 - "$tables" "$rounds" <<'PY'
import re, statistics, sys
tables, rounds = sys.argv[1], int(sys.argv[2])
order, values, ratios = [], {}, {}
row = re.compile(r"^  (.+?) +([0-9.]+) +\(?([0-9.]+)x")
for i in range(1, rounds + 1):
    header = ""
    for line in open(f"{tables}/round{i}"):
        if line.startswith("--- raw"):
            break
        if not line.startswith("  "):
            header = line.split(":")[0].split(",")[0].strip()
            continue
        m = row.match(line)
        if not m:
            continue
        key = (header, m.group(1).rstrip())
        if key not in values:
            order.append(key)
            values[key], ratios[key] = [], []
        values[key].append(float(m.group(2)))
        ratios[key].append(float(m.group(3)))
for key in order:
    v, r = values[key], ratios[key]
    print(f"  {key[1]:<52} {statistics.median(v):10.1f}  {statistics.median(r):5.2f}x"
          f"  [{min(r):.2f}..{max(r):.2f}] ({len(r)} rounds; {key[0]})")
PY
  exit 0
fi
declare -A run=()
IFS=, read -r -a only_list <<<"$only"
[[ ${#only_list[@]} -gt 0 ]] || bad "--only is empty"
for s in "${only_list[@]}"; do
  case "$s" in
    gloo|mpi|cluster|memif|udp|demo|small) run[$s]=1 ;;
    *) bad "--only=$only: '$s' is not one of gloo, mpi, cluster, memif, udp, demo, small" ;;
  esac
done
wants() { [[ -n "${run[$1]:-}" ]]; }

gloo="$build/bench/peers/gloo-allreduce"
mpi="$build/bench/peers/mpi-allreduce"
atp="$build/examples/atp_throughput/atp-throughput"
ping="$build/examples/atp_ping/atp-ping"
switchd="$build/switch_emulator/daemon/atp-switchd"
ps="$build/examples/atp_ps/atp-ps"
need=()
if wants gloo || wants demo; then need+=("$gloo"); fi
if wants mpi || wants demo; then need+=("$mpi"); fi
if wants cluster || wants memif || wants udp || wants demo; then need+=("$atp"); fi
if wants memif || wants udp || wants demo; then need+=("$switchd" "$ps"); fi
if wants small; then need+=("$gloo" "$ping"); fi
for bin in "${need[@]}"; do
  [[ -x "$bin" ]] || bad "$bin missing: build it (cmake --build $build --target $(basename "$bin"))"
done
if wants memif || wants demo; then
  grep -q '#define ATP_HAVE_DPDK 1' "$build/include/atp/config.h" 2>/dev/null || {
    echo "e2e_allreduce: $build has no DPDK transport: the memif and demo cases are left out" >&2
    unset 'run[memif]' 'run[demo]'
  }
fi
export ATP_BUILD_DIR="$build"
# E2E_WORKER_FLAGS: more atp-throughput flags for the process jobs' workers
# (scripts/testbed reads ATP_TESTBED_SWITCHD_FLAGS and ATP_TESTBED_PS_FLAGS
# likewise): for measuring other settings; the table says they were set.
read -r -a worker_flags <<<"${E2E_WORKER_FLAGS:-}"
# E2E_CLUSTER_FLAGS: likewise for the in-process cluster (--cluster_threads=N;
# --cpus=0,1 pins its fabric thread and its I/O thread to a core each).
read -r -a cluster_flags <<<"${E2E_CLUSTER_FLAGS:-}"

work=$(mktemp -d /tmp/e2e_allreduce.XXXXXX)
testbeds=()
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for d in "${testbeds[@]}"; do "$root/scripts/testbed" down --dir="$d" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT
wrong() { echo "e2e_allreduce: $*: wrong result" >&2; exit 1; }

# json_field FILE KEY: a number or word from a one-line JSON object.
json_field() { sed -n "s/.*\"$2\": *\([^,}]*\).*/\1/p" "$1" | head -1; }

# peers RANKS: gloo (processes, tcp, file store) and Open MPI with RANKS
# ranks; writes gloo_RANKS.json and mpi_RANKS.json, checks both exact.
peers() {
  local n="$1" r
  if wants gloo || wants demo; then
    rm -rf "$work/store" && mkdir -p "$work/store"
    for ((r = 1; r < n; ++r)); do
      "$gloo" --rank=$r --size="$n" --floats="$floats" --iterations="$iterations" \
          --store="$work/store" > /dev/null &
      pids+=($!)
    done
    local ok=1
    "$gloo" --rank=0 --size="$n" --floats="$floats" --iterations="$iterations" \
        --store="$work/store" > "$work/gloo_$n.json" || ok=0
    for p in "${pids[@]}"; do wait "$p" || ok=0; done
    pids=()
    [[ $ok -eq 1 ]] || { echo "e2e_allreduce: gloo ($n ranks): a rank failed (above)" >&2; exit 1; }
    [[ "$(json_field "$work/gloo_$n.json" exact)" == "true" ]] || wrong "gloo ($n ranks)"
  fi
  if wants mpi || wants demo; then
    # root needs --allow-run-as-root; --oversubscribe lets N exceed the cores.
    mpirun --allow-run-as-root --oversubscribe -n "$n" "$mpi" "$floats" "$iterations" \
        > "$work/mpi_$n.json"
    [[ "$(json_field "$work/mpi_$n.json" exact)" == "true" ]] || wrong "Open MPI ($n ranks)"
  fi
}

# sched_totals PID: "RUN WAIT SLICES" summed over the process's threads
# (/proc/PID/task/*/schedstat: ns on a CPU, ns runnable but waiting for one,
# times it was given a CPU).
sched_totals() {
  cat /proc/"$1"/task/*/schedstat 2>/dev/null |
    awk '{ run += $1; wait += $2; n += $3 } END { printf "%.0f %.0f %.0f\n", run, wait, n }'
}

# testbed_job NAME VARIANT RACKS PER_RACK: a job of RACKS x PER_RACK worker
# processes on a testbed of its own, every result checked; writes NAME.json
# ({"MBps": per-worker mean, ...}) from the workers' JSON and progress lines.
testbed_job() {
  local name="$1" variant="$2" nracks="$3" per="$4" r n dir failed=0
  n=$((nracks * per))
  dir=$(mktemp -d "/tmp/e2e-$variant.XXXXXX")
  testbeds+=("$dir")
  "$root/scripts/testbed" up --variant="$variant" --dir="$dir" --racks="$nracks" \
      --workers_per_rack="$per" --io_threads="$io_threads" ${testbed_flags[@]+"${testbed_flags[@]}"} \
      2> "$work/$name.up.err" ||
    { cat "$work/$name.up.err" >&2; echo "e2e_allreduce: $name: testbed up failed" >&2; exit 1; }
  local -a daemons=()
  local d
  for d in "$dir"/pids/*.pid; do daemons+=("$(basename "$d" .pid)"); done
  declare -A sched0=()
  for d in "${daemons[@]}"; do sched0[$d]=$(sched_totals "$(cat "$dir/pids/$d.pid")"); done
  # A deadline far beyond any plausible run: 1 MB/s per worker, plus a minute.
  local deadline=$((60 + floats * 4 * (iterations + 1) / 1000000))
  local start
  start=$(date +%s.%N)
  for ((r = 0; r < n; ++r)); do
    "$root/scripts/testbed" worker --dir="$dir" --job=1 --rank=$r --tensor_floats="$floats" \
        --iterations=$((iterations + 1)) --seed=1 --deadline_s="$deadline" --json \
        ${worker_flags[@]+"${worker_flags[@]}"} > "$work/$name.w$r.json" 2> "$work/$name.w$r.err" &
    pids+=($!)
  done
  for ((r = 0; r < n; ++r)); do
    if ! wait "${pids[$r]}"; then
      failed=1
      echo "e2e_allreduce: $name: worker $r failed:" >&2
      tail -n 5 "$work/$name.w$r.err" >&2
    fi
  done
  pids=()
  local wall
  wall=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { print a - b }')
  # Per daemon: its CPU time and its time runnable but waiting for a CPU,
  # as shares of the job's wall time, and the mean wait per time it ran.
  local cpu_line=""
  for d in "${daemons[@]}"; do
    cpu_line+=" $d=$(echo "${sched0[$d]} $(sched_totals "$(cat "$dir/pids/$d.pid")")" | awk -v w="$wall" '{
      run = ($4 - $1) / 1e9; wait = ($5 - $2) / 1e9; n = $6 - $3
      printf "%.0f%%/wait %.0f%% (%.2f ms each)", 100 * run / w, 100 * wait / w, (n > 0) ? wait / n * 1e3 : 0 }')"
  done
  "$root/scripts/testbed" down --dir="$dir" >/dev/null 2>&1 || true
  [[ $failed -eq 0 ]] || wrong "libatp $name"
  /usr/bin/python3 - "$work" "$name" "$n" "$floats" "$iterations" "$cpu_line" > "$work/$name.json" <<'PY' ||
import json, re, sys
work, name, n, floats, iterations, cpu = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
rates, retrans, timeouts, sent, srtt, window = [], 0, 0, 0, [], []
for r in range(n):
    lines = open(f"{work}/{name}.w{r}.json").read().strip().splitlines()
    w = json.loads(lines[-1])
    if not (w["verified"] is True and w["wrong_values"] == 0 and w["completed_iterations"] == iterations + 1):
        sys.exit(f"{name}: worker {r} not verified: {lines[-1]}")
    secs = [float(m) for m in re.findall(r"\[\d+/\d+\] ([0-9.]+) s", open(f"{work}/{name}.w{r}.err").read())]
    if len(secs) != iterations + 1:
        sys.exit(f"{name}: worker {r}: {len(secs)} progress lines, expected {iterations + 1}")
    rates.append(floats * 4 * iterations / sum(secs[1:]) / 1e6)
    retrans += w["retransmissions"]; timeouts += w["timeouts"]; sent += w["frames_sent"]
    srtt.append(w.get("srtt_us", 0)); window.append(w.get("window", 0))
# srtt_us, window: each worker's at the end (queue 0's smoothed round trip; the
# window summed over its queues), the mean: with 248 gradient bytes a frame,
# window * 248 / srtt bounds a worker's rate.
print(json.dumps({"system": name, "workers": n, "MBps": sum(rates) / n, "min_MBps": min(rates),
                  "frames_sent": sent, "retransmissions": retrans, "timeouts": timeouts,
                  "srtt_us": sum(srtt) / n, "window": sum(window) / n,
                  "daemon_cpu": cpu.strip()}))
PY
    { echo "e2e_allreduce: $name: results not verified" >&2; exit 1; }
}

if wants gloo || wants mpi; then peers "$workers"; fi
if wants cluster; then
  # The in-process cluster: N workers, switches and PS as threads of one
  # process, loopback transport.
  "$atp" --role=cluster --workers="$workers" --racks="$racks" --io_threads="$io_threads" \
      --tensor_floats="$floats" --iterations="$iterations" --json --progress=false \
      ${cluster_flags[@]+"${cluster_flags[@]}"} > "$work/atp_cluster.json"
  [[ "$(json_field "$work/atp_cluster.json" errors)" == "0" ]] || wrong "libatp in-process cluster"
fi
if wants memif; then testbed_job memif memif "$racks" $((workers / racks)); fi
if wants udp; then testbed_job udp udp "$racks" $((workers / racks)); fi
demo_ranks=$((2 * demo_per_rack))
if wants demo; then
  [[ $demo_ranks -eq $workers && -f "$work/gloo_$workers.json" && -f "$work/mpi_$workers.json" ]] ||
    peers "$demo_ranks"
  testbed_job demo memif 2 "$demo_per_rack"
fi
if wants small; then
  rm -rf "$work/store" && mkdir -p "$work/store"
  "$gloo" --rank=1 --size=2 --floats=62 --iterations="$small_count" --store="$work/store" > /dev/null &
  pids+=($!)
  "$gloo" --rank=0 --size=2 --floats=62 --iterations="$small_count" --store="$work/store" \
      > "$work/gloo_small.json"
  for p in "${pids[@]}"; do wait "$p"; done
  pids=()
  [[ "$(json_field "$work/gloo_small.json" exact)" == "true" ]] || wrong "gloo (62 floats)"
  "$ping" --transport=kernel_udp --workers=2 --count="$small_count" --json > "$work/ping.json"
  [[ "$(json_field "$work/ping.json" errors)" == "0" ]] || wrong "atp-ping"
fi

# The table. gloo_of RANKS: gloo's MB/s with that many ranks ("" if not run).
gloo_of() { [[ -f "$work/gloo_$1.json" ]] && json_field "$work/gloo_$1.json" bandwidth_MBps || true; }
row() {  # LABEL MBPS GLOO_MBPS [NOTE]
  awk -v l="$1" -v m="$2" -v g="$3" -v note="${4:-}" 'BEGIN {
    if (m == "") { printf "  %-52s %10s\n", l, "not run"; exit }
    if (g == "") printf "  %-52s %10.1f     -   %s\n", l, m, note
    else printf "  %-52s %10.1f  %5.2fx  %s\n", l, m, m / g, note }'
}
printf "allreduce, %d ranks x %d floats (%.1f MiB) x %d iterations, %d I/O thread(s); MB/s per worker, ratio to gloo (same ranks)\n" \
  "$workers" "$floats" "$(awk -v f="$floats" 'BEGIN { print f * 4 / 1048576 }')" "$iterations" "$io_threads"
g=$(gloo_of "$workers")
row "gloo ring allreduce (tcp, $workers processes)" "$g" "$g"
row "Open MPI MPI_Allreduce ($workers processes)" \
  "$([[ -f "$work/mpi_$workers.json" ]] && json_field "$work/mpi_$workers.json" bandwidth_MBps || true)" "$g"
if [[ -f "$work/atp_cluster.json" ]]; then
  row "libatp in-process cluster ($racks rack(s))" \
    "$(awk -v a="$(json_field "$work/atp_cluster.json" goodput_bytes_per_s)" 'BEGIN { print a / 1e6 }')" "$g" \
    "timeouts $(json_field "$work/atp_cluster.json" timeouts)"
else
  row "libatp in-process cluster" "" ""
fi
testbed_row() {  # NAME LABEL GLOO
  if [[ -f "$work/$1.json" ]]; then
    row "$2" "$(json_field "$work/$1.json" MBps)" "$3" \
      "retx $(json_field "$work/$1.json" retransmissions), timeouts $(json_field "$work/$1.json" timeouts), srtt $(printf %.0f "$(json_field "$work/$1.json" srtt_us)") us, window $(printf %.0f "$(json_field "$work/$1.json" window)"); CPU:$(sed -n 's/.*"daemon_cpu": *"\([^"]*\)".*/ \1/p' "$work/$1.json")"
  else
    row "$2" "" ""
  fi
}
topo="1 switch"; [[ $racks -eq 2 ]] && topo="4 switches"
testbed_row memif "libatp processes over memif ($racks rack(s), $topo)" "$g"
testbed_row udp "libatp processes over kernel UDP ($racks rack(s), $topo)" "$g"
if wants demo; then
  gd=$(gloo_of "$demo_ranks")
  echo "the demo's topology: 2 racks x $demo_per_rack workers, $demo_ranks ranks"
  row "gloo ring allreduce (tcp, $demo_ranks processes)" "$gd" "$gd"
  row "Open MPI MPI_Allreduce ($demo_ranks processes)" \
    "$(json_field "$work/mpi_$demo_ranks.json" bandwidth_MBps)" "$gd"
  testbed_row demo "libatp demo topology over memif (4 switches + PS)" "$gd"
fi
if wants small; then
  awk -v g="$(awk -v s="$(json_field "$work/gloo_small.json" seconds_per_op)" 'BEGIN { printf "%.1f", s * 1e6 }')" \
      -v p="$(sed -n 's/.*"p50": *\([^,}]*\).*/\1/p' "$work/ping.json" | head -1)" -v n="$small_count" 'BEGIN {
    printf "small operations, 2 ranks x 62 floats, %d each: microseconds\n", n
    printf "  %-52s %10.1f\n", "gloo allreduce, average", g
    printf "  %-52s %10.1f  (%.2fx gloo average)\n", "atp-ping --transport=kernel_udp, p50", p, p / g
  }'
fi
for v in E2E_WORKER_FLAGS E2E_CLUSTER_FLAGS ATP_TESTBED_SWITCHD_FLAGS ATP_TESTBED_PS_FLAGS; do
  [[ -z "${!v:-}" ]] || echo "note: $v='${!v}'"
done
echo "--- raw"
for f in "$work"/gloo_*.json "$work"/mpi_*.json "$work"/atp_cluster.json "$work"/memif.json \
         "$work"/udp.json "$work"/demo.json "$work"/ping.json; do
  [[ -f "$f" ]] && cat "$f"
done
exit 0
