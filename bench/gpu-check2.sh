#!/usr/bin/env bash
# The harness's second check on CUDA (outputs handed to the harness's own
# process), in one short call: the Triton template and two cheats under
# `kernelbox eval -m leaderboard`, the side-stream cheat and the template
# through the daemon (the cheat must be flagged OFF_STREAM_WORK), and one
# round of the defences' cost. Needs bin/kernelbox and bin/baseline.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
. "$(dirname "$0")/gpu-lib.sh"
evalshow() { # $1 mode, $2 file
  timeout 150 $kb eval -p vectoradd -m "$1" --json "$2" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print("passed", d["passed"], "|", (d.get("reason") or "")[:300])
for p in d.get("phases") or []:
    r = p.get("result") or {}
    print("  phase", p["name"], "passed", p["passed"], (p.get("reason") or "")[:300])
    x = r.get("extra") or {}
    for b in r.get("benchmarks") or []:
        i = b["index"]
        print("    ", b["spec"][:26], round(b.get("mean_ns", 0) / 1e3, 2), "us, runs", b.get("runs"),
              "tails", x.get(f"benchmark.{i}.tails"), "retries", x.get(f"benchmark.{i}.retries"), "round trip ns",
              x.get(f"benchmark.{i}.round_trip"), "limit", x.get(f"benchmark.{i}.tail_limit"), (b.get("error") or "")[:200])'
}
{
  step "kernelbox eval -m leaderboard"
  for f in $lib/templates/triton.py problems/testdata/cheats/vectoradd_forged_reply.py problems/testdata/cheats/vectoradd_patches_checker.py; do
    echo "== $f"; evalshow leaderboard "$f"
  done
  printf 'measurement:\n  clocks: {H200: "%s"}\n' "$lock" > /tmp/kb-locked.yaml
  start /tmp/kb-locked.yaml
  step "through the daemon, benchmark mode: review and findings"
  for f in problems/testdata/cheats/vectoradd_side_stream.py $lib/templates/triton.py; do
    id=$($kb submit "$f" -l vectoradd -g H200 -m benchmark --no-wait --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
    $kb submissions show "$id" --wait >/dev/null 2>&1
    echo "== $f"
    $kb submissions show "$id" --json | python3 -c '
import json, sys
v = json.load(sys.stdin)
print("passed", v.get("passed"), "review", repr(v.get("review")), [(f["rule"], f["message"][:160]) for f in v.get("findings") or []])'
  done
  stop
  step "the defences' cost: leaderboard mode, the Triton template, before and now"
  BASELINE=$PWD/bin/baseline/problems/library KB=$kb timeout 150 bash bench/defence-cost.sh vectoradd 1 $lib/templates/triton.py
} 2>&1 | tee "$out/check2.txt"
