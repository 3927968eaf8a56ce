#!/usr/bin/env bash
# tests/visibility/atp_sim_visibility.sh: atp-sim --pcap and --plot on a small
# run: the capture holds ATP frames stamped with simulated time (tshark with
# tools/wireshark/atp.lua, when installed) and the plot is a PNG and an SVG
# drawn from the samples; a named scenario (cc-on-off, small) draws its
# figure. Exit 77 (skip) without matplotlib.
#   atp_sim_visibility.sh ATP_SIM LUA
set -euo pipefail
sim="$1" lua="$2"
python=/usr/bin/python3
if ! "$python" -c 'import matplotlib' 2>/dev/null; then
  echo "SKIP: $python has no matplotlib (Debian package python3-matplotlib)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$sim" --workers=2 --racks=1 --tensor_mb=0.25 --iterations=1 --pcap="$dir/sim.pcap" \
  --pcap_links=worker_to_tor --plot="$dir/sim.png" >"$dir/out.txt"
grep -q "EXACT" "$dir/out.txt" || { cat "$dir/out.txt"; echo "FAIL: the run was not exact"; exit 1; }
[[ $(head -c 8 "$dir/sim.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || { echo "FAIL: sim.png is not a PNG"; exit 1; }
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["samples"] and len(d["samples"][0]["goodput_gbps"]) == 1' "$dir/sim.png.json" ||
  { echo "FAIL: the samples JSON lacks samples"; exit 1; }
"$sim" --workers=2 --racks=1 --tensor_mb=0.25 --iterations=1 --plot="$dir/sim.svg" >/dev/null
grep -q "<svg" "$dir/sim.svg" || { echo "FAIL: sim.svg is not SVG"; exit 1; }
# A named scenario's figure.
"$sim" --scenario=cc-on-off --scale=small --plot="$dir/cc.svg" >/dev/null
grep -q "<svg" "$dir/cc.svg" || { echo "FAIL: the scenario's cc.svg is not SVG"; exit 1; }
# 2 workers x 1 iteration x ceil(65536 / 62) fragments, each sent at least once.
want=$((2 * 1057))
if command -v tshark >/dev/null; then
  n=$(tshark -X lua_script:"$lua" -r "$dir/sim.pcap" -Y 'atpagg.job == 1 && atpagg.ack == 0' 2>/dev/null | wc -l)
  [[ $n -ge $want ]] || { echo "FAIL: $n gradient frames in the capture, want >= $want"; exit 1; }
  # Simulated time: the whole run fits in milliseconds from time 0.
  last=$(tshark -r "$dir/sim.pcap" -T fields -e frame.time_epoch 2>/dev/null | tail -n 1)
  python3 -c 'import sys; t=float(sys.argv[1]); assert 0 < t < 1, t' "$last" ||
    { echo "FAIL: time stamps are not simulated time ($last)"; exit 1; }
  echo "PASS: $n gradient frames captured, last at $last s of simulated time; plots drawn"
else
  [[ $(stat -c %s "$dir/sim.pcap") -gt $((want * 306)) ]] || { echo "FAIL: sim.pcap too small"; exit 1; }
  echo "PASS: capture written (tshark missing: not dissected); plots drawn"
fi
