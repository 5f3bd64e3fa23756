#!/usr/bin/env bash
# The GPU check of the appliance redesign (issue 16), in one call of the
# device tool. Needs bin/kernelbox and bin/appliance.test built here with
# -tags seccomp (see docs/gpu-runs.md). Writes logs to $OUT (or ./gpu-out).
# MODES (default "test benchmark leaderboard") are the daemon's submit
# modes to time; MULTIGPU=1 also runs TestDaemon_MultiGPU on its own.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
kb=$PWD/bin/kernelbox
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
step() { echo; echo "== $*"; }
{
step system
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
python3 -c 'import torch,triton;print("torch", torch.__version__, "triton", triton.__version__)'
$kb --version

step doctor
$kb doctor

step "appliance.test: the daemon's end-to-end tests on this host"
(cd appliance && timeout 300 ../bin/appliance.test -test.timeout 5m -test.v \
  -test.run 'TestDaemon_SubmitThroughCLI|TestDaemon_Refusals|TestDaemon_FakeGPU|TestDaemon_Merges|TestAPI_WritesOnlyTheContract|TestSandbox_HostileSubmissions|TestDaemon_KillAndRestart|TestRunner|TestRedact|TestDaemon_StopLeavesNoGoroutines' 2>&1 \
  | grep -E '^(--- |ok|FAIL|PASS)|_test.go:[0-9]+: [^t]' | grep -v 'daemon_test.go:53:' | head -60)

if [ "${MULTIGPU:-0}" = 1 ]; then
  step "appliance.test: TestDaemon_MultiGPU alone"
  (cd appliance && time timeout 240 ../bin/appliance.test -test.timeout 4m -test.v -test.run 'TestDaemon_MultiGPU$' 2>&1 \
    | grep -E '^(--- |ok|FAIL|PASS|panic)|_test.go:[0-9]+: [^t]' | grep -v 'daemon_test.go:53:' | head -30)
fi

step "the daemon on the H200: one database file, typed gpus, a Triton submission in each mode"
data=$(mktemp -d); export KERNELBOX_CLIENT_CONFIG=$data/client.json
$kb serve --data "$data" --listen 127.0.0.1:0 --cpu-slots 0 >"$data/out" 2>"$data/log" &
pid=$!
for i in $(seq 300); do grep -q "serving on" "$data/out" 2>/dev/null && break; sleep 0.2; done
cat "$data/out"
export KERNELBOX_SERVER=http://$(sed -n 's/.* serving on \([^ ]*\).*/\1/p' "$data/out")
export KERNELBOX_TOKEN=$(cat "$data/admin-token")
ls "$data"
$kb gpus
$kb gpus --json > "$out/gpus.json"
python3 - "$out/gpus.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
g = d["slots"][0].get("gpu_info") or {}
print("slot", d["slots"][0]["id"], "type", d["slots"][0]["gpu"], "gpu_info keys:", sorted(g))
print("internal fields on the wire:", [k for k in ("nodes", "proc_dir", "visible_env", "profiling_nodes") if k in g] or "none")
PY
tmpl=problems/library/vectoradd/templates/triton.py
for mode in ${MODES:-test benchmark leaderboard}; do
  begin=$(date +%s.%N)
  $kb submit $tmpl -l vectoradd -g H200 -m $mode > "$data/$mode.txt" 2>&1; code=$?
  end=$(date +%s.%N)
  echo "submit -m $mode: exit $code, $(python3 -c "print(round($end-$begin,1))") s wall; $(tail -1 "$data/$mode.txt")"
done
$kb leaderboard vectoradd --gpu H200
$kb submissions list
ls "$data"
kill -TERM $pid; wait $pid
grep -E 'level=(WARN|ERROR)' "$data/log" | head -20

step "eval on the host (the CLI's local harness), test mode"
begin=$(date +%s.%N)
timeout 200 $kb eval -p vectoradd -m test $tmpl | tail -3
echo "eval: $(python3 -c "import time; print(round(time.time()-$begin,1))") s"
} 2>&1 | tee "$out/redesign.txt"
