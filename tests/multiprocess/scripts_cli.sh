#!/usr/bin/env bash
# tests/multiprocess/scripts_cli.sh: bad input to the scripts (scripts/testbed,
# scripts/demo, scripts/test, scripts/install-deps, bench/e2e_allreduce.sh,
# bench/switchd_memif.sh) gets exit status 2 and a message naming the option,
# never a shell error ("unbound variable") or a silent acceptance; and the
# testbed's process bookkeeping holds (issue 12 part 5):
#
#   - kill-switch / kill-ps --signal=FOO: exit 2, the switch / PS still runs;
#     start-ps of a running PS: exit 1;
#   - a second `worker` for a running rank: exit 1, the first keeps its pid
#     file, and `down` stops it;
#   - down --dir=/new/x creates nothing; down on a directory that holds no
#     testbed leaves it alone;
#   - the udp block `up` picks is a multiple of 64 in 20000-39999;
#   - down stops a PS whose binary was rebuilt while it ran.
#
#   scripts_cli.sh --switchd=BIN --ps=BIN --throughput=BIN
#
# The part with processes runs a 1-rack udp testbed (no DPDK, no root) and
# one worker that waits for a peer that never comes. 3.5-18 s measured.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
testbed="$root/scripts/testbed"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --switchd=*) export ATP_SWITCHD="${1#*=}" ;;
    --ps=*) export ATP_PS="${1#*=}" ;;
    --throughput=*) export ATP_THROUGHPUT="${1#*=}" ;;
    *) echo "scripts_cli.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

scratch=$(mktemp -d /tmp/atp-cli.XXXXXX)
dir="$scratch/tb"
# The PS runs from a copy, so that the test can rebuild it under the
# running testbed (below).
if [[ -n "${ATP_PS:-}" ]]; then
  mkdir "$scratch/bin"
  cp "$ATP_PS" "$scratch/bin/atp-ps"
  export ATP_PS="$scratch/bin/atp-ps"
fi
finish() {
  local status=$?
  "$testbed" down --dir="$dir" >/dev/null 2>&1 || true
  rm -rf "$scratch"
  [[ $status -eq 0 ]] && echo "PASS" || echo "FAILED"
  exit "$status"
}
trap finish EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect STATUS PATTERN COMMAND...: the command exits with STATUS, its stderr
# matches PATTERN (grep -E) and holds no shell error.
expect() {
  local want="$1" pattern="$2" rc=0
  shift 2
  "$@" >"$scratch/out" 2>"$scratch/err" </dev/null || rc=$?
  [[ $rc -eq $want ]] || fail "$*: exit $rc, expected $want; stderr: $(head -c 400 "$scratch/err")"
  [[ -z "$pattern" ]] || grep -q -E -e "$pattern" "$scratch/err" || fail "$*: stderr lacks /$pattern/: $(head -c 400 "$scratch/err")"
  if grep -q -E "unbound variable|syntax error|command not found|integer expression expected" "$scratch/err"; then
    fail "$*: a shell error: $(head -c 400 "$scratch/err")"
  fi
  echo "ok: $* -> $rc"
}

