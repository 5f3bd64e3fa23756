#!/usr/bin/env bash
# Fair measurement on the GPU machine: the same kernel timed 10 times
# through the daemon with clocks locked, the gate and telemetry; then the
# stored telemetry of one run. Needs bin/kernelbox (see docs/gpu-runs.md).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
kb=$PWD/bin/kernelbox
lock=${LOCK:-1500}
step() { echo; echo "== $*"; }
runs() { # $1: label, then serve flags via config file $2
  data=$(mktemp -d); export KERNELBOX_CLIENT_CONFIG=$data/client.json
  $kb serve --config "$2" --data "$data" --listen 127.0.0.1:0 --cpu-slots 0 >"$data/out" 2>"$data/log" &
  pid=$!
  for i in $(seq 300); do grep -q "serving on" "$data/out" 2>/dev/null && break; sleep 0.2; done
  export KERNELBOX_SERVER=http://$(sed -n 's/.* serving on \([^ ]*\).*/\1/p' "$data/out")
  export KERNELBOX_TOKEN=$(cat "$data/admin-token")
  step "$1: kernelbox gpus"; $kb gpus | cut -c1-160
  grep -E "clocks locked|clock lock refused" "$data/log" | cut -c1-200
  for i in $(seq 10); do
    $kb submit problems/library/vectoradd/solutions/correct/chunked_add.py -l vectoradd -g H200 -m benchmark --json > "$data/b$i.json" || echo "run $i failed: $(head -c 300 $data/b$i.json)"
  done
  step "$1: spread over 10 runs"
  python3 - "$data" <<'PY'
import json, statistics, sys, glob
d = sys.argv[1]
per = {}
for f in sorted(glob.glob(d + "/b*.json")):
    try:
        doc = json.load(open(f))
    except Exception:
        continue
    for b in doc["benchmarks"]:
        per.setdefault(b["spec"], []).append(b["mean_ns"])
for spec, means in per.items():
    m = statistics.mean(means); cv = statistics.stdev(means) / m * 100 if len(means) > 1 else 0
    print(f"{spec}: n={len(means)} mean {m/1e3:.3f} us, CV {cv:.2f} %, min {min(means)/1e3:.3f} max {max(means)/1e3:.3f}")
PY
  step "$1: telemetry and system info of the last run"
  id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$data/b10.json")
  $kb submissions show "$id" --json | python3 -c '
import json, sys
v = json.load(sys.stdin)
r = v["runs"][0]
print("system_info:", json.dumps(r.get("system_info")))
t = r.get("telemetry") or {}
print("telemetry:", {k: t.get(k) for k in ("samples", "sm_clock_min_mhz", "sm_clock_max_mhz", "sm_clock_mean_mhz", "temp_max_c", "power_max_mw", "clock_event_reasons", "throttled")})
print("gate:", t.get("gate"))'
  kill -TERM $pid; wait $pid
  step "$1: clocks after the daemon stopped"
  nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,clocks_event_reasons.active --format=csv 2>&1 | tail -2
}
{
  printf 'measurement:\n  clocks: {H200: "%s"}\n' "$lock" > /tmp/kb-locked.yaml
  printf 'measurement:\n  gate: true\n' > /tmp/kb-default.yaml
  runs "locked at $lock MHz" /tmp/kb-locked.yaml
  runs "default clocks" /tmp/kb-default.yaml
} 2>&1 | tee "$out/measure.txt"
