#!/usr/bin/env bash
# Issue 17, the judge's figures on the GPU machine in one call (H100 or
# H200; the GPU type is read from nvidia-smi):
# - library: every bundled problem's torch and Triton templates in test
#   mode through `kernelbox eval`, four at a time (verdicts only);
# - spread: 10 benchmark-mode submissions of the Triton vectoradd template
#   through the daemon with the SM clock locked at $LOCK MHz, the CV of
#   each shape's mean and of the score;
# - daemon: the same template in test mode x10 one at a time, $PAUSE s
#   apart (a standby harness waits on the idle GPU), leaderboard mode x3,
#   and x5 queued at once (warm starts: the next job prepares while the
#   GPU is busy);
# - native: the lang cu test problem twice from one user (nvcc, then the
#   user's compile cache);
# - nostandby: test mode x3 through a daemon with standbys off;
# - inline: the CUDA load_inline template in test mode twice from one user
#   (the second hits that user's compile cache);
# - library: as above, last (the call's time limit may cut it short);
# - selftime: 6 evals with the worker's own events beside the judge's
#   (how far the netted time is from the in-process one, run to run);
# - mps: two selftime evals with an MPS server running (is the
#   cross-context cost in the judge's window gone?), MPS stopped after;
# - cheats: the corpus's garbage-collector search and cudart patch alone.
# PARTS picks (default: daemon spread inline nostandby library). Writes $OUT/judge3-PART.txt and the spread's
# runs as $OUT/judge3-runs.jsonl. Needs bin/kernelbox built with -tags
# seccomp (docs/gpu-runs.md).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
source bench/gpu-lib.sh
parts=${PARTS:-daemon spread inline nostandby library}
tmpl=$lib/templates
gtype=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oE '[A-Z][0-9]{2,3}' | head -1)
secs() { python3 -c "print(round($(date +%s.%N)-$1,1))"; }
verdict() { # $1 problem, $2 file: one line
  local j; j=$(mktemp)
  timeout 240 $kb eval -p "$1" -m test --json "$2" > $j 2>$j.err
  python3 - "$1" "$2" "$j" <<'PY'
import json, sys
p, f, j = sys.argv[1:]
try:
    d = json.load(open(j))
    print(p, f.split("/")[-1], "passed", d["passed"], (d.get("reason") or "")[:300].replace("\n", " "), "| flags", [x.get("rule") for x in d.get("flags") or []])
except Exception:
    print(p, f.split("/")[-1], "no JSON:", open(j + ".err").read()[-400:].replace("\n", " "))
PY
  rm -f $j $j.err
}
export -f verdict; export kb

{
step system
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
python3 -c 'import torch,triton;print("torch", torch.__version__, "triton", triton.__version__)'
echo "GPU type: $gtype"
} 2>&1 | tee "$out/judge3-system.txt"

if [[ $parts == *spread* || $parts == *daemon* || $parts == *inline* || $parts == *native* ]]; then
  printf 'measurement:\n  clocks: {%s: "%s"}\n' "$gtype" "$lock" > /tmp/kb-locked.yaml
  start /tmp/kb-locked.yaml
fi

if [[ $parts == *daemon* ]]; then {
  step "daemon: the Triton template in test mode x10, one at a time, ${PAUSE:-5} s apart (a standby waits on the idle GPU)"
  sleep 20 # the first standby imports torch from a cold page cache
  walls=()
  for i in $(seq 10); do
    begin=$(date +%s.%N)
    $kb submit $tmpl/triton.py -l vectoradd -g $gtype -m test > /tmp/test.txt 2>&1; code=$?
    w=$(secs $begin); walls+=($w)
    echo "submit -m test $i: exit $code, $w s wall"
    [ $code = 0 ] || tail -3 /tmp/test.txt
    sleep ${PAUSE:-5}
  done
  python3 -c 'import statistics, sys; v = sorted(map(float, sys.argv[1:])); print(f"test mode: median {statistics.median(v):.2f} s, min {v[0]} max {v[-1]} over {len(v)}")' "${walls[@]}"
  step "daemon: leaderboard mode x3, 8 s apart"
  for i in 1 2 3; do
    begin=$(date +%s.%N)
    $kb submit $tmpl/triton.py -l vectoradd -g $gtype -m leaderboard > /tmp/lb.txt 2>&1; code=$?
    echo "submit -m leaderboard $i: exit $code, $(secs $begin) s wall"
    grep -E 'score|rank|FAIL|fail|error' /tmp/lb.txt | head -4
    sleep 8
  done
  step "daemon: five test-mode submissions queued at once (a standby, then warm starts)"
  begin=$(date +%s.%N)
  for i in 1 2 3 4 5; do
    ( s=$(date +%s.%N); $kb submit $tmpl/triton.py -l vectoradd -g $gtype -m test > /tmp/q$i.txt 2>&1; echo "queued $i: exit $?, $(secs $s) s from its submit" ) &
  done
  wait
  echo "all five: $(secs $begin) s"
  echo "runs handed to a standby: $(grep -c 'run handed to the standby' "$data/log")"
  grep -E 'run finished' "$data/log" | sed 's/.*\(job=[0-9]*\).*\(passed=[a-z]*\) \(wall=[^ ]*\).*/\1 \2 \3/' | tail -20
} 2>&1 | tee "$out/judge3-daemon.txt"; fi

