#!/usr/bin/env bash
# Issue 17's figures on the GPU machine (the H200; the GPU type is read
# from nvidia-smi), each part in one call of at most ~8 minutes:
# - latency: through the daemon (SM clock locked at $LOCK MHz, standbys
#   on), the Triton vectoradd template in test mode x$N (10), then
#   leaderboard mode x$N, each sent $PAUSE s after the last ended: the median submit
#   to result of each, and the CV across the ten ranked runs of the score
#   and of each shape's mean;
# - inline: the load_inline template in leaderboard mode twice from one
#   user (the first compiles once for all phases, the second hits that
#   user's compile cache);
# - cold: the daemon with standbys and warm starts off, leaderboard x3:
#   scores to set beside latency's (warm and cold must agree);
# - templates: every single-GPU bundled problem's templates (torch,
#   triton, cuda_inline) in leaderboard mode through the daemon, queued
#   at once: each passes and none is flagged ($PROBLEMS picks problems);
# - cheats: every corpus cheat through `kernelbox eval` in leaderboard
#   mode: verdict, reason, score, the timings' flags ($CHEATS picks by
#   file name without .py);
# - pmpp: reference-kernels' pmpp_v2 unchanged ($REFK, default bin/refk,
#   holds a checkout's problems/pmpp_v2 and pmpp_v2.yaml), loaded with
#   --gpus set to this GPU, every shipped correct solution in leaderboard
#   mode through the daemon ($PROBLEMS picks leaderboards: vectorsum_v2).
# PARTS picks (default: latency inline cold). Writes $OUT/gpu-PART.txt
# and each submission's JSON under $OUT/runs. Needs bin/kernelbox built
# with -tags seccomp (docs/gpu-runs.md).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out/runs"
source bench/gpu-lib.sh
parts=${PARTS:-latency inline cold}
pause=${PAUSE:-3}
tmpl=$lib/templates
gtype=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oE '[A-Z][0-9]{2,3}' | head -1)
now() { date +%s.%N; }
secs() { python3 -c "print(round($(now)-$1,2))"; }
cat > /tmp/kb-stats.py <<'PY'
# Submissions' JSON files (argv): median wall (from walls.txt beside
# them), and for ranked ones the CV of the score and of each shape's mean.
import json, statistics, sys, os
files = sys.argv[1:]
walls = [float(l.split()[1]) for l in open(os.path.join(os.path.dirname(files[0]), "walls-" + os.path.basename(files[0]).rsplit("-", 1)[0] + ".txt"))]
print(f"  walls: {' '.join(f'{w:.1f}' for w in walls)} s; median {statistics.median(walls):.2f} s")
scores, shapes, bad = [], {}, 0
for f in files:
    try:
        d = json.load(open(f))
    except ValueError:
        bad += 1; continue
    if not d.get("passed"):
        bad += 1; print("  failed:", f, (d.get("reason") or "")[:200]); continue
    if d.get("score") is not None:
        scores.append(d["score"] * 1e6)
    for b in d.get("benchmarks") or []:
        shapes.setdefault(b["spec"], []).append(b["mean_ns"] / 1e3)
def cv(xs):
    return statistics.stdev(xs) / statistics.mean(xs) * 100 if len(xs) > 1 else 0.0
if scores:
    print(f"  score: n={len(scores)} mean {statistics.mean(scores):.3f} us, CV {cv(scores):.2f} %, "
          f"min {min(scores):.3f} max {max(scores):.3f}")
for spec, v in shapes.items():
    print(f"  {spec[:36]:36} n={len(v)} mean {statistics.mean(v):9.3f} us  CV {cv(v):5.2f} %")
print(f"  not passed: {bad}")
reviews = [f"{os.path.basename(f)}: {d.get('review')}" for f in files for d in [json.load(open(f))] if d.get("review")]
print(f"  flagged for review: {len(reviews)} {' '.join(reviews)[:300]}")
PY
series() { # $1 name, $2 file, $3 mode, $4 count: one submission at a time
  : > "$out/runs/walls-$1.txt"
  for i in $(seq $4); do
    b=$(now)
    $kb submit "$2" -l vectoradd -g $gtype -m $3 --json > "$out/runs/$1-$i.json" 2>"$out/runs/$1-$i.err"
    echo "$i $(secs $b)" >> "$out/runs/walls-$1.txt"
    sleep $pause
  done
  echo "== $1 ($3 mode, $(basename $2), x$4)"
  python3 /tmp/kb-stats.py $(ls "$out"/runs/$1-*.json | sort -V)
}
await_all() { # id:label ...: wait for each submission to end, one line each
  for e in "$@"; do
    id=${e%%:*}
    for _ in $(seq 600); do # until it ends (15 minutes at most)
      $kb submissions show "$id" --json > "$out/runs/sub-$id.json" 2>/dev/null
      # The submission's own status: its runs' come first in the file.
      python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1])).get("status") not in ("done", "failed", "cancelled"))' \
        "$out/runs/sub-$id.json" 2>/dev/null && break
      sleep 1.5
    done
    python3 - "$out/runs/sub-$id.json" "${e#*:}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
