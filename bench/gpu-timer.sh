#!/usr/bin/env bash
# The harness's two-window timer on the GPU machine: the Triton template and
# the chunked solution timed 10 times each through the daemon with clocks
# locked (the spread), and the side-stream cheat (its timer must say
# "device"). Needs bin/kernelbox.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
. "$(dirname "$0")/gpu-lib.sh"
{
  printf 'measurement:\n  clocks: {H200: "%s"}\n' "$lock" > /tmp/kb-locked.yaml
  start /tmp/kb-locked.yaml
  spread "two-window timer, locked" $lib/templates/triton.py
  python3 -c 'import json,sys; print([(b["spec"][:22], b.get("timer")) for b in json.load(open(sys.argv[1]))["benchmarks"]])' "$data/b1.json"
  spread "two-window timer, locked" $lib/solutions/correct/chunked_add.py
  python3 -c 'import json,sys; print([(b["spec"][:22], b.get("timer")) for b in json.load(open(sys.argv[1]))["benchmarks"]])' "$data/b1.json"
  step "the side-stream cheat"
  $kb submit problems/testdata/cheats/vectoradd_side_stream.py -l vectoradd -g H200 -m benchmark --json > "$data/cheat.json"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("passed"), d.get("reason")); [print(b["spec"][:22], round(b["mean_ns"]/1e3,2), "us", b.get("timer")) for b in d["benchmarks"]]' "$data/cheat.json"
  stop
} 2>&1 | tee "$out/timer.txt"
