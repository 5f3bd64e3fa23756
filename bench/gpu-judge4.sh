#!/usr/bin/env bash
# Issue 17: where a test-mode run's seconds go once its gate opens, on
# the GPU machine in one short call. The daemon with standbys, three
# test-mode submissions of the Triton vectoradd template 5 s apart, each
# with the extras its judge logged (judge-start, judge-cuda, judge-hello,
# judge-link) and its phase's wall; then the same from `kernelbox eval`
# on the host (no sandbox); then a fresh process's CUDA context, alone
# and three at once. Writes $OUT/judge4.txt. Needs bin/kernelbox built
# with -tags seccomp (docs/gpu-runs.md).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
source bench/gpu-lib.sh
tmpl=$lib/templates
gtype=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oE '[A-Z][0-9]{2,3}' | head -1)
secs() { python3 -c "print(round($(date +%s.%N)-$1,1))"; }
extras() { # a JSON document on stdin: every judge-* extra and phase wall in it
  python3 -c '
import json, sys
def walk(x, path=""):
    if isinstance(x, dict):
        for k, v in x.items():
            if isinstance(k, str) and (k.startswith("judge-") or k == "phase-wall" or
                                       (k.startswith("test.") and k.endswith(".wall"))):
                try:
                    print(f"  {k} {int(v) / 1e9:.3f} s")
                except ValueError:
                    pass
            elif k == "wall_ns" and isinstance(v, (int, float)) and "phases" in path:
                name = x.get("name")
                print(f"  phase {name} wall {v / 1e9:.3f} s")
            elif k == "report" and isinstance(v, str):
                try:
                    walk(json.loads(v), path + "/report")
                except ValueError:
                    pass
            else:
                walk(v, path + "/" + str(k))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            walk(v, path + "/" + str(i))
walk(json.load(sys.stdin))'
}
{
step system
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
printf 'measurement:\n  clocks: {%s: "%s"}\n' "$gtype" "$lock" > /tmp/kb-locked.yaml
start /tmp/kb-locked.yaml
sleep 20
step "daemon with a standby: test mode x3, 5 s apart"
for i in 1 2 3; do
  begin=$(date +%s.%N)
  $kb submit $tmpl/triton.py -l vectoradd -g $gtype -m test --json > /tmp/s.json 2>&1; code=$?
  echo "submit $i: exit $code, $(secs $begin) s wall"
  id=$(python3 -c 'import json; print(json.load(open("/tmp/s.json"))["id"])' 2>/dev/null)
  $kb submissions show "$id" --json 2>/dev/null | extras
  sleep 5
done
grep -E 'run finished|handed' "$data/log" | sed 's/.*msg=//' | cut -c1-160
stop
step "kernelbox eval -m test on the host (no sandbox), twice"
for i in 1 2; do
  begin=$(date +%s.%N)
  timeout 120 $kb eval -p vectoradd -m test --json $tmpl/triton.py > /tmp/e.json 2>/dev/null
  echo "eval $i: $(secs $begin) s wall"
  extras < /tmp/e.json
done
step "the same eval once more, each harness process's stack sampled every 0.2 s"
rm -rf /tmp/stacks; mkdir -p /tmp/stacks
begin=$(date +%s.%N)
KERNELBOX_HARNESS_STACKS=/tmp/stacks timeout 120 $kb eval -p vectoradd -m test --json $tmpl/triton.py > /tmp/e.json 2>/dev/null
echo "eval sampled: $(secs $begin) s wall"
extras < /tmp/e.json
python3 - /tmp/stacks <<'PY'
# Each sample's innermost frames per thread, counted: where each process
# spent its time, 0.2 s a sample; the main thread is the last block.
import collections, glob, os, re, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.txt")):
    counts, samples = collections.Counter(), 0
    for chunk in open(f, errors="replace").read().split("Timeout (")[1:]:
        samples += 1
        blocks = re.split(r"\n(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):\n", chunk)[1:]
        for n, block in enumerate(blocks):
            frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', block)
            tag = "main" if n == len(blocks) - 1 else "thread"
            counts[tag + " " + " < ".join(f"{os.path.basename(p)}:{l} {fn}" for p, l, fn in frames[:4])] += 1
    print(f"-- {os.path.basename(f)}: {samples} samples")
    for k, n in counts.most_common(14):
        print(f"  {n * 0.2:5.1f} s  {k}")
PY
tar -C /tmp -czf "$out/stacks.tgz" stacks
step "a fresh process: import torch, then its CUDA context; alone, then three at once"
cat > /tmp/ctx.py <<'PY'
import time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
torch.cuda.init(); torch.empty(1, device="cuda"); torch.cuda.synchronize()
t2 = time.perf_counter()
print(f"import torch {t1 - t0:.2f} s, CUDA context {t2 - t1:.2f} s")
PY
python3 /tmp/ctx.py
for i in 1 2 3; do python3 /tmp/ctx.py & done; wait
taskset -c 0-3 python3 /tmp/ctx.py
} 2>&1 | tee "$out/judge4.txt"
