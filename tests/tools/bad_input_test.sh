#!/usr/bin/env bash
# tests/tools/bad_input_test.sh: every tool refuses bad input with exit status
# 2 and a message naming the flag (or the configuration field), before it
# opens a device or allocates anything large; never a crash (bad_alloc,
# abort), a late failure after the run, or a silent acceptance. Each case
# runs the tool once with a timeout; a tool that accepted the input would
# start running and be stopped by it (status 124): a failure here. A few
# cases check the other side: a value the mode allows is taken (accept).
#   bad_input_test.sh HAVE_DPDK(0|1) TOOL_PATH...
#     the paths of atp-throughput, atp-ps, atp-ping, atp-sim, embedded-ps,
#     atp-switchd and tools/plot/atp_sim_plot.py (each found by its file name).
set -uo pipefail
have_dpdk="$1"
shift
declare -A path
for p in "$@"; do path[$(basename "$p")]="$p"; done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0 cases=0

# check STATUS MESSAGE TOOL ARGS...: TOOL ARGS exits with STATUS and its
# stderr contains MESSAGE ("" for any). A refusal must come within 20 s; a
# run (STATUS 0 or 1) gets a minute.
check() {
  local want="$1" message="$2" tool="$3"
  shift 3
  cases=$((cases + 1))
  local rc=0 limit=60
  [[ $want -eq 2 ]] && limit=20
  timeout "$limit" "${path[$tool]}" "$@" >"$dir/out" 2>"$dir/err" </dev/null || rc=$?
  if [[ $rc -ne $want ]] || { [[ -n "$message" ]] && ! grep -qF -- "$message" "$dir/err"; }; then
    failures=$((failures + 1))
    echo "FAIL: $tool $* -> exit $rc (want $want and '$message'); stderr:"
    sed 's/^/    /' "$dir/err" | head -n 5
  fi
}

# expect MESSAGE TOOL ARGS...: TOOL ARGS exits 2 and its stderr contains MESSAGE.
expect() { check 2 "$@"; }
# accept TOOL ARGS...: TOOL ARGS runs to completion (exit 0): a flag given
# with a value its mode allows, even where it changes nothing, is not refused.
accept() { check 0 "" "$@"; }
# expect_failure MESSAGE TOOL ARGS...: TOOL ARGS runs and fails (exit 1),
# saying why on stderr (MESSAGE).
expect_failure() { check 1 "$@"; }

# A worker and a PS over the kernel UDP overlay (no DPDK needed); nothing
# listens there, and every case below must stop before it sends anything.
worker=(--role=worker --rank=0 --transport=kernel_udp --udp_bind=127.0.0.1:47000
        --udp_gateway=127.0.0.1:47100)
ps=(--transport=kernel_udp --udp_bind=127.0.0.1:47200 --udp_gateway=127.0.0.1:47100)

