#!/usr/bin/env bash
# The GPU issue's checks on the GPU machine, in one call of the device tool:
# with clocks locked, the same kernel timed 10 times through the daemon
# (gate and telemetry on), the stored telemetry of one run, profile mode
# under ncu in the sandbox with the report downloaded, the clocks after
# ncu, drain and undrain; then the same 10 runs at the driver's default
# clocks. Needs bin/kernelbox (see docs/gpu-runs.md).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
. "$(dirname "$0")/gpu-lib.sh"
{
  step "doctor"; $kb doctor 2>&1 | grep -E "ncu|GPU|harness" | cut -c1-220
  printf 'measurement:\n  clocks: {H200: "%s"}\n' "$lock" > /tmp/kb-locked.yaml
  printf 'measurement:\n  gate: true\n' > /tmp/kb-default.yaml

  start /tmp/kb-locked.yaml
  step "locked at $lock MHz: kernelbox gpus"; $kb gpus | cut -c1-220
  grep -E "clocks locked|clock lock|Nsight|ncu" "$data/log" | cut -c1-240
  uuid=$($kb gpus --json | python3 -c 'import json,sys; print([s["id"] for s in json.load(sys.stdin)["slots"] if s.get("gpu")][0])')
  step "nvidia-smi with the daemon holding the lock"; smi
  spread "locked at $lock MHz"
  step "telemetry and system info of the last run"
  id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$data/b10.json")
  $kb submissions show "$id" --json | python3 -c '
import json, sys
v = json.load(sys.stdin)
r = v["runs"][0]
print("system_info:", json.dumps(r.get("system_info")))
t = r.get("telemetry") or {}
print("telemetry:", {k: t.get(k) for k in ("samples", "sm_clock_min_mhz", "sm_clock_max_mhz", "sm_clock_mean_mhz", "temp_max_c", "power_max_mw", "clock_event_reasons", "throttled")})
print("gate:", t.get("gate"))'

  step "profile mode: the Triton template under ncu in the sandbox"
  t0=$(date +%s.%N)
  pid_json=$($kb submit $lib/templates/triton.py -l vectoradd -g H200 -m profile --no-wait --json)
  pidsub=$(echo "$pid_json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  $kb submissions show "$pidsub" --wait -v 2>&1 | cut -c1-240 | head -120
  echo "profile turnaround: $(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),1))" $t0) s"
  $kb submissions show "$pidsub" --profile "$out/vectoradd-triton.ncu-rep" >/dev/null
  ls -l "$out/vectoradd-triton.ncu-rep" 2>&1
  ncu=$(ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
  echo "host ncu: $ncu"; head -c 600 /usr/local/cuda/bin/ncu 2>/dev/null | head -20
  if [ -n "$ncu" ] && [ -s "$out/vectoradd-triton.ncu-rep" ]; then
    "$ncu" --import "$out/vectoradd-triton.ncu-rep" --csv --page details > "$out/details.csv" 2>&1
    echo "details.csv: $(wc -l < "$out/details.csv") lines"
    "$ncu" --import "$out/vectoradd-triton.ncu-rep" --page details 2>&1 | head -60
  fi
  step "nvidia-smi after ncu (the lock must still hold)"; smi
  grep -E "level=(WARN|ERROR)" "$data/log" | cut -c1-300 | tail -5

  step "drain and undrain"
  $kb admin gpu drain "$uuid" --reason "operator check"
  $kb gpus | cut -c1-220
  wid=$($kb submit $lib/templates/triton.py -l vectoradd -g H200 -m test --no-wait --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  sleep 3; $kb submissions show "$wid" | head -1
  $kb admin gpu undrain "$uuid"
  $kb submissions show "$wid" --wait | tail -2
  stop
  step "nvidia-smi after the daemon stopped (lock reset)"; smi

  start /tmp/kb-default.yaml
  step "default clocks: kernelbox gpus"; $kb gpus | cut -c1-220
  spread "default clocks"
  stop
} 2>&1 | tee "$out/measure.txt"
