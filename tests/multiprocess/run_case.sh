#!/usr/bin/env bash
# tests/multiprocess/run_case.sh: one multi-process test case, run by ctest
# (tests/multiprocess/CMakeLists.txt) on a testbed of its own (scripts/testbed).
#
#   run_case.sh --variant=memif|netns|udp --case=CASE --switchd=BIN --ps=BIN
#               --throughput=BIN --garbage_sender=BIN [--work=DIR] [--dpdk=0|1]
#
# Cases:
#   one_job         1 job, 4 workers in 2 racks, 2 aggregation levels: every
#                   worker's every result exact; the switches aggregated (tor0,
#                   tor1 at level 1, torps at level 2); no aggregator left in
#                   use; the core (ports restricted by kind, `admits`) refused
#                   none of the job's frames.
#   two_jobs        2 jobs at once on the same racks: both exact, no aggregator left.
#   switch_restart  tor0 killed (SIGKILL) mid-job and started again: the job
#                   finishes, exact.
#   worker_killed   2 jobs; a worker of job 2 killed mid-job: job 1 finishes
#                   exact; once job 2's workers are gone, every switch's
#                   aggregators_in_use is back to 0 within the orphan timeout
#                   (plus the time a stats snapshot takes).
#   visibility      1 job with every switch and the PS serving Prometheus
#                   metrics and capturing (docs/observability.md): tor0 and the
#                   PS scraped while the job runs (frames moving, aggregation
#                   seen), then, once it is done, the scrape equals the
#                   stats JSON and the job's known traffic (every fragment of
#                   every iteration completed once at the PS; each rack-0
#                   worker's fragments into tor0), and the captures hold ATP
#                   frames (counted by tshark with tools/wireshark/atp.lua
#                   when tshark is there)
#   ecn             one bottleneck (testbed --bottleneck_mbps: the core's port
#                   toward torps sends at most 100 Mb/s), the job run twice:
#                   marking off (no CE anywhere, no marked parameter packet)
#                   and at a threshold of 8 frames (CE marks at the core, every
#                   worker sees marked parameter packets, and the workers'
#                   windows end smaller). Exact both times. Every variant.
#   single_switch   --racks=1 --workers_per_rack=3 --io_threads=2: one switch
#                   aggregating both levels, 3 workers and the PS behind it, 2
#                   queues per port: every result exact, tor0 aggregated, no
#                   aggregator left in use.
#   wide_racks      --racks=2 --workers_per_rack=3 --io_threads=2: 6 workers,
#                   every result exact, tor0 and tor1 aggregated.
#   garbage         malformed ATP frames sent into tor0's probe port: each one
#                   counted (wrong length: by the port's transport; the others
#                   by the pipeline, per DecodeError reason; all in the port's
#                   rx_bad_frames), nothing forwarded, no aggregator touched;
#                   a job afterwards is exact.
#   forged          while a job runs, well-formed forged frames sent into tor0's
#                   probe port (docs/security.md): parameter packets claiming
#                   the PS's source and gradients claiming "both racks
#                   complete": every one refused at the probe port and counted
#                   by reason (rx_refused), none reaches a worker or the PS;
#                   every result exact.
#   ps_restart      the PS killed (SIGKILL) mid-job, between two operations
#                   (every worker stopped by --pause_after_iteration, so every
#                   fragment so far completed at every worker: the restart
#                   libatp recovers; docs/protocol.md "Runs and restarts"),
#                   started again with the same command line, the workers
#                   resumed: every result exact, the new PS rebuilt its
#                   window from the workers' joins. Then a second run of
#                   fresh workers against the same PS: exact, recognised as a
#                   new run (the PS rebuilt again).
#   ps_restart_mid_op  the PS killed (SIGKILL) in the middle of an operation:
#                   one large operation per worker through a paced port (at least 3.3 s), the PS killed once it has
#                   completed some of its fragments while every worker is
#                   still in it (in flight: results some workers got and
#                   others lost, unconfirmed pieces), started again: every
#                   result exact, the new PS asked for joins and rebuilt.
#
# Variants (scripts/testbed): memif (DPDK memif, no root), netns (veth pairs,
# DPDK af_packet, root), udp (kernel UDP sockets on 127.0.0.1 carrying whole
# frames, no root, no DPDK in the switches nor the endpoints; the garbage case
# sends its datagrams to tor0's probe port from the probe0 slot).
#
# --dpdk=0: the build has no DPDK transport (LIBATP_WITH_DPDK=OFF): the memif
# and netns variants skip (their switch ports and endpoints are DPDK's), the
# udp variant runs.
#
# Exit: 0 passed, 1 failed (with the logs' tails), 77 skipped (netns without
# root, memif or netns without DPDK), 2 bad arguments. A trap runs `scripts/testbed down` in every case.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
testbed="$root/scripts/testbed"

