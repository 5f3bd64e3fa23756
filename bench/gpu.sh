#!/usr/bin/env bash
# The measurement series of the GPU machine (GPU type read from
# nvidia-smi), each a part of at most a few minutes; the verdicts (the
# templates pass, the cheats are caught, the sandbox and canaries on the
# GPU, profile mode under ncu) are Go tests behind KERNELBOX_TEST_GPU=1
# (make test/gpu). bench/gpu-all.sh runs both in one device call;
# docs/performance.md has the figures, each with its command.
# - latency: through the daemon (SM clock locked at $LOCK MHz, standbys
#   on), the Triton vectoradd template in test mode x$N (10), then
#   leaderboard mode x$N, each sent $PAUSE s after the last ended: the
#   median submit to result of each, and the CV across the ranked runs of
#   the score and of each shape's mean;
# - inline: the load_inline template in leaderboard mode twice from one
#   user (the first compiles once for all phases, the second hits that
#   user's compile cache);
# - cold: the daemon with standbys and warm starts off, leaderboard x3:
#   scores to set beside latency's (warm and cold must agree);
# - pmpp: reference-kernels' pmpp_v2 unchanged ($REFK, default bin/refk,
#   holds a checkout's problems/pmpp_v2 and pmpp_v2.yaml), loaded with
#   --gpus set to this GPU, every shipped correct solution in leaderboard
#   mode through the daemon ($PROBLEMS picks leaderboards: vectorsum_v2);
# - slurm: vectoradd's chunked solution in leaderboard mode x$N through
#   the local executor, then through the slurm executor with Slurm's
#   commands stood in for (bench/gpu-lib.sh's fake_slurm) and the node
#   side real, reporting in a shared directory and then to the API: the
#   overhead of each against local, and a test and a profile run through
#   the node side.
# PARTS picks (default: latency inline cold). Writes $OUT/gpu-PART.txt
# and each submission's JSON under $OUT/runs.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out/runs"
source bench/gpu-lib.sh
parts=${PARTS:-latency inline cold}
pause=${PAUSE:-3}
tmpl=$lib/templates
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

slurm_part() { # the slurm part: local, then Slurm through a shared directory and the API
  local sol=$lib/solutions/correct/chunked_add.py n=${N:-5} fake shared
  locked
  series slurm-local $sol leaderboard $n
  stop
  fake=$(mktemp -d); fake_slurm "$fake"
  shared=$(mktemp -d)
  coordinator "$fake" "shared_dir: $shared"
  series slurm-shared $sol leaderboard $n
  echo "  attempt directories left: $(ls -d $shared/kernelbox-* 2>/dev/null | wc -l)"
  grep -E "level=(WARN|ERROR)" "$data/log" | tail -10
  stop
  coordinator "$fake" "coordinator: http://127.0.0.1:PORT"
  series slurm-api $sol leaderboard $n
  for m in test profile; do
    b=$(now)
    $kb submit $sol -l vectoradd -g $gtype -m $m --json > "$out/runs/slurm-$m.json" 2>"$out/runs/slurm-$m.err"
    echo "  $m mode through the node side: exit $?, $(secs $b) s, passed $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("passed"))' "$out/runs/slurm-$m.json" 2>/dev/null)"
  done
  grep -E "level=(WARN|ERROR)" "$data/log" | tail -10
  stop
  python3 - "$out/runs" "$fake/state" <<'PY'
import glob, json, re, statistics, sys
from datetime import datetime
runs, state = sys.argv[1], sys.argv[2]
med = {}
for tag in ("local", "shared", "api"):
    walls = [float(l.split()[1]) for l in open(f"{runs}/walls-slurm-{tag}.txt")]
    scores = [d["score"] for f in glob.glob(f"{runs}/slurm-{tag}-*.json")
              for d in [json.load(open(f))] if d.get("passed") and d.get("score")]
    med[tag] = (statistics.median(scores) if scores else 0, statistics.median(walls))
for tag in ("shared", "api"):
    (s, w), (ls, lw) = med[tag], med["local"]
    if s and ls:
        print(f"  {tag}/local: score x{s / ls:.4f}, wall {w:.2f} s against {lw:.2f} s ({w - lw:+.2f} s)")
def at(line):
    return datetime.fromisoformat(re.search(r"time=(\S+)", line).group(1).replace("Z", "+00:00"))
print("  each job on the node: setup (config, sandbox, Python, GPU discovery, clock lock), then the run to its report")
for f in sorted(glob.glob(state + "/job-*.out"), key=lambda f: int(re.search(r"job-(\d+)", f).group(1))):
    lines = open(f).read().splitlines()
    ready = [l for l in lines if "node ready" in l]
    rep = [l for l in lines if "msg=reported" in l]
    if ready and rep:
        setup = re.search(r"setup=(\S+)", ready[0]).group(1)
        print(f"    {f.rsplit('/', 1)[1]}: setup {setup}, run to report {(at(rep[0]) - at(ready[0])).total_seconds():.2f} s")
PY
}

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
    slurm) slurm_part ;;
    *) echo "unknown part $part" ;;
    esac
  } 2>&1 | tee "$out/gpu-$part.txt"
done