# --- atp-throughput, the in-process job (--role=cluster)
expect "--tensor_floats" atp-throughput --tensor_floats=40000000000
expect "--tensor_floats" atp-throughput --tensor_floats=0
expect "--iterations" atp-throughput --iterations=0
expect "--max_sleep_us" atp-throughput --max_sleep_us=0
expect "--min_sleep_us" atp-throughput --min_sleep_us=2000 --max_sleep_us=1000
expect "--spin_iterations" atp-throughput --spin_iterations=-1
expect "--spin_iterations" atp-throughput --busy_poll --spin_iterations=5
expect "--rto_floor_us" atp-throughput --rto_floor_us=0
expect "--rto_floor_us" atp-throughput --rto_floor_us=60000001
expect "--io_threads" atp-throughput --io_threads=-1
expect "--cluster_threads" atp-throughput --workers=2 --cluster_threads=4
expect "--cluster_threads" atp-throughput --cluster_threads=-2
expect "--fabric_thread" atp-throughput --fabric_thread=2
expect "--fabric_thread" atp-throughput --transport=kernel_udp --fabric_thread=1
expect "--ps_on_fabric_thread" atp-throughput --fabric_thread=0 --ps_on_fabric_thread=1
expect "only with --transport=loopback" atp-throughput --transport=kernel_udp --ps_on_fabric_thread=1
expect "--ps_on_fabric_thread" atp-throughput --ps_on_fabric_thread=2
expect "--slots" atp-throughput --slots=100
expect "--window" atp-throughput --window=300 --slots=256
expect "--path_rtt_us" atp-throughput --path_rtt_us=2000000
expect "--loss" atp-throughput --loss=1
expect "--loss" atp-throughput --transport=kernel_udp --loss=0.1
expect "--switches" atp-throughput --transport=kernel_udp --switches=single
expect "--switches" atp-throughput --transport=kernel_udp --switches=two_level
expect "--switches" atp-throughput --switches=three_level
# Kernel UDP's in-process job has no switch: the default 'auto' and 'none'
# say so and are taken.
accept atp-throughput --transport=kernel_udp --switches=auto --tensor_floats=62 --iterations=1
accept atp-throughput --transport=kernel_udp --switches=none --tensor_floats=62 --iterations=1
# The whole documented range of --rto_floor_us (a floor past 5 s takes the
# stall timeout with it).
accept atp-throughput --rto_floor_us=60000000 --tensor_floats=62 --iterations=1
accept atp-ping --rto_floor_us=60000000 --count=3
expect "--seed" atp-throughput --seed=2
expect "--deadline_s" atp-throughput --deadline_s=5
expect "--udp_bind" atp-throughput --udp_bind=127.0.0.1:47000
expect "--pcap_dir" atp-throughput --pcap_dir="$dir"
expect "--source_check" atp-throughput --source_check=off
expect "--pause_after_iteration" atp-throughput --pause_after_iteration=1
expect "--start_barrier" atp-throughput --start_barrier=false
# --- atp-throughput --role=worker
expect "--slots" atp-throughput "${worker[@]}" --slots=100
expect "--window" atp-throughput "${worker[@]}" --slots=64 --window=65
expect "--link_gbps" atp-throughput "${worker[@]}" --slots=64 --window=10 --link_gbps=25
expect "--path_rtt_us" atp-throughput "${worker[@]}" --path_rtt_us=0
expect "--workers" atp-throughput "${worker[@]}" --workers=4
expect "--cluster_threads" atp-throughput "${worker[@]}" --cluster_threads=1
expect "--fabric_thread" atp-throughput "${worker[@]}" --fabric_thread=1
expect "--ps_on_fabric_thread" atp-throughput "${worker[@]}" --ps_on_fabric_thread=1
expect "--tensor_floats" atp-throughput "${worker[@]}" --tensor_floats=40000000000
expect "--rto_floor_us" atp-throughput "${worker[@]}" --rto_floor_us=0
expect "--max_sleep_us" atp-throughput "${worker[@]}" --max_sleep_us=0
expect "--pcap_max_files" atp-throughput "${worker[@]}" --pcap_max_files=3
expect "--pcap_dir: '/nonexistent-atp-dir' does not exist" atp-throughput "${worker[@]}" --pcap_dir=/nonexistent-atp-dir
expect "--udp_gateway" atp-throughput --role=worker --rank=0 --transport=kernel_udp \
  --udp_bind=127.0.0.1:47000 --udp_gateway=127.0.0.1:47000
