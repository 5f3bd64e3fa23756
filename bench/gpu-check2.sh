#!/usr/bin/env bash
# The harness's second check on CUDA (outputs handed to the harness's own
# process), in one short call: the Triton template and two cheats under
# `kernelbox eval -m leaderboard`, the side-stream cheat and the template
# through the daemon (the cheat must be flagged OFF_STREAM_WORK), and one
# round of the defences' cost. Needs bin/kernelbox and bin/baseline.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
. "$(dirname "$0")/gpu-lib.sh"
{
  step "kernelbox eval -m leaderboard"
  for f in $lib/templates/triton.py problems/testdata/cheats/vectoradd_forged_reply.py problems/testdata/cheats/vectoradd_patches_checker.py; do
    echo "== $f"; evalshow leaderboard "$f"
  done
  start_locked
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