if [[ $parts == *spread* ]]; then {
  step "spread: 10 benchmark-mode submissions of the Triton template, clocks locked at $lock MHz"
  : > "$out/judge3-runs.jsonl"
  for i in $(seq 10); do
    begin=$(date +%s.%N)
    $kb submit $tmpl/triton.py -l vectoradd -g $gtype -m benchmark --json > /tmp/run.json 2>&1 || echo "run $i failed: $(head -c 300 /tmp/run.json)"
    echo "run $i: $(secs $begin) s wall  $(smi)"
    python3 -c 'import json,sys; print(json.dumps(json.load(open("/tmp/run.json"))))' >> "$out/judge3-runs.jsonl" 2>/dev/null
  done
  python3 - "$out/judge3-runs.jsonl" <<'PY'
import json, math, statistics, sys
per, scores = {}, []
for line in open(sys.argv[1]):
    d = json.loads(line)
    bs = d.get("benchmarks") or []
    for b in bs:
        per.setdefault(b["spec"][:28], []).append(b["mean_ns"])
    if bs:
        scores.append(math.exp(sum(math.log(b["mean_ns"]) for b in bs) / len(bs)))
    print(" ".join(f"{b['mean_ns']/1e3:.3f}±{b.get('err_ns', 0)/1e3:.3f}({b.get('runs')})" for b in bs))
for spec, m in per.items():
    mu = statistics.mean(m)
    print(f"{spec}: n={len(m)} mean {mu/1e3:.3f} us CV {statistics.stdev(m)/mu*100 if len(m) > 1 else 0:.2f} % min {min(m)/1e3:.3f} max {max(m)/1e3:.3f}")
if len(scores) > 1:
    mu = statistics.mean(scores)
    print(f"score (geom of means): n={len(scores)} mean {mu/1e3:.3f} us CV {statistics.stdev(scores)/mu*100:.2f} %")
PY
} 2>&1 | tee "$out/judge3-spread.txt"; fi

if [[ $parts == *inline* ]]; then {
  step "the CUDA load_inline template twice from one user: cold, then the user's compile cache"
  for i in 1 2; do
    begin=$(date +%s.%N)
    $kb submit $tmpl/cuda_inline.py -l vectoradd -g $gtype -m test > /tmp/inl$i.txt 2>&1; code=$?
    echo "submit $i: exit $code, $(secs $begin) s wall"
    grep -E 'PASS|FAIL|fail' /tmp/inl$i.txt | head -3
  done
  du -sh "$data/cache"/* 2>/dev/null | head -3
} 2>&1 | tee "$out/judge3-inline.txt"; fi

if [[ $parts == *native* ]]; then {
  step "a native .cu problem (lang cu) twice from one user: nvcc, then the user's compile cache"
  $kb admin problems load problems/testdata/cuda_identity 2>&1 | tail -2
  for i in 1 2; do
    begin=$(date +%s.%N)
    $kb submit problems/testdata/cuda_identity/submission.cu -l cuda_identity -g $gtype -m test -v > /tmp/nat$i.txt 2>&1; code=$?
    echo "submit $i: exit $code, $(secs $begin) s wall"
    grep -iE 'phase|compile|cache|reason|FAIL' /tmp/nat$i.txt | head -8
  done
  ls "$data/cache"/*/nvcc 2>/dev/null | head -3
} 2>&1 | tee "$out/judge3-native.txt"; fi

if [[ $parts == *spread* || $parts == *daemon* || $parts == *inline* || $parts == *native* ]]; then
  stop
  grep -E 'level=(WARN|ERROR)' "$data/log" | head -10 | tee -a "$out/judge3-daemon.txt"
  cp "$data/log" "$out/judge3-daemon.log"
fi

