#!/usr/bin/env bash
# Issue 17, the trusted judge on the GPU machine, in one call: the judge's
# clock against the worker's own CUDA events on honest kernels, the GPU
# cheats of the corpus, and every bundled
# problem's templates in test mode.
# PARTS picks what runs (default all): judge cheats1 cheats library (the
# daemon's figures and the spread are bench/gpu-judge3.sh's). Each
# part writes $OUT/judge2-PART.txt; the cheats and the library run four
# evaluations at a time (they check verdicts, not times).
# Needs bin/kernelbox built here with -tags seccomp (docs/gpu-runs.md).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
source bench/gpu-lib.sh
parts=${PARTS:-judge cheats1 cheats library}
tmpl=$lib/templates
cheats=problems/testdata/cheats
secs() { python3 -c "print(round($(date +%s.%N)-$1,1))"; }
show() { # $1 mode, $2 file: one line per benchmark with the judge's extras
  local j; j=$(mktemp)
  timeout ${T:-150} $kb eval -p ${P:-vectoradd} -m "$1" --json "$2" > $j.json 2>$j.err
  python3 - "$2" "$j" <<'PY'
import json, sys
name, j = sys.argv[1], sys.argv[2]
try:
    d = json.load(open(j + ".json"))
except Exception as e:
    print(name, "no JSON:", open(j + ".err").read()[-600:]); sys.exit()
print("/".join(name.split("/")[-3:]), "passed", d["passed"], "|", (d.get("reason") or "")[:400].replace("\n", " "), "| score", d.get("score"))
x0 = ((d.get("phases") or [{}])[-1].get("result") or {}).get("extra") or {}
if x0.get("benchmark.0.clock_offset"):
    print("  clock offset:", x0["benchmark.0.clock_offset"])
for p in d.get("phases") or []:
    r = p.get("result") or {}
    x = r.get("extra") or {}
    for b in r.get("benchmarks") or []:
        i = b["index"]
        own = x.get(f"benchmark.{i}.worker_mean")
        ratio = f" judge/worker {b['mean_ns'] / float(own):.4f}" if own else ""
        print(f"  {p['name']:11} {b['spec'][:28]:28} mean {b.get('mean_ns', 0) / 1e3:9.3f} us  err {b.get('err_ns', 0) / 1e3:.3f}"
              f"  runs {b.get('runs')}  worker {float(own) / 1e3 if own else 0:9.3f} us{ratio}  late {x.get(f'benchmark.{i}.late')}"
              f"  retries {x.get(f'benchmark.{i}.retries')}  head {x.get(f'benchmark.{i}.head_start')}  l2 {x.get(f'benchmark.{i}.l2_reset')}"
              f"  {(b.get('error') or '')[:200]}")
PY
  rm -f $j $j.json $j.err
}
export -f show; export kb

{
step system
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
python3 -c 'import torch,triton;print("torch", torch.__version__, "triton", triton.__version__)'
$kb --version
} 2>&1 | tee "$out/judge2-system.txt"

if [[ $parts == *judge* ]]; then {
  step "the judge's clock against the worker's own events (KERNELBOX_JUDGE_SELFTIME=1), benchmark mode"
  for f in $tmpl/torch.py $tmpl/triton.py $lib/solutions/correct/chunked_add.py; do
    begin=$(date +%s.%N); KERNELBOX_JUDGE_SELFTIME=1 show benchmark $f; echo "  ($(secs $begin) s)"
  done
  step "leaderboard mode, the Triton template (eval on the host)"
  begin=$(date +%s.%N); show leaderboard $tmpl/triton.py; echo "  ($(secs $begin) s)"
} 2>&1 | tee "$out/judge2-judge.txt"; fi

if [[ $parts == *cheats1* ]]; then {
  step "GPU cheats one at a time (the clock undisturbed)"
  for c in gc_search cudart_patch side_stream frame_walk; do show benchmark $cheats/vectoradd_$c.py; done
} 2>&1 | tee "$out/judge2-cheats1.txt"; fi

if [[ $parts == *cheats\ * || $parts == *cheats ]]; then {
  step "the corpus's GPU cheats (benchmark mode unless named), four at a time"
  { for c in event_patch cudart_patch clock_patch side_stream side_stream_nowait check_hook reply_wrap frame_walk gc_search patches_checker; do
      echo "benchmark $cheats/vectoradd_$c.py"; done
    for c in mutates_later seed_predict generator_hook tensor_sum_patch; do echo "leaderboard $cheats/vectoradd_$c.py"; done
  } | xargs -P 4 -L 1 bash -c 'show "$0" "$1"'
} 2>&1 | tee "$out/judge2-cheats.txt"; fi

if [[ $parts == *library* ]]; then {
  step "every bundled problem's templates, test mode, four at a time"
  for d in problems/library/*/; do
    p=$(basename $d); [[ $p == harness ]] && continue
    for f in $d/templates/*; do echo "$p $f"; done
  done | xargs -P 4 -L 1 bash -c 'P=$0 T=240 show test "$1" | head -2'
} 2>&1 | tee "$out/judge2-library.txt"; fi