# --- scripts/testbed, no processes
expect 2 "unknown command 'bogus'" "$testbed" bogus
expect 2 "usage|scripts/testbed up" "$testbed"
expect 2 "--variant=memif\|netns\|udp is required" "$testbed" up --dir="$dir"
expect 2 "--variant=memif\|netns\|udp is required, got 'foo'" "$testbed" up --variant=foo --dir="$dir"
expect 2 "--jobs=3: an integer in 1..2" "$testbed" up --variant=udp --jobs=3 --dir="$dir"
expect 2 "--workers_per_rack=0" "$testbed" up --variant=udp --workers_per_rack=0 --dir="$dir"
expect 2 "--io_threads=17" "$testbed" up --variant=udp --io_threads=17 --dir="$dir"
expect 2 "--racks=x" "$testbed" up --variant=udp --racks=x --dir="$dir"
expect 2 "--bottleneck_mbps=-5: an integer in 0..1000000" "$testbed" up --variant=udp --bottleneck_mbps=-5 --dir="$dir"
expect 2 "--udp_base=20000: a multiple of 64" "$testbed" up --variant=udp --udp_base=20000 --dir="$dir"
expect 2 "--udp_base needs --variant=udp" "$testbed" up --variant=memif --udp_base=20032 --dir="$dir"
expect 2 "unknown option '--bogus'" "$testbed" up --variant=udp --bogus --dir="$dir"
expect 2 "up does not take --rank" "$testbed" up --variant=udp --rank=1 --dir="$dir"
expect 2 "--rank=abc: an integer" "$testbed" worker --dir="$dir" --job=1 --rank=abc
expect 2 "--job=x: an integer" "$testbed" worker --dir="$dir" --job=x --rank=0
expect 2 "worker needs --job=J and --rank=R" "$testbed" worker --dir="$dir" --job=1
expect 2 "worker does not take --io_threads" "$testbed" worker --dir="$dir" --job=1 --rank=0 --io_threads=2
expect 2 "--signal=FOO: not a signal" "$testbed" kill-switch --dir="$dir" --signal=FOO tor0
expect 2 "kill-switch needs exactly one NAME" "$testbed" kill-switch --dir="$dir"
expect 2 "--signal=FOO: not a signal" "$testbed" kill-ps --dir="$dir" --signal=FOO ps1
expect 2 "--signal=0: not a signal that stops" "$testbed" kill-switch --dir="$dir" --signal=0 tor0
expect 2 "--signal=EXIT: not a signal that stops" "$testbed" kill-ps --dir="$dir" --signal=EXIT ps1
expect 2 "kill-ps needs exactly one NAME" "$testbed" kill-ps --dir="$dir"
expect 2 "start-ps does not take --signal" "$testbed" start-ps --dir="$dir" --signal=KILL ps1
expect 2 "status: unexpected argument 'extra'" "$testbed" status --dir="$dir" extra
expect 1 "no testbed in" "$testbed" status --dir="$dir"
# down: idempotent, creates nothing, removes only a testbed's DIR.
expect 0 "" "$testbed" down --dir="$scratch/new/x"
[[ ! -e "$scratch/new" ]] || fail "down --dir=$scratch/new/x created $scratch/new"
mkdir -p "$scratch/keep" && touch "$scratch/keep/file"
expect 1 "holds no testbed" "$testbed" down --dir="$scratch/keep"
[[ -f "$scratch/keep/file" ]] || fail "down removed a directory that held no testbed"

# --- the other scripts: usage errors only (nothing is built or run)
expect 2 "unknown option '--bogus'" "$root/scripts/demo" --bogus
expect 2 "--tensor_floats=abc" "$root/scripts/demo" --tensor_floats=abc
expect 2 "--iterations=0" "$root/scripts/demo" --iterations=0
expect 2 "-R needs a REGEX" "$root/scripts/test" -R
expect 2 "--fuzz=abc" "$root/scripts/test" --fuzz=abc
expect 2 "-jx" "$root/scripts/test" -jx
expect 2 "--sanitize=bogus" "$root/scripts/test" --sanitize=bogus
expect 2 "unknown option '--chek'" "$root/scripts/install-deps" --chek
expect 2 "--workers must be a positive integer" "$root/bench/e2e_allreduce.sh" --workers=abc
expect 2 "--demo_workers_per_rack" "$root/bench/e2e_allreduce.sh" --demo_workers_per_rack=0
expect 2 "--only=bogus" "$root/bench/e2e_allreduce.sh" --only=bogus
expect 2 "--seconds=abc" "$root/bench/switchd_memif.sh" --seconds=abc