variant="" case_name="" work="/tmp" dpdk=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --variant=*) variant="${1#*=}" ;;
    --case=*) case_name="${1#*=}" ;;
    --switchd=*) export ATP_SWITCHD="${1#*=}" ;;
    --ps=*) export ATP_PS="${1#*=}" ;;
    --throughput=*) export ATP_THROUGHPUT="${1#*=}" ;;
    --garbage_sender=*) garbage_sender="${1#*=}" ;;
    --work=*) work="${1#*=}" ;;
    --dpdk=*) dpdk="${1#*=}" ;;
    *) echo "run_case.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
[[ "$variant" == memif || "$variant" == netns || "$variant" == udp ]] ||
  { echo "run_case.sh: --variant=memif|netns|udp" >&2; exit 2; }
if [[ "$variant" != udp && "$dpdk" != 1 ]]; then
  echo "SKIP: built without DPDK (LIBATP_WITH_DPDK=OFF): the $variant variant's ports are DPDK's; the udp variant runs"
  exit 77
fi
if [[ "$variant" == netns && $EUID -ne 0 ]]; then
  echo "SKIP: the netns variant needs root (network namespaces, veth pairs, DPDK af_packet)"
  exit 77
fi

# Sizes: small enough for a 2-core machine running ~10 processes.
tensor_floats=${ATP_MP_TENSOR_FLOATS:-65536}
iterations=${ATP_MP_ITERATIONS:-3}
deadline_s=${ATP_MP_DEADLINE_S:-90}

