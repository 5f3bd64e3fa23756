#!/usr/bin/env bash
# The harness's _Timer on the GPU machine (issues 5 and 6), one call: the
# Triton template and the chunked solution timed 10 times each through the
# daemon with clocks locked, the guards and cheats under `kernelbox eval`
# (leaderboard mode: every timed call's output checked), the three timers
# of bench/timer-spread.py in the sandbox, and `kernelbox eval -m
# profile` with the real ncu. Needs bin/kernelbox.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
. "$(dirname "$0")/gpu-lib.sh"
py=/opt/torch/.venv/bin/python3
{
  printf 'measurement:\n  clocks: {H200: "%s"}\n' "$lock" > /tmp/kb-locked.yaml
  start /tmp/kb-locked.yaml
  spread "locked at $lock MHz, _Timer" $lib/templates/triton.py
  spread "locked at $lock MHz, _Timer" $lib/solutions/correct/chunked_add.py
  step "the last run's physics floor and findings (an honest kernel: none)"
  lid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$data/b10.json")
  $kb submissions show "$lid" --json | python3 -c '
import json, sys
v = json.load(sys.stdin)
print("review", repr(v.get("review")), "findings", v.get("findings"))
rep = json.loads(v["runs"][0]["report"]) if isinstance(v["runs"][0].get("report"), str) else v["runs"][0].get("report") or {}
print("min_ns", [b.get("min_ns") for b in rep.get("benchmarks") or []], "means", [b.get("mean_ns") for b in rep.get("benchmarks") or []])' 2>&1 | cut -c1-400
  stop
  step "guards and cheats, kernelbox eval -m leaderboard"
  for f in $lib/templates/triton.py $lib/solutions/correct/chunked_add.py problems/testdata/cheats/vectoradd_clock_patch.py \
      problems/testdata/cheats/vectoradd_lazy_tensor.py problems/testdata/cheats/vectoradd_mutates_later.py \
      problems/testdata/cheats/vectoradd_side_stream.py problems/testdata/cheats/vectoradd_side_stream_nowait.py; do
    echo "== $f"; evalshow leaderboard "$f"
  done
  step "the side streams in benchmark mode (same input every call)"
  for f in problems/testdata/cheats/vectoradd_side_stream.py problems/testdata/cheats/vectoradd_side_stream_nowait.py; do
    echo "== $f"; evalshow benchmark "$f"
  done
  step "three timers in the sandbox (10 fresh processes), default clocks"
  w=$(mktemp -d); cp bench/timer-spread.py problems/library/harness/eval.py "$w/"
  timeout 200 $kb sandbox run --device /dev/nvidia0 --device /dev/nvidiactl --device /dev/nvidia-uvm --bind /opt --memory 16G \
    --timeout 180s --workdir "$w" -- $py timer-spread.py 2>&1 | tail -12
  step "kernelbox eval -m profile with the real ncu"
  timeout 120 $kb eval -p vectoradd -m profile --profile "$out/eval.ncu-rep" $lib/templates/triton.py 2>&1 | tail -25
  ls -l "$out/eval.ncu-rep" 2>&1
} 2>&1 | tee "$out/timer2.txt"