# --- scripts/testbed with processes: a 1-rack udp testbed
"$testbed" up --variant=udp --racks=1 --workers_per_rack=2 --dir="$dir" 2>"$scratch/up.err" ||
  fail "up: $(cat "$scratch/up.err")"
base=$(sed -n 's/^udp_base=//p' "$dir/testbed.env")
[[ $((base % 64)) -eq 0 && $base -ge 20000 && $((base + 63)) -le 39999 ]] ||
  fail "udp base $base is not a multiple of 64 in 20000-39999"
echo "ok: udp block $base..$((base + 63))"
# Rank 0 waits for rank 1, which never comes (long deadline: `down` ends it).
"$testbed" worker --dir="$dir" --job=1 --rank=0 --tensor_floats=62 --iterations=1 \
  --deadline_s=120 >"$scratch/w0.out" 2>"$scratch/w0.err" &
first=$!
limit=$((SECONDS + 20))
until [[ "$(cat "$dir/pids/w1r0i0.pid" 2>/dev/null)" == "$first" ]]; do
  [[ $SECONDS -lt $limit ]] || fail "the first worker wrote no pid file"
  sleep 0.05
done
expect 1 "worker rank 0 of job 1 runs already \(pid $first\)" \
  "$testbed" worker --dir="$dir" --job=1 --rank=0 --tensor_floats=62 --iterations=1
[[ "$(cat "$dir/pids/w1r0i0.pid")" == "$first" ]] || fail "the second worker overwrote the first's pid file"
kill -0 "$first" || fail "the first worker died"
expect 2 "--rank=2: this testbed's ranks are 0..1" "$testbed" worker --dir="$dir" --job=1 --rank=2
expect 2 "unknown switch 'core' \(this testbed has: tor0\)" "$testbed" kill-switch --dir="$dir" core
switch_pid=$(cat "$dir/pids/tor0.pid")
expect 2 "--signal=FOO: not a signal" "$testbed" kill-switch --dir="$dir" --signal=FOO tor0
kill -0 "$switch_pid" || fail "tor0 died after kill-switch --signal=FOO"
expect 2 "unknown PS 'ps2' \(this testbed has: ps1\)" "$testbed" kill-ps --dir="$dir" ps2
expect 2 "unknown PS 'tor0'" "$testbed" start-ps --dir="$dir" tor0
ps_pid=$(cat "$dir/pids/ps1.pid")
expect 2 "--signal=FOO: not a signal" "$testbed" kill-ps --dir="$dir" --signal=FOO ps1
kill -0 "$ps_pid" || fail "ps1 died after kill-ps --signal=FOO"
expect 1 "ps1 is running already" "$testbed" start-ps --dir="$dir" ps1
expect 2 "stats needs exactly one NAME" "$testbed" stats --dir="$dir"
expect 2 "unknown switch 'w1r0i0'" "$testbed" stats --dir="$dir" w1r0i0
expect 2 "unknown PS 'ps2' \(this testbed has: ps1\)" "$testbed" stats --dir="$dir" ps2
expect 1 "a testbed is up in" "$testbed" up --variant=udp --racks=1 --dir="$dir"
# A rebuild while the testbed runs (the linker replaces the file): the
# running PS's /proc/PID/exe then reads "PATH (deleted)", and down must still
# know it for its own.
if [[ -n "${ATP_PS:-}" ]]; then
  cp "$ATP_PS" "$ATP_PS.new"
  mv -f "$ATP_PS.new" "$ATP_PS"
fi
"$testbed" down --dir="$dir"
kill -0 "$ps_pid" 2>/dev/null && fail "down left ps1 running (its binary rebuilt under it)"
if kill -0 "$first" 2>/dev/null; then fail "down left the first worker (pid $first) running"; fi
wait "$first" 2>/dev/null || true
kill -0 "$switch_pid" 2>/dev/null && fail "down left tor0 running"
[[ ! -e "$dir" ]] || fail "down left $dir"
echo "ok: down stopped the worker and the switch"