if [[ $parts == *nostandby* ]]; then {
  step "the same daemon without standbys (standby: false): test mode x3, 5 s apart"
  printf 'standby: false\nmeasurement:\n  clocks: {%s: "%s"}\n' "$gtype" "$lock" > /tmp/kb-nostandby.yaml
  start /tmp/kb-nostandby.yaml
  for i in 1 2 3; do
    begin=$(date +%s.%N)
    $kb submit $tmpl/triton.py -l vectoradd -g $gtype -m test > /tmp/ns.txt 2>&1; code=$?
    echo "submit -m test $i (no standby): exit $code, $(secs $begin) s wall"
    sleep 5
  done
  stop
} 2>&1 | tee "$out/judge3-nostandby.txt"; fi

selftime_eval() { # $1: run number. One eval with the worker's own events beside the judge's: judge - own per shape
  KERNELBOX_JUDGE_SELFTIME=1 timeout 120 $kb eval -p vectoradd -m benchmark --json $tmpl/triton.py > /tmp/st.json 2>/tmp/st.err
  python3 - "$1" <<'PY'
import json, sys
try:
    d = json.load(open("/tmp/st.json"))
except Exception:
    print("run", sys.argv[1], "no JSON", open("/tmp/st.err").read()[-300:]); sys.exit()
r = (d.get("phases") or [{}])[-1].get("result") or {}
x = r.get("extra") or {}
row, off = [], ""
for b in r.get("benchmarks") or []:
    i = b["index"]
    own = float(x.get(f"benchmark.{i}.worker_mean") or 0) / 1e3
    row.append(f"{b['mean_ns']/1e3:.2f}-{own:.2f}={b['mean_ns']/1e3-own:+.2f}")
    off = x.get(f"benchmark.{i}.clock_offset") or ""
print("run", sys.argv[1], "passed", d["passed"], "judge-own (us):", " ".join(row), "| offset:", off[-90:])
PY
}

if [[ $parts == *selftime* ]]; then {
  step "the judge's net time against the worker's own events, 6 evals of the Triton template (benchmark mode, KERNELBOX_JUDGE_SELFTIME=1, clocks not locked)"
  for i in 1 2 3 4 5 6; do selftime_eval $i; done
} 2>&1 | tee "$out/judge3-selftime.txt"; fi

if [[ $parts == *mps* ]]; then {
  step "the judge under MPS (one server context: no context switch in the timed window?), 2 evals, then MPS stopped"
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/kb-mps CUDA_MPS_LOG_DIRECTORY=/tmp/kb-mps-log
  mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  if command -v nvidia-cuda-mps-control >/dev/null && nvidia-cuda-mps-control -d; then
    for i in 1 2; do selftime_eval $i; done
    echo quit | nvidia-cuda-mps-control
    tail -5 $CUDA_MPS_LOG_DIRECTORY/control.log 2>/dev/null
  else
    echo "no MPS here"
  fi
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
} 2>&1 | tee "$out/judge3-mps.txt"; fi

if [[ $parts == *cheats* ]]; then {
  step "cheats alone, benchmark mode (eval, clocks not locked)"
  for c in gc_search cudart_patch; do
    timeout 150 $kb eval -p vectoradd -m benchmark --json problems/testdata/cheats/vectoradd_$c.py > /tmp/c.json 2>/tmp/c.err
    python3 - $c <<'PY'
import json, sys
try:
    d = json.load(open("/tmp/c.json"))
except Exception:
    print(sys.argv[1], "no JSON", open("/tmp/c.err").read()[-300:]); sys.exit()
r = (d.get("phases") or [{}])[-1].get("result") or {}
x = r.get("extra") or {}
print(sys.argv[1], "passed", d["passed"], (d.get("reason") or "")[:200])
for b in r.get("benchmarks") or []:
    i = b["index"]
    print(f"  {b['spec'][:28]:28} mean {b['mean_ns']/1e3:9.3f} us err {b.get('err_ns', 0)/1e3:.3f} runs {b.get('runs')} late {x.get(f'benchmark.{i}.late')} retries {x.get(f'benchmark.{i}.retries')} head {x.get(f'benchmark.{i}.head_start')}")
    print("   ", (x.get(f"benchmark.{i}.clock_offset") or "")[:200])
PY
  done
} 2>&1 | tee "$out/judge3-cheats.txt"; fi

if [[ $parts == *library* ]]; then {
  step "every bundled problem's torch and Triton templates, test mode, four at a time"
  begin=$(date +%s.%N)
  for d in problems/library/*/; do
    p=$(basename $d); [[ $p == harness ]] && continue
    for f in $d/templates/torch.py $d/templates/triton.py; do [ -f $f ] && echo "$p $f"; done
  done | xargs -P 4 -L 1 bash -c 'verdict "$0" "$1"'
  echo "($(secs $begin) s)"
} 2>&1 | tee "$out/judge3-library.txt"; fi
