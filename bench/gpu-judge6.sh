#!/usr/bin/env bash
# Issue 17 on the GPU machine, in one call, after windows of calls
# (judge.py): (1) leaderboard mode through the daemon, three submissions;
# (2) the work-ahead cheat (problems/testdata/cheats/vectoradd_work_ahead.py)
# in benchmark and leaderboard mode: its windows must be refused and its
# calls alone count; (3) three more host evals of the Triton template,
# for the spread; (4) every single-GPU bundled problem's correct solution
# in benchmark mode: each passes, and says how many calls a window held.
# Writes $OUT/judge6.txt. Needs bin/kernelbox built with -tags seccomp.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
source bench/gpu-lib.sh
tmpl=$lib/templates
gtype=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oE '[A-Z][0-9]{2,3}' | head -1)
secs() { python3 -c "print(round($(date +%s.%N)-$1,1))"; }
cat > /tmp/summary.py <<'PY'
# An eval's or a submission's JSON on stdin: the verdict, each benchmark
# and its window extras.
import json, sys
d = json.load(sys.stdin)
print("  passed", d.get("passed"), (d.get("reason") or "")[:240].replace("\n", " "))
def walk(x):
    if isinstance(x, dict):
        ex = x.get("extra") or {}
        for b in x.get("benchmarks") or []:
            i = b.get("index")
            k = {n: ex.get(f"benchmark.{i}.{n}") for n in ("batch", "alone_median", "batch_refused")}
            spec = b.get("spec", "")[:34]
            print(f"    {spec:34} mean {b.get('mean_ns', 0) / 1e3:9.3f} us runs {b.get('runs')} "
                  f"batch {k['batch']} alone {k['alone_median']} {k['batch_refused'] or ''}")
        for v in x.values():
            walk(v)
    elif isinstance(x, list):
        for v in x:
            walk(v)
walk(d)
PY
summary() { python3 /tmp/summary.py; }
{
step system
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
printf 'measurement:\n  clocks: {%s: "%s"}\n' "$gtype" "$lock" > /tmp/kb-locked.yaml
start /tmp/kb-locked.yaml
sleep 15
step "daemon: leaderboard mode x3, 8 s apart"
for i in 1 2 3; do
  begin=$(date +%s.%N)
  $kb submit $tmpl/triton.py -l vectoradd -g $gtype -m leaderboard --json > /tmp/l$i.json 2>&1; code=$?
  echo "submit $i: exit $code, $(secs $begin) s wall"
  id=$(python3 -c 'import json; print(json.load(open("/tmp/l'$i'.json"))["id"])' 2>/dev/null)
  $kb submissions show "$id" --json 2>/dev/null | summary
  sleep 8
done
stop
step "the work-ahead cheat on the host"
for m in benchmark leaderboard; do
  begin=$(date +%s.%N)
  timeout 150 $kb eval -p vectoradd -m $m --json problems/testdata/cheats/vectoradd_work_ahead.py 2>/dev/null | summary
  echo "  $m: $(secs $begin) s"
done
step "Triton template, benchmark mode on the host, x3"
for i in 1 2 3; do
  timeout 150 $kb eval -p vectoradd -m benchmark --json $tmpl/triton.py 2>/dev/null | summary
done
step "every single-GPU problem's correct solution, benchmark mode"
for d in problems/library/*/; do
  n=$(basename $d); grep -q world_size $d/task.yml && continue
  for f in $d/solutions/correct/*.py; do
    begin=$(date +%s.%N)
    echo "$n $(basename $f):"
    timeout 90 $kb eval -p $n -m benchmark --json $f 2>/dev/null | summary
    echo "  $(secs $begin) s"
  done
done
} 2>&1 | tee "$out/judge6.txt"