expect "--address" atp-throughput "${worker[@]}" --address=10.1.200.1
expect "--address" atp-throughput "${worker[@]}" --address=0.0.0.0
expect "--address" atp-throughput "${worker[@]}" --address=10.1.0.2
expect "--dpdk_memory_mb" atp-throughput "${worker[@]}" --dpdk_memory_mb=512
expect "--memif_role" atp-throughput "${worker[@]}" --memif_role=server
expect "--source_check" atp-throughput "${worker[@]}" --source_check=maybe
expect "--pause_after_iteration" atp-throughput "${worker[@]}" --iterations=3 --pause_after_iteration=3
expect "--pause_after_iteration" atp-throughput "${worker[@]}" --pause_after_iteration=-1
expect "--rank: -2 is negative" atp-throughput --role=worker --rank=-2
expect "--udp_bind" atp-ps --transport=kernel_udp --udp_bind=0.0.0.0:41000 --udp_gateway=127.0.0.1:42000
if [[ "$have_dpdk" == 1 ]]; then
  expect "--memif_id" atp-throughput --role=worker --rank=0 --dpdk_port=pci --pci=0000:3b:00.0 --memif_id=3
  expect "--iface" atp-throughput --role=worker --rank=0 --memif_socket=/tmp/x.sock --iface=eth0
  expect "--pci" atp-throughput --role=worker --rank=0 --memif_socket=/tmp/x.sock --pci=0000:3b:00.0
  # Longer than sockaddr_un holds: a client would wait forever to connect.
  long_socket="/tmp/$(printf 's%.0s' {1..120}).sock"
  expect "--memif_socket" atp-throughput --role=worker --rank=0 --memif_socket="$long_socket"
  expect "--memif_socket" atp-ps --memif_socket="$long_socket"
  touch "$dir/regular.sock"
  expect "exists and is not a socket" atp-ps --memif_role=server --memif_socket="$dir/regular.sock"
  expect "no directory" atp-ps --memif_role=server --memif_socket=/nonexistent-atp-dir/s.sock
fi

# --- atp-ps
expect "--stats_json" atp-ps "${ps[@]}" --stats_json=/nonexistent-atp-dir/ps.json
expect "--stats_json" atp-ps "${ps[@]}" --stats_json="$dir"
expect "--stats_json" atp-ps "${ps[@]}" --stats_json=/proc/version/ps.json
expect "--metrics_port" atp-ps "${ps[@]}" --metrics_port=70000
expect "--metrics_address" atp-ps "${ps[@]}" --metrics_address=0.0.0.0
expect "--metrics_address" atp-ps "${ps[@]}" --metrics_port=0 --metrics_address=localhost
expect "--rto_floor_us" atp-ps "${ps[@]}" --rto_floor_us=500
expect "--max_sleep_us" atp-ps "${ps[@]}" --max_sleep_us=0
expect "--slots" atp-ps "${ps[@]}" --slots=3000
expect "--link_gbps" atp-ps "${ps[@]}" --link_gbps=-1
expect "--address" atp-ps "${ps[@]}" --address=10.1.200.1 --ps_address=10.1.200.2
expect "--ps_address" atp-ps "${ps[@]}" --ps_address=239.1.0.1
expect "--source_check" atp-ps "${ps[@]}" --source_check=maybe
expect "--pcap_max_file_mb" atp-ps "${ps[@]}" --pcap_max_file_mb=8
expect "contribution_skipping" atp-ps "${ps[@]}" --contribution_skipping=maybe
expect "--group" atp-ps "${ps[@]}" --delivery=unicast --group=239.1.0.5

# --- atp-switchd (flags, then its YAML; --check_config opens no port)
good="$dir/good.yaml"
cat >"$good" <<'YAML'
name: tor0
address: 10.255.0.1
ports:
  - {name: a, type: kernel_udp, bind: "127.0.0.1:47300", peer: "127.0.0.1:47400"}
