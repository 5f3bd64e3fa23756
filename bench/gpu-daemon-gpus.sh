#!/usr/bin/env bash
# The daemon with the real GPU (issue 5's first part), in one call of the
# device tool. Needs bin/kernelbox, bin/gpu.test and bin/appliance.test built
# here with -tags seccomp and lazy binding (docs/gpu-runs.md).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
ldd ./bin/kernelbox | grep -q "libseccomp.so.2 => not found" && export LD_LIBRARY_PATH=$PWD/bin/lib
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
kb=$PWD/bin/kernelbox
step() { echo; echo "== $*"; }
{
  step "discovery through NVML (the real adapter)"
  (cd gpu && ../bin/gpu.test -test.run 'TestDiscover_RealHost' -test.v 2>&1 | grep -E 'gpu_test|PASS|FAIL')
  step "doctor"; $kb doctor 2>&1 | tail -8
  step "fake-GPU isolation test"
  (cd appliance && ../bin/appliance.test -test.run 'TestDaemon_FakeGPUs' 2>&1 | tail -2)

  data=$(mktemp -d); export KERNELBOX_CLIENT_CONFIG=$data/client.json
  $kb serve --data "$data" --listen 127.0.0.1:0 --cpu-slots 1 >"$data/out" 2>"$data/log" &
  pid=$!
  for i in $(seq 300); do grep -q "serving on" "$data/out" 2>/dev/null && break; sleep 0.2; done
  export KERNELBOX_SERVER=http://$(sed -n 's/.* serving on \([^ ]*\).*/\1/p' "$data/out")
  export KERNELBOX_TOKEN=$(cat "$data/admin-token")
  step "kernelbox gpus"; $kb gpus
  step "queue"; $kb queue
  lib=problems/library/vectoradd
  step "Triton template on the H200, test mode, through the daemon"
  $kb submit $lib/templates/triton.py -l vectoradd -g H200 -m test | tail -4
  step "the correct solution on the H200, leaderboard mode (with its secret twin)"
  $kb submit $lib/solutions/correct/chunked_add.py -l vectoradd -g H200 -m leaderboard | tail -6
  step "the same kernel timed 10 times through the daemon (benchmark mode)"
  for i in $(seq 10); do
    $kb submit $lib/solutions/correct/chunked_add.py -l vectoradd -g H200 -m benchmark --json > "$data/b$i.json" || echo "run $i failed"
  done
  /usr/bin/env python3 - "$data" <<'PY'
import json, statistics, sys, glob
d = sys.argv[1]
per = {}
for f in sorted(glob.glob(d + "/b*.json")):
    for b in json.load(open(f))["benchmarks"]:
        per.setdefault(b["spec"], []).append(b["mean_ns"])
for spec, means in per.items():
    m = statistics.mean(means); cv = statistics.stdev(means) / m * 100 if len(means) > 1 else 0
    print(f"{spec}: n={len(means)} mean {m/1e3:.3f} us, CV {cv:.2f} %, min {min(means)/1e3:.3f} max {max(means)/1e3:.3f}")
PY
  step "a run on the CPU slot cannot open the GPU it was not given"
  cat > "$data/probe.py" <<'PY'
import os, torch
try:
    os.close(os.open("/dev/nvidia0", os.O_RDWR)); opened = "OPENED"
except OSError as e:
    opened = "refused: " + e.strerror
print("PROBE nvidia nodes:", sorted(n for n in os.listdir("/dev") if n.startswith("nvidia")), "| open /dev/nvidia0:", opened,
      "| cuda available:", torch.cuda.is_available())
def custom_kernel(data):
    a, b = data
    return a + b
PY
  id=$($kb submit "$data/probe.py" -l vectoradd -g cpu -m test --no-wait --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  $kb submissions show "$id" --wait -v | grep -E "PROBE|PASSED|FAILED" | head -3
  id=$($kb submit "$data/probe.py" -l vectoradd -g H200 -m test --no-wait --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  echo "(the same probe on the H200 slot, for contrast)"; $kb submissions show "$id" --wait -v | grep -E "PROBE|PASSED|FAILED" | head -3
  step "kernelbox gpus after the runs"; $kb gpus
  kill -TERM $pid; wait $pid
  step "daemon log: GPU lines"; grep -E "GPU|no GPUs" "$data/log" | head -5
} 2>&1 | tee "$out/daemon-gpus.txt"
