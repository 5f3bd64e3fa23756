#!/usr/bin/env bash
# Issue 17 on the GPU machine, in one call:
# 1. test mode through the daemon with a standby, now that the judge
#    takes PyTorch 2's deterministic-algorithms imports before its gate
#    (they were 3.8 s of the first test);
# 2. the spread of each shape's mean across runs, every call timed alone
#    (KERNELBOX_BENCH_BATCH=1) against short calls timed several to a
#    window (the default): host evals in benchmark mode, interleaved;
# 3. leaderboard mode through the daemon, three submissions.
# Writes $OUT/judge5.txt and the evals' JSON. Needs bin/kernelbox built
# with -tags seccomp (docs/gpu-runs.md).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out/evals"
source bench/gpu-lib.sh
tmpl=$lib/templates
gtype=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oE '[A-Z][0-9]{2,3}' | head -1)
secs() { python3 -c "print(round($(date +%s.%N)-$1,1))"; }
walls() { # the judge's extras and phase walls in a submission's JSON
  python3 -c '
import json, sys
def walk(x):
    if isinstance(x, dict):
        for k, v in x.items():
            if isinstance(k, str) and (k in ("judge-prepare", "judge-start", "phase-wall") or (k.startswith("test.") and k.endswith(".wall"))):
                print(f"  {k} {int(v) / 1e9:.3f} s", end="")
            elif k == "report" and isinstance(v, str):
                try:
                    walk(json.loads(v))
                except ValueError:
                    pass
            else:
                walk(v)
    elif isinstance(x, list):
        for v in x:
            walk(v)
walk(json.load(sys.stdin)); print()'
}
{
step system
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
printf 'measurement:\n  clocks: {%s: "%s"}\n' "$gtype" "$lock" > /tmp/kb-locked.yaml
start /tmp/kb-locked.yaml
sleep 15
step "daemon with a standby: test mode x3, 5 s apart"
for i in 1 2 3; do
  begin=$(date +%s.%N)
  $kb submit $tmpl/triton.py -l vectoradd -g $gtype -m test --json > /tmp/s.json 2>&1; code=$?
  echo "submit $i: exit $code, $(secs $begin) s wall"
  id=$(python3 -c 'import json; print(json.load(open("/tmp/s.json"))["id"])' 2>/dev/null)
  $kb submissions show "$id" --json 2>/dev/null | walls
  sleep 5
done
step "daemon: leaderboard mode x3, 8 s apart"
for i in 1 2 3; do
  begin=$(date +%s.%N)
  $kb submit $tmpl/triton.py -l vectoradd -g $gtype -m leaderboard --json > /tmp/l$i.json 2>&1; code=$?
  echo "submit $i: exit $code, $(secs $begin) s wall"
  cp /tmp/l$i.json "$out/evals/leaderboard-$i.json"
  python3 - /tmp/l$i.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def walk(x, path=""):
    if isinstance(x, dict):
        if "mean_ns" in x and "spec" in x:
            print(f"  {path.split('/')[-3] if path.count('/') > 2 else ''} {x['spec'][:30]} mean {x['mean_ns'] / 1e3:.3f} us runs {x.get('runs')}")
        for k, v in x.items():
            walk(v, path + "/" + str(k))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            walk(v, path + "/" + str(i))
walk(d)
print("  passed", d.get("passed"), (d.get("reason") or "")[:200])
PY
  sleep 8
done
grep -E 'run finished' "$data/log" | sed 's/.*msg=//' | cut -c1-200
stop
step "host evals, benchmark mode: alone (KERNELBOX_BENCH_BATCH=1) and windows, interleaved"
for sol in $tmpl/triton.py:5 $lib/solutions/correct/chunked_add.py:3; do
  file=${sol%:*}; n=${sol#*:}; name=$(basename $file .py)
  for i in $(seq $n); do
    for v in alone window; do
      begin=$(date +%s.%N)
      if [ $v = alone ]; then export KERNELBOX_BENCH_BATCH=1; else unset KERNELBOX_BENCH_BATCH; fi
      timeout 150 $kb eval -p vectoradd -m benchmark --json $file > "$out/evals/$name-$v-$i.json" 2>/dev/null
      echo "$name $v $i: $(secs $begin) s"
    done
  done
done
unset KERNELBOX_BENCH_BATCH
python3 - "$out/evals" <<'PY'
import collections, glob, json, os, statistics, sys
per = collections.defaultdict(list)
notes = collections.Counter()
for f in sorted(glob.glob(sys.argv[1] + "/*-*-*.json")):
    name = os.path.basename(f)
    if name.startswith("leaderboard"):
        continue
    sol, variant, _ = name[:-5].rsplit("-", 2)
    try:
        d = json.load(open(f))
    except ValueError:
        print("unreadable", name); continue
    if not d.get("passed"):
        print("failed", name, (d.get("reason") or "")[:300])
    for p in d.get("phases") or []:
        if p["name"] != "benchmark":
            continue
        r = p.get("result") or {}
        x = r.get("extra") or {}
        for b in r.get("benchmarks") or []:
            i = b["index"]
            per[(sol, variant, b["spec"])].append((b["mean_ns"], b.get("runs")))
            notes[(sol, variant, b["spec"], "batch", x.get(f"benchmark.{i}.batch"))] += 1
            if x.get(f"benchmark.{i}.batch_refused"):
                print("refused:", name, x[f"benchmark.{i}.batch_refused"])
for (sol, variant, spec), v in sorted(per.items()):
    means = [m for m, _ in v]
    m = statistics.mean(means)
    cv = statistics.stdev(means) / m * 100 if len(means) > 1 else 0.0
    print(f"{sol:12} {variant:6} {spec[:34]:34} n={len(means)} mean {m / 1e3:8.3f} us  CV {cv:5.2f} %  "
          f"min {min(means) / 1e3:.3f} max {max(means) / 1e3:.3f}  runs {[r for _, r in v]}")
for k, n in sorted(notes.items(), key=str):
    if k[1] == "window":
        print("windows:", k, n)
PY
} 2>&1 | tee "$out/judge5.txt"
