#!/usr/bin/env bash
# Which part of the daemon's path adds the spread (GPU machine): the two
# timers of bench/timer-spread.py inside the sandbox, with the default CPU
# quota (4 cores) and without one; then the Triton template through the
# daemon with telemetry sampling off during runs (sample_every 1h). Also
# the real NVML's health reads and one more profile run.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
. "$(dirname "$0")/gpu-lib.sh"
devs="--device /dev/nvidia0 --device /dev/nvidiactl --device /dev/nvidia-uvm"
py=/opt/torch/.venv/bin/python3
{
  step "the real NVML: discovery, telemetry, health and Xid events"
  (cd gpu && ../bin/gpu.test -test.run 'RealHost' -test.v 2>&1 | grep -E "_test.go|PASS|FAIL|SKIP" | cut -c1-300)
  step "timers in the sandbox, CPU quota 4 cores (the default)"
  $kb sandbox run $devs --bind /opt --memory 16G --timeout 300s --workdir bench -- $py timer-spread.py 2>&1 | tail -8
  step "timers in the sandbox, no CPU quota"
  $kb sandbox run $devs --bind /opt --memory 16G --cpus 0 --timeout 300s --workdir bench -- $py timer-spread.py 2>&1 | tail -8
  printf 'measurement:\n  clocks: {H200: "%s"}\n  sample_every: 1h\n' "$lock" > /tmp/kb-nosample.yaml
  start /tmp/kb-nosample.yaml
  grep -iE "xid|Nsight" "$data/log" | cut -c1-240
  spread "locked, no sampling" $lib/templates/triton.py
  step "telemetry of the last timed run (violation counters)"
  lid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$data/b10.json")
  $kb submissions show "$lid" --json | python3 -c '
import json, sys
t = json.load(sys.stdin)["runs"][0].get("telemetry") or {}
print({k: t.get(k) for k in ("samples", "sm_clock_min_mhz", "sm_clock_max_mhz", "thermal_violation_ns", "power_violation_ns", "throttled")})'
  step "profile mode once more (the summary's format)"
  id=$($kb submit $lib/templates/triton.py -l vectoradd -g H200 -m profile --no-wait --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  $kb submissions show "$id" --wait | cut -c1-240 | tail -14
  $kb gpus | cut -c1-220
  stop
} 2>&1 | tee "$out/spread2.txt"