# The testbed DIR is short (memif socket paths) and in /tmp; kept results
# (worker outputs, stats snapshots) go to $out, under the build tree.
dir=$(mktemp -d "/tmp/atp-mp-${variant:0:1}${case_name:0:3}.XXXXXX")
mkdir -p "$work"
out=$(mktemp -d "$work/${variant}_${case_name}.XXXXXX")
failed=1
finish() {
  local status=$?
  if [[ $failed -ne 0 ]]; then
    echo "---- FAILED ($variant/$case_name): logs (last lines each), kept in $out/logs"
    if [[ -d "$dir/logs" ]]; then
      cp -r "$dir/logs" "$out/" 2>/dev/null || true
      for f in "$dir"/logs/*.log; do echo "== $(basename "$f")"; tail -n 15 "$f"; done
    fi
    for f in "$out"/*.err; do [[ -f "$f" ]] && { echo "== $(basename "$f")"; tail -n 15 "$f"; }; done
  fi
  "$testbed" down --dir="$dir" || echo "run_case.sh: testbed down failed" >&2
  [[ $failed -eq 0 ]] && rm -rf "$out"
  exit "$status"
}
trap finish EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "[$(date +%T)] $*"; }

# json FILE EXPR: a Python expression over the parsed JSON `d`.
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# snapshot NAME FILE: the switch's stats JSON, now.
snapshot() { "$testbed" stats --dir="$dir" "$1" >"$2"; }

# start_worker JOB RANK [flags]: in the background; pid in $out/wJ_R.pid.
start_worker() {
  local j="$1" r="$2"
  shift 2
  "$testbed" worker --dir="$dir" --job="$j" --rank="$r" --tensor_floats="$tensor_floats" \
    --seed=7 --deadline_s="$deadline_s" --json "$@" >"$out/w${j}_$r.json" 2>"$out/w${j}_$r.err" &
  echo $! >"$out/w${j}_$r.pid"
}

# wait_worker JOB RANK: its exit status must be 0 (every result exact), and
# its JSON must say so.
wait_worker() {
  local j="$1" r="$2" pid rc=0
  pid=$(cat "$out/w${j}_$r.pid")
  wait "$pid" || rc=$?
  [[ $rc -eq 0 ]] || fail "worker $r of job $j exited with $rc (not every result exact)"
  local verdict
  verdict=$(python3 -c 'import json,sys
d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
ok = d["verified"] is True and d["wrong_values"] == 0 and d["completed_iterations"] == d["iterations"]
print("exact" if ok else "wrong_values=%s completed=%s/%s" % (d["wrong_values"], d["completed_iterations"], d["iterations"]))' \
    "$out/w${j}_$r.json") || fail "worker $r of job $j printed no JSON result"
  [[ "$verdict" == exact ]] || fail "worker $r of job $j: $verdict"
}

workers=4  # in a job: the testbed's racks x workers per rack
run_job() {  # JOB [flags]: all the job's workers at once, all exact
  local j="$1" r
  shift
  for ((r = 0; r < workers; r++)); do start_worker "$j" "$r" --iterations="$iterations" "$@"; done
  for ((r = 0; r < workers; r++)); do wait_worker "$j" "$r"; done
  note "job $j: $workers workers exact"
}

# wait_aggregators_free DEADLINE_S [SWITCH...]: every aggregating switch's
# (default tor0 tor1 torps) aggregators_in_use is 0 before the deadline.
wait_aggregators_free() {
  local limit="$1" start=$SECONDS sw n busy
  shift
  local -a aggregating=("$@")
  [[ ${#aggregating[@]} -gt 0 ]] || aggregating=(tor0 tor1 torps)
  while :; do
    busy=""
    for sw in "${aggregating[@]}"; do
      snapshot "$sw" "$out/$sw.free.json"
      n=$(json "$out/$sw.free.json" 'd["aggregators_in_use"]')
      [[ "$n" == 0 ]] || busy+=" $sw=$n"
    done
    [[ -n "$busy" ]] || return 0
    [[ $((SECONDS - start)) -lt $limit ]] || fail "aggregators still in use after ${limit} s:$busy"
    sleep 0.05
  done
}

up() { "$testbed" up --variant="$variant" --dir="$dir" "$@"; }

# wait_progress JOB RANK: the worker has finished at least one iteration
# (its progress line on stderr), before a deadline.
wait_progress() {
  local j="$1" r="$2" limit=$((SECONDS + deadline_s))
  until grep -q -E '\[[0-9]+/[0-9]+\]' "$out/w${j}_$r.err" 2>/dev/null; do
    kill -0 "$(cat "$out/w${j}_$r.pid")" 2>/dev/null || fail "worker $r of job $j ended before any progress"
    [[ $SECONDS -lt $limit ]] || fail "worker $r of job $j made no progress in ${deadline_s} s"
    sleep 0.05
  done
}

# wait_paused JOB RANK: the worker has stopped itself (--pause_after_iteration:
# SIGSTOP, state T in /proc), before a deadline.
wait_paused() {
  local j="$1" r="$2" pid limit=$((SECONDS + deadline_s)) state
  pid=$(cat "$out/w${j}_$r.pid")
  while :; do
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || fail "worker $r of job $j ended before pausing"
    [[ "$state" == T ]] && return 0
    [[ -n "$state" && "$state" != Z ]] || fail "worker $r of job $j ended before pausing"
    [[ $SECONDS -lt $limit ]] || fail "worker $r of job $j did not pause in ${deadline_s} s"
    sleep 0.05
  done
}

# ps_stat NAME: the PS's counter NAME (ParameterServerStats), now.
ps_stat() {
  "$testbed" stats --dir="$dir" ps1 >"$out/ps1.json"
  json "$out/ps1.json" "d[\"ps\"][\"$1\"]"
}
ps_rebuilds() { ps_stat rebuilds; }

# wait_ps_completed N: the PS has completed more than N fragments, before a
# deadline.
wait_ps_completed() {
  local n="$1" limit=$((SECONDS + deadline_s))
  until [[ $(ps_stat completed) -gt $n ]]; do
    [[ $SECONDS -lt $limit ]] || fail "the PS completed no more than $n fragments in ${deadline_s} s"
    sleep 0.05
  done
}

case "$case_name" in
  one_job)
    up --jobs=1
    run_job 1
    for sw in tor0 tor1 torps core; do snapshot "$sw" "$out/$sw.json"; done
    for sw in tor0 tor1; do
      [[ $(json "$out/$sw.json" 'd["pipeline"]["aggregated"]') -gt 0 ]] || fail "$sw aggregated nothing"
    done
    [[ $(json "$out/torps.json" 'd["pipeline"]["completed"]') -gt 0 ]] || fail "torps completed no level-2 aggregate"
    [[ $(json "$out/core.json" 'd["pipeline"]["aggregated"]') -eq 0 ]] || fail "the core aggregated"
    # The core's ports admit one kind each (admits): the job's own frames pass.
    [[ $(json "$out/core.json" 'sum(sum(p["rx_refused"].values()) for p in d["ports"])') -eq 0 ]] ||
      fail "the core refused frames of the job"
    wait_aggregators_free 5
    ;;
  single_switch)
    up --jobs=1 --racks=1 --workers_per_rack=3 --io_threads=2
    workers=3
    run_job 1
    snapshot tor0 "$out/tor0.json"
    [[ $(json "$out/tor0.json" 'd["pipeline"]["aggregated"]') -gt 0 ]] || fail "tor0 aggregated nothing"
    [[ $(json "$out/tor0.json" 'd["pipeline"]["completed"]') -gt 0 ]] || fail "tor0 completed no aggregate"
    grep -q "queues: 2" "$dir/tor0.yaml" || fail "tor0's ports do not have 2 queues"
    wait_aggregators_free 5 tor0
    ;;
  wide_racks)
    up --jobs=1 --racks=2 --workers_per_rack=3 --io_threads=2
    workers=6
    run_job 1
    for sw in tor0 tor1; do
      snapshot "$sw" "$out/$sw.json"
      [[ $(json "$out/$sw.json" 'd["pipeline"]["aggregated"]') -gt 0 ]] || fail "$sw aggregated nothing"
    done
    wait_aggregators_free 5
    ;;
  two_jobs)
    up --jobs=2
    for j in 1 2; do for r in 0 1 2 3; do start_worker "$j" "$r" --iterations="$iterations"; done; done
    for j in 1 2; do for r in 0 1 2 3; do wait_worker "$j" "$r"; done; done
    note "jobs 1 and 2 at once: 8 workers exact"
    wait_aggregators_free 5
    ;;
  switch_restart)
    if [[ "$variant" == memif && "${ATP_MP_MEMIF_RECONNECT:-1}" != 1 ]]; then
      # Over memif the workers (memif clients of tor0) and tor0's link to the
      # core reconnect by themselves (DpdkReconnect::kAuto restarts a client
      # port every 200 ms while its link is down). ATP_MP_MEMIF_RECONNECT=0
      # skips the case (to tell a reconnect problem from others).
      failed=0
      echo "SKIP: ATP_MP_MEMIF_RECONNECT=0"
      exit 77
    fi
    # Mid-job by construction, not by the machine's speed: the core's port
    # toward the PS is paced at $rate Mb/s, so each iteration's ~2,100
    # aggregates of 306 bytes take at least 52 ms at the default 100 Mb/s,
    # and the 10x iterations at least 1.5 s after the first one is seen.
    rate=${ATP_MP_BOTTLENECK_MBPS:-100}
    up --jobs=1 --bottleneck_mbps="$rate"
    long=$((iterations * 10))
    for r in 0 1 2 3; do start_worker 1 "$r" --iterations="$long"; done
    wait_progress 1 0
    "$testbed" kill-switch --dir="$dir" --signal=KILL tor0
    for r in 0 1 2 3; do
      kill -0 "$(cat "$out/w1_$r.pid")" 2>/dev/null || fail "worker $r finished before tor0 was killed: not mid-job"
    done
    note "tor0 killed mid-job"
    "$testbed" start-switch --dir="$dir" tor0
    note "tor0 restarted"
    for r in 0 1 2 3; do wait_worker 1 "$r"; done
    note "job 1 exact across the restart"
    ;;
  worker_killed)
    up --jobs=2
    # Overlap by construction, not by durations (a race on 2026-12-02: job 1
    # finished while job 2's last worker was still starting): every worker of
    # both jobs stops itself half-way; worker 3 of job 2 is killed while
    # stopped; job 2's survivors resume, and their next gradients wait in the
    # switches for a worker that is gone; then job 1 runs its second half
    # beside them.
    for r in 0 1 2 3; do
      start_worker 1 "$r" --iterations=$((2 * iterations)) --pause_after_iteration="$iterations"
      start_worker 2 "$r" --iterations=$((2 * iterations)) --pause_after_iteration="$iterations"
    done
    for j in 1 2; do for r in 0 1 2 3; do wait_paused "$j" "$r"; done; done
    kill -KILL "$(cat "$out/w2_3.pid")"
    wait "$(cat "$out/w2_3.pid")" 2>/dev/null || true
    note "worker 3 of job 2 killed mid-job (every worker paused after $iterations of $((2 * iterations)) iterations)"
    for r in 0 1 2; do kill -CONT "$(cat "$out/w2_$r.pid")"; done
    for r in 0 1 2 3; do kill -CONT "$(cat "$out/w1_$r.pid")"; done
    for r in 0 1 2 3; do wait_worker 1 "$r"; done
    note "job 1 exact"
    # Job 2 cannot finish: stop its other workers, then no traffic is left.
    for r in 0 1 2; do kill -TERM "$(cat "$out/w2_$r.pid")" 2>/dev/null || true; done
    for r in 0 1 2 3; do wait "$(cat "$out/w2_$r.pid")" 2>/dev/null || true; done
    orphan_ms=$(awk '/^orphan_timeout_ms:/ {print $2}' "$dir/tor0.yaml")
    note "job 2 stopped; waiting for the orphan timeout (${orphan_ms} ms) to free its aggregators"
    # 2 s beyond the timeout: a stats snapshot (SIGUSR1, a file write) per switch on a busy machine.
    wait_aggregators_free 2
    ;;
  ecn)
    # The same job twice through one bottleneck, the core's port toward
    # torps at $rate Mb/s (its egress FIFO is a queue at every port kind:
    # switch_emulator/daemon/port_rate.h): once with marking off (threshold
    # beyond any depth), once with a threshold of 8 frames. The core only
    # forwards: it marks IPv4 CE, torps carries the mark into the level-2
    # aggregate's ecn bit, the PS into its parameter packets, and the workers'
    # congestion control halves on them. Asserted: no mark at all when off;
    # with marking, marks at the core and at every worker, and smaller
    # windows at the end than without. Counts, not times.
    rate=${ATP_MP_BOTTLENECK_MBPS:-100}
    for mode in off on; do
      threshold=1000000
      [[ "$mode" == on ]] && threshold=8
      up --jobs=1 --ecn_threshold="$threshold" --bottleneck_mbps="$rate"
      run_job 1
      snapshot core "$out/core_$mode.json"
      /usr/bin/python3 - "$out" "$mode" "$workers" <<'PY' >"$out/ecn_$mode.txt" || fail "no worker JSON in the $mode run"
import json, sys
out, mode, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [json.loads(open(f"{out}/w1_{r}.json").read().strip().splitlines()[-1]) for r in range(workers)]
print(" ".join(str(sum(r[k] for r in rows))
               for k in ("ecn_marks", "window_reductions", "window", "timeouts", "loss_events")),
      min(r["ecn_marks"] for r in rows))
PY
      read -r marks halvings windows timeouts losses min_marks <"$out/ecn_$mode.txt"
      ce=$(json "$out/core_$mode.json" 'd["routing"]["ce_marked"]')
      drops=$(json "$out/core_$mode.json" '[p for p in d["ports"] if p["name"] == "torps"][0]["tx_dropped"]')
      note "ecn $mode: core CE marks $ce, bottleneck drops $drops; workers: $marks marked parameter packets (fewest $min_marks), $halvings window halvings, windows at the end $windows in all, $timeouts timeouts, $losses losses"
      "$testbed" down --dir="$dir"
      if [[ "$mode" == off ]]; then
        [[ $ce -eq 0 && $marks -eq 0 ]] || fail "marking off, yet $ce CE marks at the core and $marks at the workers"
        off_windows=$windows off_halvings=$halvings
      else
        [[ $ce -gt 0 ]] || fail "the core's bottleneck never held more than 8 frames: no CE mark"
        [[ $min_marks -gt 0 ]] || fail "a worker saw no marked parameter packet ($marks in all)"
        # Both runs halve on detected losses (reordering through the two
        # level-1 switches makes a few); only the marked run also halves on
        # marks, once per round trip while the bottleneck holds more than 8
        # frames: many more halvings (5-10x in the runs we made), and windows
        # that end lower (a third to three quarters).
        [[ $halvings -gt $off_halvings ]] ||
          fail "no more window halvings with marking ($halvings) than without ($off_halvings)"
        [[ $windows -lt $off_windows ]] ||
          fail "windows with marking ($windows) not below those without ($off_windows)"
      fi
    done
    ;;
  garbage)
    up --jobs=1
    for sw in tor0 core; do snapshot "$sw" "$out/$sw.before.json"; done
    if [[ "$variant" == memif ]]; then
      port_flags=(--port=memif --memif_socket="$dir/sock/tor0-probe.sock")
    elif [[ "$variant" == udp ]]; then
      # DIR/udp-ports: slot, first bound port, first port sent to.
      udp_from=$(awk '$1 == "probe0" {print $2}' "$dir/udp-ports")
      udp_to=$(awk '$1 == "probe0" {print $3}' "$dir/udp-ports")
      [[ -n "$udp_from" && -n "$udp_to" ]] || fail "no probe0 line in $dir/udp-ports"
      port_flags=(--port=udp --udp_bind="127.0.0.1:$udp_from" --udp_target="127.0.0.1:$udp_to")
    else
      prefix="atp$(printf '%s' "$(realpath -m "$dir")" | md5sum | cut -c1-7)"
      port_flags=(--port=af_packet --iface=eth0 --netns="$prefix-probe0")
    fi
    # Job 2, which no switch of this 1-job testbed restricts: a restricted
    # job's frames on the probe port are refused before they are validated
    # (counted in rx_refused, the forged case), and this case is about the
    # pipeline's malformed accounting.
    "$garbage_sender" "${port_flags[@]}" --job=2 --count=10 --hold_s=60 >"$out/garbage.json" 2>"$out/garbage.err" &
    gpid=$!
    until [[ -s "$out/garbage.json" ]]; do
      kill -0 "$gpid" 2>/dev/null || fail "garbage_sender failed: $(cat "$out/garbage.err")"
      sleep 0.05
    done
    sent=$(json "$out/garbage.json" 'd["sent"]')
    # The probe port's rx_bad_frames: frames its transport refused (wrong
    # length) plus those the pipeline found malformed.
    bad='[p for p in d["ports"] if p["name"] == "probe"][0]["rx_bad_frames"]'
    before=$(json "$out/tor0.before.json" "$bad")
    limit=$((SECONDS + 10))
    while :; do
      snapshot tor0 "$out/tor0.after.json"
      after=$(json "$out/tor0.after.json" "$bad")
      [[ $((after - before)) -lt $sent ]] || break
      [[ $SECONDS -lt $limit ]] || fail "tor0's probe port counted $((after - before)) of $sent bad frames"
      sleep 0.05
    done
    kill -TERM "$gpid"
    wait "$gpid" || fail "garbage_sender exited with an error"
    note "tor0 counted $sent malformed frames"
    snapshot core "$out/core.after.json"
    python3 - "$out" <<'EOF' || fail "garbage changed more than tor0's malformed counters"
import json, sys
out = sys.argv[1]
load = lambda n: json.load(open(f"{out}/{n}.json"))
g = load("garbage")
b, a = load("tor0.before"), load("tor0.after")
cb, ca = load("core.before"), load("core.after")
bad = []
# Frames of the wrong length never reach the pipeline: the port's transport
# refuses them (transport.rx_bad_frames); the others are counted by reason.
by_length = ("short_frame", "long_frame")
probe_b = [p for p in b["ports"] if p["name"] == "probe"][0]
probe_a = [p for p in a["ports"] if p["name"] == "probe"][0]
refused = probe_a["transport"]["rx_bad_frames"] - probe_b["transport"]["rx_bad_frames"]
if refused != sum(g["by_reason"][r] for r in by_length):
    bad.append(f"probe transport.rx_bad_frames +{refused}, sent {sum(g['by_reason'][r] for r in by_length)} of the wrong length")
rb, ra = b["pipeline"]["malformed_by_reason"], a["pipeline"]["malformed_by_reason"]
for reason, n in g["by_reason"].items():
    want = 0 if reason in by_length else n
    got = ra.get(reason, 0) - rb.get(reason, 0)
    if got != want:
        bad.append(f"malformed_by_reason[{reason}]: +{got}, expected +{want}")
header_level = g["sent"] - sum(g["by_reason"][r] for r in by_length)
if a["pipeline"]["malformed"] - b["pipeline"]["malformed"] != header_level:
    bad.append(f"pipeline.malformed +{a['pipeline']['malformed'] - b['pipeline']['malformed']}, expected +{header_level}")
if probe_a["rx_bad_frames"] - probe_b["rx_bad_frames"] != g["sent"]:
    bad.append("probe rx_bad_frames delta != frames sent")
for key in ("aggregated", "claimed", "completed", "not_atp", "acks", "collisions", "duplicates"):
    if a["pipeline"].get(key, 0) != b["pipeline"].get(key, 0):
        bad.append(f"tor0 pipeline.{key} changed: {b['pipeline'].get(key)} -> {a['pipeline'].get(key)}")
if a["aggregators_in_use"] != 0:
    bad.append(f"tor0 aggregators_in_use {a['aggregators_in_use']}")
txb = {p["name"]: p["tx_frames"] for p in b["ports"]}
for p in a["ports"]:
    if p["tx_frames"] != txb.get(p["name"]):
        bad.append(f"tor0 port {p['name']} sent {p['tx_frames'] - txb.get(p['name'], 0)} frames")
rxb = {p["name"]: p["rx_frames"] for p in cb["ports"]}
for p in ca["ports"]:
    if p["rx_frames"] != rxb.get(p["name"]):
        bad.append(f"core port {p['name']} received {p['rx_frames'] - rxb.get(p['name'], 0)} frames")
for r, v in a.get("routing", {}).items():
    if v != b.get("routing", {}).get(r):
        bad.append(f"tor0 routing.{r} changed")
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
EOF
    note "nothing else changed; a job afterwards:"
    run_job 1
    ;;
  forged)
    up --jobs=1
    [[ "$variant" == udp ]] || fail "the forged case is written for the udp variant"
    udp_from=$(awk '$1 == "probe0" {print $2}' "$dir/udp-ports")
    udp_to=$(awk '$1 == "probe0" {print $3}' "$dir/udp-ports")
    [[ -n "$udp_from" && -n "$udp_to" ]] || fail "no probe0 line in $dir/udp-ports"
    for ((r = 0; r < workers; r++)); do start_worker 1 "$r" --iterations="$iterations"; done
    wait_progress 1 0
    count=50
    "$garbage_sender" --port=udp --udp_bind="127.0.0.1:$udp_from" --udp_target="127.0.0.1:$udp_to" \
      --forged --count=$count >"$out/forged.json" 2>"$out/forged.err" || fail "garbage_sender --forged failed"
    for ((r = 0; r < workers; r++)); do wait_worker 1 "$r"; done
    note "job 1: $workers workers exact under forged frames"
    snapshot tor0 "$out/tor0.json"
    "$testbed" stats --dir="$dir" ps1 >"$out/ps1.json"
    refused='[p for p in d["ports"] if p["name"] == "probe"][0]["rx_refused"]'
    [[ $(json "$out/tor0.json" "$refused[\"parameter_port\"]") -eq $count ]] ||
      fail "tor0's probe port refused $(json "$out/tor0.json" "$refused") (want $count of each)"
    [[ $(json "$out/tor0.json" "$refused[\"gradient_port\"]") -eq $count ]] ||
      fail "tor0's probe port refused $(json "$out/tor0.json" "$refused") (want $count of each)"
    [[ $(json "$out/tor0.json" '[p for p in d["ports"] if p["name"] == "probe"][0]["tx_frames"]') -eq 0 ]] ||
      fail "tor0 sent frames out of the probe port"
    note "tor0's probe port refused $count forged parameter packets and $count forged gradients"
    wait_aggregators_free 5
    ;;
  visibility)
    export ATP_TESTBED_METRICS=1 ATP_TESTBED_PCAP_DIR="$out/pcap"
    up --jobs=1
    metrics_url() {  # NAME: the URL its log announced
      local url
      url=$(grep -o 'http://127\.0\.0\.1:[0-9]*/metrics' "$dir/logs/$1.log" | tail -n 1)
      [[ -n "$url" ]] || fail "$1 announced no metrics URL"
      echo "$url"
    }
    # metric FILE NAME [LABEL=VALUE...]: the sum of NAME's samples with those labels.
    metric() {
      python3 - "$@" <<'PY'
import re, sys
path, name, want = sys.argv[1], sys.argv[2], sys.argv[3:]
total, seen = 0.0, False
for line in open(path):
    m = re.match(r'^([a-z_]+)(\{(.*)\})? (\S+)$', line.strip())
    if not m or m.group(1) != name:
        continue
    labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(3) or ""))
    if all(labels.get(k) == v for k, v in (w.split("=", 1) for w in want)):
        total += float(m.group(4)); seen = True