YAML
expect "--stats_json" atp-switchd --config="$good" --stats_json=/nonexistent-atp-dir/s.json
expect "--stats_interval_s" atp-switchd --config="$good" --stats_interval_s=-1
expect "--max_sleep_us" atp-switchd --config="$good" --max_sleep_us=0
expect "--min_sleep_us" atp-switchd --config="$good" --min_sleep_us=-5
expect "--max_sleep_us" atp-switchd --config="$good" --busy_poll --max_sleep_us=10
expect "--cpus: 'x' is not a CPU id" atp-switchd --config="$good" --cpus=x
expect "--pcap_max_files" atp-switchd --config="$good" --pcap_max_files=2
expect "--pcap_dir: '/nonexistent-atp-dir' does not exist" atp-switchd --config="$good" --pcap_dir=/nonexistent-atp-dir
expect "--metrics_address" atp-switchd --config="$good" --metrics_address=0.0.0.0
expect "--metrics_port" atp-switchd --config="$good" --metrics_port=-2
# yaml NAME MESSAGE BODY: a configuration that --check_config refuses.
yaml() {
  printf '%s' "$3" >"$dir/$1.yaml"
  expect "$2" atp-switchd --config="$dir/$1.yaml" --check_config
}
head='name: tor0
address: 10.255.0.1
'
yaml same_bind "overlaps port 'a'" "${head}ports:
  - {name: a, type: kernel_udp, bind: \"127.0.0.1:47000\", peer: \"127.0.0.1:47100\"}
  - {name: b, type: kernel_udp, bind: \"127.0.0.1:47000\", peer: \"127.0.0.1:47200\"}
"
yaml wildcard_bind "overlaps port 'a'" "${head}ports:
  - {name: a, type: kernel_udp, queues: 4, bind: \"127.0.0.1:47000\", peer: \"127.0.0.1:47100\"}
  - {name: b, type: kernel_udp, bind: \"0.0.0.0:47003\", peer: \"127.0.0.1:47200\"}
"
yaml udp_loop "a loop" "${head}ports:
  - {name: a, type: kernel_udp, bind: \"127.0.0.1:47000\", peer: \"127.0.0.1:47000\"}
"
yaml memif_twice "is already port 'a'" "${head}ports:
  - {name: a, type: memif, socket: /tmp/atp-x.sock}
  - {name: b, type: memif, socket: /tmp/atp-x.sock}
"
yaml memif_both_roles "as both server and client" "${head}ports:
  - {name: a, type: memif, socket: /tmp/atp-x.sock, id: 0}
  - {name: b, type: memif, socket: /tmp/atp-x.sock, id: 1, role: client}
"
yaml iface_twice "is already port 'a'" "${head}ports:
  - {name: a, type: af_packet, iface: eth9}
  - {name: b, type: af_xdp, iface: eth9}
"
yaml pci_twice "is already port 'a'" "${head}ports:
  - {name: a, type: pci, pci: \"0000:3b:00.0\"}
  - {name: b, type: pci, pci: \"0000:3b:00.0\"}
"
yaml multicast_address "address: 239.1.1.1 is not a unicast" "name: tor0
address: 239.1.1.1
ports: [{name: a, type: memif, socket: /tmp/atp-x.sock}]
"
yaml multicast_mac "is a multicast MAC" "${head}mac: \"01:00:5e:00:00:01\"
ports: [{name: a, type: memif, socket: /tmp/atp-x.sock}]
"
yaml log_level "dpdk.log_level" "${head}dpdk: {log_level: loud}
ports: [{name: a, type: memif, socket: /tmp/atp-x.sock}]
"
admission="${head}ports:
  - {name: w0, type: memif, socket: /tmp/atp-w0.sock}
  - {name: up, type: memif, socket: /tmp/atp-up.sock}
routes: [{prefix: 0.0.0.0/0, port: up}]
multicast: [{group: 239.1.0.1, ports: [w0]}]
jobs:
"
yaml admission_ps_not_host "jobs[0].ps[0]: 0.0.0.0 is not a host address" "${admission}  - {id: 1, level: 1, group: 239.1.0.1, ps: [0.0.0.0]}
"
yaml admission_both "jobs[0].parameters_from: give either" "${admission}  - {id: 1, level: 1, group: 239.1.0.1, ps: [10.1.200.1], parameters_from: [up]}
"
yaml admission_port "jobs[0].gradients_from[0]: no port named 'w9'" "${admission}  - {id: 1, level: 1, group: 239.1.0.1, gradients_from: [w9]}
"
yaml admission_check "jobs[0].ingress_check: expected true or false" "${admission}  - {id: 1, level: 1, group: 239.1.0.1, ingress_check: maybe}
"
yaml admission_ps_empty "jobs[0].ps: needs at least one address" "${admission}  - {id: 1, level: 1, group: 239.1.0.1, ps: []}
"
yaml admits "ports[0].admits[0]: expected one of parameters, gradients" "${head}ports:
  - {name: a, type: memif, socket: /tmp/atp-x.sock, admits: [acks]}
"
yaml rate "ports[0].rate_mbps: 0 is not in 1..1000000" "${head}ports:
  - {name: a, type: memif, socket: /tmp/atp-x.sock, rate_mbps: 0}
"
yaml queue_frames "ports[0].queue_frames: only with rate_mbps" "${head}ports:
  - {name: a, type: memif, socket: /tmp/atp-x.sock, queue_frames: 64}
"
yaml two_documents "two_documents.yaml:4: the configuration holds more than one YAML document" "${head}ports: [{name: a, type: memif, socket: /tmp/atp-x.sock}]
---
ports: [{name: b, type: memif, socket: /tmp/atp-y.sock}]
"

# --- atp-ping
expect "--count" atp-ping --count=0
expect "--warmup" atp-ping --warmup=2147483647
expect "--values" atp-ping --values=2000000000
expect "--values" atp-ping --count=10000000 --values=10000000
expect "--rto_floor_us" atp-ping --rto_floor_us=-1
expect "--switches" atp-ping --transport=kernel_udp --switches=single
expect "--ping_timeout_s" atp-ping --ping_timeout_s=0
expect "--ping_timeout_s" atp-ping --ping_timeout_s=3601
# A ping that never completes (the fabric drops nearly everything): the run
# fails naming the worker and the ping, with no statistics made up.
expect_failure "worker 0 stopped at ping 0 (warm-up)" atp-ping --loss=0.99 --count=3 --ping_timeout_s=0.2

# --- tools/plot/atp_sim_plot.py (what atp-sim --plot runs)
echo '{"samples": []}' >"$dir/empty.json"
echo 'not json' >"$dir/garbage.json"
echo '{}' >"$dir/other.json"
expect "garbage.json" atp_sim_plot.py "$dir/garbage.json" "$dir/p.png"
expect "not what atp-sim --plot writes" atp_sim_plot.py "$dir/other.json" "$dir/p.png"
expect "no samples to plot" atp_sim_plot.py "$dir/empty.json" "$dir/p.png"
expect "missing.json" atp_sim_plot.py "$dir/missing.json" "$dir/p.png"
expect "no directory" atp_sim_plot.py "$dir/empty.json" /nonexistent-atp-dir/p.png
expect "usage" atp_sim_plot.py "$dir/empty.json" "$dir/p.jpg"

# --- atp-sim
expect "--workers" atp-sim --scenario=loss-sweep --workers=8
expect "--scale" atp-sim --scale=small
expect "--pcap_links" atp-sim --pcap_links=tor_to_ps
expect "--pcap_links" atp-sim --pcap="$dir/a.pcap" --pcap_links=
expect "--pcap_links" atp-sim --pcap="$dir/a.pcap" --pcap_links=tor_to_core --racks=1
expect "--plot_interval_us" atp-sim --plot_interval_us=5
expect "--plot_interval_us" atp-sim --plot="$dir/p.svg" --plot_interval_us=inf
expect "--plot_interval_us" atp-sim --plot="$dir/p.svg" --plot_interval_us=1e-9
expect "--plot" atp-sim --plot=/nonexistent-atp-dir/x.png
expect "--reorder_delay_us" atp-sim --reorder_delay_us=5
expect "--corrupt" atp-sim --corrupt=1
expect "--ps_link_gbps" atp-sim --ps_link_gbps=-1
expect "--ps_link_gbps" atp-sim --ps_link_gbps=nan
expect "--ps_packet_ns" atp-sim --ps_packet_ns=-5
expect "--ps_packet_ns" atp-sim --ps_packet_ns=2e9
expect "--ps_packet_ns" atp-sim --scenario=skip-topologies --ps_packet_ns=100

# --- embedded-ps
expect "--tensor_floats" embedded-ps --tensor_floats=40000000000
expect "--no_such_flag" embedded-ps --no_such_flag=1
expect "--iterations" embedded-ps --iterations=0
expect "--framework_threads" embedded-ps --framework_threads=3 --io_threads=2

echo "$((cases - failures)) of $cases cases as expected (bad inputs refused with exit 2 naming the flag)"
[[ $failures -eq 0 ]]
