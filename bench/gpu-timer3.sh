#!/usr/bin/env bash
# The harness's _Timer, second form (each case's round trip calibrated with
# a sleep as long as the call, a long tail timed again), on the GPU
# machine in one call: the Triton template and the chunked solution timed
# 10 times each through the daemon with clocks locked, the side-stream
# cheats and the checker patch under `kernelbox eval`, the three timers of
# bench/timer-spread.py in the sandbox, and the defences' cost
# (bench/defence-cost.sh against the harness before issue 6, from
# bin/baseline). Needs bin/kernelbox and bin/baseline.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
. "$(dirname "$0")/gpu-lib.sh"
py=/opt/torch/.venv/bin/python3
{
  start_locked
  spread "locked at $lock MHz, _Timer 2" $lib/templates/triton.py
  spread "locked at $lock MHz, _Timer 2" $lib/solutions/correct/chunked_add.py
  stop
  step "cheats, kernelbox eval -m leaderboard"
  for f in problems/testdata/cheats/vectoradd_side_stream.py problems/testdata/cheats/vectoradd_side_stream_nowait.py \
      problems/testdata/cheats/vectoradd_patches_checker.py; do
    echo "== $f"; evalshow leaderboard "$f"
  done
  step "three timers in the sandbox (10 fresh processes), default clocks"
  w=$(mktemp -d); cp bench/timer-spread.py problems/library/harness/eval.py "$w/"
  timeout 200 $kb sandbox run --device /dev/nvidia0 --device /dev/nvidiactl --device /dev/nvidia-uvm --bind /opt --memory 16G \
    --timeout 180s --workdir "$w" -- $py timer-spread.py 2>&1 | tail -16
  step "the defences' cost: leaderboard mode, the Triton template, before and now"
  BASELINE=$PWD/bin/baseline/problems/library KB=$kb timeout 200 bash bench/defence-cost.sh vectoradd 2 $lib/templates/triton.py
} 2>&1 | tee "$out/timer3.txt"
