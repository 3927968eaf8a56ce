#!/usr/bin/env bash
# bench/switchd_memif.sh: atp-switchd's forwarding rate over memif beside
# dpdk-testpmd's on the same setup, then the end-to-end goodput of an ATP job
# on the local testbed (scripts/testbed, memif). Prints every command it runs
# and a Markdown summary for bench/RESULTS.md.
#
#   bench/switchd_memif.sh [--build=DIR] [--seconds=5] [--runs=3] [--no-e2e]
#                          [--tensor_floats=1048576] [--iterations=5]
#
# Forwarding rate: two processes, one busy poller each (two cores):
#
#   tester (memif_loop_tester), CPU 0            device under test, CPU 1
#     port to_dut (memif client) ------------->  port a (memif server)
#     port from_dut (memif client) <-----------  port b (memif server)
#     (what comes back on from_dut goes into to_dut again: frames circulate)
#
# The tester keeps 1024 valid 306-byte ATP frames of a job nobody aggregates
# circulating (so a switch classifies, routes and sends each one) and counts
# what comes back over --seconds. The device under test is atp-switchd (a
# route 0.0.0.0/0 -> b, no job; adaptive polling, then --busy_poll), or
# dpdk-testpmd in io mode (a -> b, no lookup at all): the baseline. Same
# tester, same memif setup, same frames. (dpdk-testpmd cannot be the tester:
# its frames are not ATP frames, and atp-switchd's ports carry only those.)
#
# The machine is a shared 2-vCPU VM: runs alternate (testpmd, switchd
# adaptive, switchd busy-poll) and the best of --runs is reported with the
# worst.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

build="${ATP_BUILD_DIR:-build}"
seconds=5
runs=3
e2e=1
tensor_floats=1048576
iterations=5
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build=*) build="${1#*=}" ;;
    --seconds=*) seconds="${1#*=}" ;;
    --runs=*) runs="${1#*=}" ;;
    --no-e2e) e2e=0 ;;
    --tensor_floats=*) tensor_floats="${1#*=}" ;;
    --iterations=*) iterations="${1#*=}" ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "switchd_memif.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
for pair in "seconds:$seconds" "runs:$runs" "tensor_floats:$tensor_floats" "iterations:$iterations"; do
  if ! [[ "${pair#*:}" =~ ^[1-9][0-9]{0,9}$ ]]; then
    echo "switchd_memif.sh: --${pair%%:*}=${pair#*:}: a positive integer" >&2
    exit 2
  fi
done
switchd="$build/switch_emulator/daemon/atp-switchd"
testpmd=/usr/bin/dpdk-testpmd
[[ -x "$switchd" ]] || { echo "missing $switchd (cmake --build $build --target atp-switchd)" >&2; exit 2; }
[[ -x "$testpmd" ]] || { echo "missing $testpmd (apt-get install dpdk-dev)" >&2; exit 2; }
[[ -x "$build/bench/memif_loop_tester" ]] || { echo "missing $build/bench/memif_loop_tester (cmake --build $build --target memif_loop_tester)" >&2; exit 2; }

dir=$(mktemp -d /tmp/atp-bench.XXXXXX)
dut_pid=""
cleanup() {
  if [[ -n "$dut_pid" ]] && kill -0 "$dut_pid" 2>/dev/null; then
    kill -INT "$dut_pid" 2>/dev/null || true
    wait "$dut_pid" 2>/dev/null || true
  fi
  [[ -n "${tb_dir:-}" ]] && scripts/testbed down --dir="$tb_dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

cat >"$dir/switch.yaml" <<EOF
name: bench
address: 10.255.0.9
aggregators: 4096
dpdk: {memory_mb: 256}
ports:
  - {name: a, type: memif, socket: $dir/a.sock, role: server}
  - {name: b, type: memif, socket: $dir/b.sock, role: server}
routes:
  - {prefix: 0.0.0.0/0, port: b}
jobs: []
EOF

eal_common=(--no-huge --no-pci --no-shconf --log-level=pmd.net.memif:critical)
memif_vdev() { echo "net_memif$1,role=$2,socket=$dir/$3.sock,socket-abstract=no"; }

# start_dut KIND: the device under test on CPU 1, listening on a.sock and b.sock.
start_dut() {
  rm -f "$dir"/a.sock "$dir"/b.sock
  local -a cmd
  case "$1" in
    switchd) cmd=(taskset -c 1 "$switchd" --config="$dir/switch.yaml" --stats_json="$dir/dut.json") ;;
    switchd_busy) cmd=(taskset -c 1 "$switchd" --config="$dir/switch.yaml" --busy_poll --stats_json="$dir/dut.json") ;;
    testpmd) cmd=("$testpmd" --lcores=0@1,1@1 -m 256 "${eal_common[@]}"
                  --vdev="$(memif_vdev 0 server a)" --vdev="$(memif_vdev 1 server b)"
                  -- --forward-mode=io --port-topology=chained --auto-start --stats-period=3600
                  --total-num-mbufs=16384 --nb-cores=1) ;;
  esac
  echo "\$ ${cmd[*]}" >&2
  setsid "${cmd[@]}" </dev/null >"$dir/dut.log" 2>&1 &
  dut_pid=$!
  local deadline=$((SECONDS + 30))
  until [[ -S "$dir/a.sock" && -S "$dir/b.sock" ]]; do
    kill -0 "$dut_pid" 2>/dev/null || { cat "$dir/dut.log" >&2; exit 1; }
    [[ $SECONDS -lt $deadline ]] || { echo "device under test did not listen" >&2; exit 1; }
    sleep 0.05
  done
}