score = d.get("score")
print(f"  {sys.argv[2]:44} passed {d.get('passed')!s:5} review {d.get('review') or '-':8} "
      f"score {score * 1e6 if score is not None else float('nan'):10.3f} us {(d.get('reason') or '')[:160]}")
PY
  done
}
locked() { printf 'measurement:\n  clocks: {%s: "%s"}\n%s' "$gtype" "$lock" "${1:-}" > /tmp/kb-gpu.yaml; start /tmp/kb-gpu.yaml; sleep 15; }

for part in $parts; do
  {
    echo "== $part on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(date -u +%FT%TZ)"
    case $part in
    latency)
      locked
      series test $tmpl/triton.py test ${N:-10}
      series ranked $tmpl/triton.py leaderboard ${N:-10}
      grep -c "run handed to the standby" "$data/log" | sed 's/^/  runs handed to a standby: /'
      stop ;;
    inline)
      locked
      series inline $tmpl/cuda_inline.py leaderboard 2
      for i in 1 2; do
        id=$(python3 -c "import json; print(json.load(open('$out/runs/inline-$i.json'))['id'])" 2>/dev/null)
        $kb submissions show "$id" --json 2>/dev/null | python3 -c '
import json, re, sys
t = json.dumps(json.load(sys.stdin))
for k in ("compile", "cache", "load_inline", "ninja"):
    for m in sorted(set(re.findall(r"[^\"]{0,60}" + k + r"[^\"]{0,80}", t)))[:3]:
        print("   ", m)' | head -8
      done
      stop ;;
    cold)
      locked "standby: false
warm_start: false
"
      series cold $tmpl/triton.py leaderboard 3
      stop ;;
    templates)
      # All templates at once: more than the default per-user cap of
      # jobs waiting (20), which refused the last 14 on 2026-12-06.
      locked "max_queued_per_user: 500
"
      ids=()
      for d in problems/library/*/; do
        n=$(basename $d); [ -f $d/task.yml ] || continue; grep -q world_size $d/task.yml && continue
        [ -n "${PROBLEMS:-}" ] && ! grep -qw "$n" <<< "$PROBLEMS" && continue
        for f in $d/templates/*.py; do
          id=$($kb submit "$f" -l $n -g $gtype -m leaderboard --json --no-wait 2>"$out/runs/submit-err.txt" | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])' 2>/dev/null)
          [ -n "$id" ] && ids+=("$id:$n/$(basename $f)") || echo "  submit $n $(basename $f) failed: $(head -c 300 $out/runs/submit-err.txt)"
        done
      done
      await_all "${ids[@]}"
      stop ;;
    pmpp)
      # reference-kernels' pmpp_v2 as it is (a checkout's problems/ under
      # $REFK), loaded onto this GPU type, every shipped correct solution
      # in leaderboard mode, queued at once.
      locked
      refk=${REFK:-bin/refk}
      $kb admin problems load $refk/problems/pmpp_v2.yaml --gpus $gtype --replace
      ids=()
      for d in $refk/problems/pmpp_v2/*_py/; do
        n=$(basename $d); lb=${n%_py}_v2
        [ -n "${PROBLEMS:-}" ] && ! grep -qw "$lb" <<< "$PROBLEMS" && continue
        for f in $d/solutions/correct/*.py; do
          b=$(now)
          id=$($kb submit "$f" -l $lb -g $gtype -m leaderboard --json --no-wait 2>"$out/runs/submit-err.txt" | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])' 2>/dev/null)
          [ -n "$id" ] && ids+=("$id:$lb/$(basename $f)") || echo "  submit $lb $(basename $f) failed: $(head -c 300 $out/runs/submit-err.txt)"
        done
      done
      b=$(now)
      await_all "${ids[@]}"
      echo "  all ended $(secs $b) s after the last was queued"
      stop ;;
    cheats)
      for f in problems/testdata/cheats/*.py; do
        [ -n "${CHEATS:-}" ] && ! grep -qw "$(basename $f .py)" <<< "$CHEATS" && continue
        timeout 120 $kb eval -p vectoradd -m leaderboard --json "$f" > "$out/runs/cheat.json" 2>/dev/null
        python3 - "$out/runs/cheat.json" "$(basename $f)" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:
    print(f"  {sys.argv[2]:42} no report (timed out or crashed)"); sys.exit()
score = d.get("score")
flags = ",".join(sorted({x.get("rule", "?") for x in d.get("flags") or []}))
print(f"  {sys.argv[2]:42} passed {d.get('passed')!s:5} score {score * 1e6 if score is not None else float('nan'):10.3f} us "
      f"flags {flags or '-'} {(d.get('reason') or '')[:110]}")
PY
      done ;;
    *) echo "unknown part $part" ;;
    esac
  } 2>&1 | tee "$out/gpu-$part.txt"
done
