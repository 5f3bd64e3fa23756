#!/usr/bin/env bash
# Where the spread comes from (GPU machine): with clocks locked, the
# single-kernel Triton template and the chunked (four to eight launches)
# solution, each timed 10 times through the daemon; then the two timers
# side by side in fresh processes (bench/timer-spread.py).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
. "$(dirname "$0")/gpu-lib.sh"
{
  start_locked
  $kb gpus | cut -c1-220
  spread "locked at $lock MHz" $lib/templates/triton.py
  spread "locked at $lock MHz" $lib/solutions/correct/chunked_add.py
  step "the two timers, 10 fresh processes, clocks locked at $lock MHz"
  /opt/torch/.venv/bin/python3 bench/timer-spread.py 2>&1 || python3 bench/timer-spread.py
  stop
} 2>&1 | tee "$out/spread.txt"
