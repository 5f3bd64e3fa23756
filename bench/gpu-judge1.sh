#!/usr/bin/env bash
# Issue 17, first step: the Triton vectoradd template through the daemon on
# the H200 in each mode, now that a run's phases share one harness process.
# Needs bin/kernelbox built here with -tags seccomp (docs/gpu-runs.md).
# Writes its log to $OUT (or ./gpu-out).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
kb=$PWD/bin/kernelbox
step() { echo; echo "== $*"; }
{
step system
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
python3 -c 'import torch,triton;print("torch", torch.__version__, "triton", triton.__version__)'
$kb --version

step "the daemon on the H200: the Triton template in each mode"
data=$(mktemp -d); export KERNELBOX_CLIENT_CONFIG=$data/client.json
$kb serve --data "$data" --listen 127.0.0.1:0 --cpu-slots 0 >"$data/out" 2>"$data/log" &
pid=$!
for i in $(seq 300); do grep -q "serving on" "$data/out" 2>/dev/null && break; sleep 0.2; done
export KERNELBOX_SERVER=http://$(sed -n 's/.* serving on \([^ ]*\).*/\1/p' "$data/out")
export KERNELBOX_TOKEN=$(cat "$data/admin-token")
tmpl=problems/library/vectoradd/templates/triton.py
for mode in test test benchmark leaderboard; do
  begin=$(date +%s.%N)
  $kb submit $tmpl -l vectoradd -g H200 -m $mode > "$data/$mode.txt" 2>&1; code=$?
  end=$(date +%s.%N)
  echo "submit -m $mode: exit $code, $(python3 -c "print(round($end-$begin,1))") s wall"
  grep -E 'phase|pass|fail|score|rank' "$data/$mode.txt" | head -12
done
$kb leaderboard vectoradd --gpu H200
kill -TERM $pid; wait $pid
grep -E 'level=(WARN|ERROR)' "$data/log" | head -20

step "eval on the host, leaderboard mode (one harness process)"
begin=$(date +%s.%N)
timeout 300 $kb eval -p vectoradd -m leaderboard $tmpl | tail -12
echo "eval: $(python3 -c "import time; print(round(time.time()-$begin,1))") s"
} 2>&1 | tee "$out/judge1.txt"