stop_dut() {
  kill -INT "$dut_pid" 2>/dev/null || true
  wait "$dut_pid" 2>/dev/null || true
  dut_pid=""
}

# tester: prints the frames per second that came back over the window.
tester() {
  local -a cmd=(taskset -c 0 "$build/bench/memif_loop_tester" --to_dut="$dir/a.sock"
                --from_dut="$dir/b.sock" --inflight=1024 --warmup_s=1 --seconds="$seconds")
  echo "\$ ${cmd[*]}" >&2
  "${cmd[@]}" >"$dir/tester.log" 2>&1 || { cat "$dir/tester.log" >&2; exit 1; }
  sed -n 's/^RESULT frames_per_second=\([0-9]*\).*/\1/p' "$dir/tester.log"
}

declare -A best worst all crashes
measure() {  # KIND
  start_dut "$1"
  local rate
  rate=$(tester)
  # The tester has disconnected: the device must still be running.
  local deadline=$((SECONDS + 2))
  while kill -0 "$dut_pid" 2>/dev/null && [[ $SECONDS -lt $deadline ]]; do sleep 0.1; done
  if ! kill -0 "$dut_pid" 2>/dev/null; then
    local status=0
    wait "$dut_pid" 2>/dev/null || status=$?
    dut_pid=""
    crashes[$1]=$(( ${crashes[$1]:-0} + 1 ))
    echo "  $1: DIED (exit status $status) after the tester disconnected; its rate before: $rate" >&2
  else
    stop_dut
  fi
  echo "  $1: $(python3 -c "print(f'{$rate/1e6:.2f}')") Mpps" >&2
  all[$1]="${all[$1]:-} $rate"
  if [[ -z "${best[$1]:-}" || $rate -gt ${best[$1]} ]]; then best[$1]=$rate; fi
  if [[ -z "${worst[$1]:-}" || $rate -lt ${worst[$1]} ]]; then worst[$1]=$rate; fi
}

echo "== forwarding rate over memif, 306-byte frames, ${seconds} s windows, $runs runs (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
for ((i = 1; i <= runs; i++)); do
  measure testpmd
  measure switchd
  measure switchd_busy
done
mpps() { python3 -c "print(f'{$1/1e6:.2f}')"; }
echo
echo "| device under test | best Mpps | worst Mpps | share of testpmd (best) | died when the tester left |"
echo "|---|---|---|---|---|"
for k in testpmd switchd switchd_busy; do
  echo "| $k | $(mpps "${best[$k]}") | $(mpps "${worst[$k]}") | $(python3 -c "print(f'{100*${best[$k]}/${best[testpmd]}:.0f}%')") | ${crashes[$k]:-0} of $runs |"
done

if [[ $e2e -eq 1 ]]; then
  echo
  echo "== end to end: 1 job, 4 workers in 2 racks, tensor $tensor_floats floats x $iterations iterations (scripts/testbed, memif)"
  tb_dir=$(mktemp -d /tmp/atp-bench-tb.XXXXXX)
  export ATP_BUILD_DIR="$build"
  echo "\$ scripts/testbed up --variant=memif --dir=$tb_dir" >&2
  scripts/testbed up --variant=memif --dir="$tb_dir"
  pids=()
  for r in 0 1 2 3; do
    echo "\$ scripts/testbed worker --dir=$tb_dir --job=1 --rank=$r --tensor_floats=$tensor_floats --iterations=$iterations --json" >&2
    scripts/testbed worker --dir="$tb_dir" --job=1 --rank=$r --tensor_floats="$tensor_floats" \
      --iterations="$iterations" --seed=1 --deadline_s=600 --json >"$dir/w$r.json" 2>"$dir/w$r.err" &
    pids+=($!)
  done
  for r in 0 1 2 3; do wait "${pids[$r]}" || { echo "worker $r failed:" >&2; tail -n 5 "$dir/w$r.err" >&2; exit 1; }; done
  python3 - "$dir" <<'EOF'
import json, sys
ws = [json.loads(open(f"{sys.argv[1]}/w{r}.json").read().strip().splitlines()[-1]) for r in range(4)]
assert all(w["verified"] for w in ws), "a worker did not verify its results"
g = [w["goodput_bytes_per_s"] / 1e6 for w in ws]
print(f"goodput per worker: {', '.join(f'{x:.1f}' for x in g)} MB/s (mean {sum(g)/4:.1f}); "
      f"retransmissions {sum(w['retransmissions'] for w in ws)} of {sum(w['frames_sent'] for w in ws)} frames; all exact")
EOF
fi
