#!/usr/bin/env bash
# The cost of issue 6's harness defences: the wall time of one problem in
# leaderboard mode (`kernelbox eval -m leaderboard`) with the harness as it
# was before them (commit c83af4f^: one timer, no identity guards, no
# per-iteration input check, no head start) and as it is now, alternated
# round by round in one run. Prints each round and the ratio of the means.
#
#   bash bench/defence-cost.sh [PROBLEM] [ROUNDS] [SOLUTION]
#
# BASELINE: a directory holding the old library (default: extracted here
# with git archive; the GPU machine has no git, so its scripts pass one).
set -eu
prob=${1:-vectoradd}
rounds=${2:-3}
kb=${KB:-$PWD/bin/kernelbox}
now=problems/library
sol=${3:-$(ls $now/$prob/solutions/correct/*.py | head -1)}
base=${BASELINE:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$base" ]; then
  git archive c83af4f^ problems/library | tar -x -C "$tmp"
  base=$tmp/problems/library
fi
for i in $(seq "$rounds"); do
  for which in before now; do
    dir=$now; [ $which = before ] && dir=$base
    t0=$(date +%s%N)
    if ! $kb eval -p "$dir/$prob" -m leaderboard --json "$sol" > "$tmp/$which.json" 2> "$tmp/$which.err"; then
      echo "round $i $which: eval failed: $(tail -c 300 "$tmp/$which.err") $(head -c 300 "$tmp/$which.json")"
    fi
    echo "$which $(( ($(date +%s%N) - t0) / 1000000 ))" >> "$tmp/walls"
  done
done
python3 - "$tmp/walls" "$tmp/now.json" <<'PY'
import json, statistics, sys
walls = {}
for line in open(sys.argv[1]):
    which, ms = line.split()
    walls.setdefault(which, []).append(int(ms))
for which, ms in walls.items():
    print(f"{which:6s} wall ms per leaderboard eval: {ms}  mean {statistics.mean(ms):.0f}")
b, n = statistics.mean(walls["before"]), statistics.mean(walls["now"])
print(f"defences' cost: now / before = {n / b:.3f} ({n - b:+.0f} ms)")
try:
    doc = json.load(open(sys.argv[2]))
    print("now passed:", doc.get("passed"), "|", [round(x.get("mean_ns", 0) / 1e3, 2) for x in doc.get("benchmarks") or []], "us")
except Exception as e:  # noqa: BLE001
    print("now: no JSON:", e)
PY