if not seen:
    sys.exit("no sample of %s %s in %s" % (name, want, path))
print(int(total))
PY
    }
    scrape() { python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' "$1" >"$2"; }
    tor0_url=$(metrics_url tor0)
    ps_url=$(metrics_url ps1)
    for r in 0 1 2 3; do start_worker 1 "$r" --iterations="$iterations"; done
    wait_progress 1 0
    scrape "$tor0_url" "$out/tor0.during.prom"
    scrape "$ps_url" "$out/ps1.during.prom"
    [[ $(metric "$out/tor0.during.prom" atp_switch_frames_total direction=rx) -gt 0 ]] || fail "tor0: no frames during the job"
    [[ $(metric "$out/tor0.during.prom" atp_switch_aggregated_total) -gt 0 ]] || fail "tor0: nothing aggregated during the job"
    [[ $(metric "$out/ps1.during.prom" atp_ps_completed_total job=1) -gt 0 ]] || fail "ps1: nothing completed during the job"
    note "scraped during the job: tor0 and ps1 counting"
    for r in 0 1 2 3; do wait_worker 1 "$r"; done
    # Each iteration's fragments and its start barrier's one
    # (atp-throughput --start_barrier).
    fragments=$(( ((tensor_floats + 61) / 62 + 1) * iterations ))
    scrape "$ps_url" "$out/ps1.after.prom"
    completed=$(metric "$out/ps1.after.prom" atp_ps_completed_total job=1)
    [[ $completed -eq $fragments ]] || fail "ps1 completed $completed fragments, the job has $fragments"
    wait_aggregators_free 5
    scrape "$tor0_url" "$out/tor0.after.prom"
    snapshot tor0 "$out/tor0.after.json"
    for pair in aggregated:aggregated completed:completed collisions:collisions acks:acks; do
      from_metrics=$(metric "$out/tor0.after.prom" "atp_switch_${pair%%:*}_total")
      from_json=$(json "$out/tor0.after.json" "d['pipeline']['${pair#*:}']")
      [[ $from_metrics -eq $from_json ]] || fail "tor0 ${pair%%:*}: metrics $from_metrics, stats JSON $from_json"
    done
    # Per job: tor0 aggregates job 1 only, so its per-job counts are the totals.
    for pair in completed:completed collision:collisions resend:resend_to_ps flush:flushed; do
      if [[ ${pair%%:*} == completed ]]; then
        from_metrics=$(metric "$out/tor0.after.prom" atp_switch_job_completed_total job=1)
      else
        from_metrics=$(metric "$out/tor0.after.prom" atp_switch_job_to_ps_total job=1 reason="${pair%%:*}")
      fi
      from_json=$(json "$out/tor0.after.json" "[j['${pair#*:}'] for j in d['jobs'] if j['job'] == 1][0]")
      total=$(json "$out/tor0.after.json" "d['pipeline']['${pair#*:}']")
      [[ $from_metrics -eq $from_json && $from_json -eq $total ]] ||
        fail "tor0 job 1 ${pair#*:}: metrics $from_metrics, stats JSON $from_json, all jobs $total"
    done
    by_path=""
    for path in switch ps float; do
      by_path+=" $path $(metric "$out/ps1.after.prom" atp_ps_completed_total job=1 path=$path)"
    done
    [[ $(metric "$out/ps1.after.prom" atp_ps_completed_total job=1 path=float) -eq 0 ]] ||
      fail "ps1: float completions in an integer job"
    for port in $(json "$out/tor0.after.json" '" ".join(p["name"] for p in d["ports"])'); do
      rx=$(metric "$out/tor0.after.prom" atp_switch_frames_total port="$port" direction=rx)
      from_json=$(json "$out/tor0.after.json" "[p['rx_frames'] for p in d['ports'] if p['name'] == '$port'][0]")
      [[ $rx -eq $from_json ]] || fail "tor0 port $port rx: metrics $rx, stats JSON $from_json"
    done
    # Rack 0's two workers send every fragment at least once into tor0.
    worker_rx=0
    for port in $(json "$out/tor0.after.json" '" ".join(p["name"] for p in d["ports"] if p["name"].startswith("w"))'); do
      worker_rx=$((worker_rx + $(metric "$out/tor0.after.prom" atp_switch_frames_total port="$port" direction=rx)))
    done
    [[ $worker_rx -ge $((2 * fragments)) ]] || fail "tor0 received $worker_rx frames from its workers, fewer than 2 x $fragments"
    note "after the job: metrics equal the stats JSON; $completed fragments completed at the PS (by path:$by_path)"
    "$testbed" down --dir="$dir"
    for f in "$out/pcap/tor0/"w*-rx-00000.pcap "$out/pcap/ps1/ps-rx-00000.pcap"; do  # not the idle probe port
      [[ $(stat -c %s "$f") -gt 24 ]] || fail "capture $f is empty"
    done
    if command -v tshark >/dev/null; then
      n=$(tshark -X lua_script:"$root/tools/wireshark/atp.lua" -r "$out/pcap/ps1/ps-rx-00000.pcap" \
            -Y 'atpagg.job == 1' 2>/dev/null | wc -l)
      [[ $n -gt 0 ]] || fail "tshark found no ATP frame of job 1 in the PS's capture"
      note "the PS's capture: $n ATP frames of job 1 (tshark)"
    fi
    ;;
  ps_restart)
    up --jobs=1
    # Twice the usual iterations, every worker stopping itself half-way.
    for ((r = 0; r < workers; r++)); do
      start_worker 1 "$r" --iterations=$((2 * iterations)) --pause_after_iteration="$iterations"
    done
    for ((r = 0; r < workers; r++)); do wait_paused 1 "$r"; done
    "$testbed" kill-ps --dir="$dir" --signal=KILL ps1
    note "every worker paused after $iterations of $((2 * iterations)) iterations; ps1 killed"
    "$testbed" start-ps --dir="$dir" ps1
    for ((r = 0; r < workers; r++)); do kill -CONT "$(cat "$out/w1_$r.pid")"; done
    note "ps1 restarted, workers resumed"
    for ((r = 0; r < workers; r++)); do wait_worker 1 "$r"; done
    rebuilds=$(ps_rebuilds)
    [[ $rebuilds -gt 0 ]] || fail "the restarted PS rebuilt nothing"
    note "job 1 exact across the PS restart ($rebuilds queue rebuild(s))"
    # A second run: fresh workers against the PS that served the first, with
    # other inputs (--seed=8), so that a result the PS kept from the first
    # run would be wrong, not equal by chance.
    for ((r = 0; r < workers; r++)); do start_worker 1 "$r" --iterations=1 --seed=8; done
    for ((r = 0; r < workers; r++)); do wait_worker 1 "$r"; done
    second=$(ps_rebuilds)
    [[ $second -gt $rebuilds ]] || fail "the PS did not rebuild for the second run ($rebuilds, then $second rebuilds)"
    note "a second run of fresh workers against the same PS exact ($second rebuilds in all)"
    ;;
  ps_restart_mid_op)
    # One operation of 64 times the usual tensor (about 68,000 fragments at
    # the default 65,536 floats): the PS is killed once it completed 1,000 of
    # them, with every worker still in it. Still in it by construction, not
    # by the machine's speed (a quiet machine finished the whole operation in
    # 0.7 s, before the kill): the core's port toward the PS is paced at
    # $rate Mb/s, so the racks' ~136,000 aggregates of 306 bytes take at
    # least 3.3 s at the default 100 Mb/s, and the kill comes after ~1.5%.
    rate=${ATP_MP_BOTTLENECK_MBPS:-100}
    up --jobs=1 --bottleneck_mbps="$rate"
    tensor_floats=$((64 * tensor_floats))
    for ((r = 0; r < workers; r++)); do start_worker 1 "$r" --iterations=1; done
    wait_ps_completed 1000
    "$testbed" kill-ps --dir="$dir" --signal=KILL ps1
    completed=$(json "$out/ps1.json" 'd["ps"]["completed"]')
    for ((r = 0; r < workers; r++)); do
      kill -0 "$(cat "$out/w1_$r.pid")" 2>/dev/null || fail "worker $r finished before ps1 was killed: not mid-operation"
    done
    note "ps1 killed in the middle of the operation (at least $completed of its fragments completed)"
    "$testbed" start-ps --dir="$dir" ps1
    note "ps1 restarted"
    for ((r = 0; r < workers; r++)); do wait_worker 1 "$r"; done
    requests=$(ps_stat join_requests)
    rebuilds=$(ps_rebuilds)
    [[ $requests -gt 0 && $rebuilds -gt 0 ]] ||
      fail "the restarted PS asked for $requests join(s) and rebuilt $rebuilds queue(s)"
    note "job 1 exact across a PS restart mid-operation ($requests join request(s), $rebuilds rebuild(s), $(ps_stat replays) replay(s))"
    ;;
  *)
    echo "run_case.sh: unknown case '$case_name'" >&2
    exit 2
    ;;
esac
failed=0
note "PASS ($variant/$case_name)"
