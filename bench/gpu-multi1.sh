#!/usr/bin/env bash
# Issue 7 on a machine of one GPU: the three multi-GPU problems with every
# case's world_size set to 1 (one rank, NCCL), under `kernelbox eval` in
# leaderboard mode and through the daemon (the sandbox, the gang of one
# slot), plus the wrong fixtures that fail even alone. Needs bin/kernelbox.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
. "$(dirname "$0")/gpu-lib.sh"
tmp=$(mktemp -d)
probs="allreduce allgather_gemm moe_dispatch"
for p in $probs; do
  d=$tmp/${p}_ws1; mkdir -p "$d"; cp -r problems/library/$p/. "$d"/
  cp problems/library/harness/eval.py problems/library/harness/kbutils.py "$d"/
  sed -i 's#\.\./harness/##; s/world_size: [0-9]*/world_size: 1/' "$d/task.yml"
done
{
  step "nvidia-smi"; smi
  step "kernelbox eval -m leaderboard, world_size 1"
  for p in $probs; do
    echo "== $p"; timeout 300 $kb eval -p $tmp/${p}_ws1 -m leaderboard $tmp/${p}_ws1/templates/torch.py 2>&1 | tail -14
  done
  step "kernelbox eval -m test: wrong fixtures that fail alone"
  for f in allreduce/solutions/wrong/skips_own_share.py moe_dispatch/solutions/wrong/drops_own_tokens.py; do
    p=${f%%/*}; echo "== $f"; timeout 200 $kb eval -p $tmp/${p}_ws1 -m test problems/library/$f 2>&1 | tail -3
  done
  start_locked
  step "through the daemon (sandbox, one H200 slot), benchmark mode"
  for p in $probs; do
    $kb admin problems load $tmp/${p}_ws1 >/dev/null || echo "load ${p}_ws1 failed"
    for f in $tmp/${p}_ws1/templates/torch.py $tmp/${p}_ws1/solutions/correct/*.py; do
      echo "== ${p}_ws1 $(basename $f)"
      timeout 300 $kb submit "$f" -l ${p}_ws1 -g H200 -m benchmark --json > $tmp/sub.json 2>$tmp/sub.err || echo "submit failed: $(tail -c 400 $tmp/sub.err)"
      python3 - $tmp/sub.json <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit(f"no JSON: {e}")
print("passed", d.get("passed"), "|", (d.get("reason") or "")[:300])
for b in d.get("benchmarks") or []:
    print("   ", b["spec"][:60], round(b.get("mean_ns", 0) / 1e3, 2), "us, runs", b.get("runs"))
PY
    done
  done
  $kb submissions list --json 2>/dev/null | head -c 0
  stop
  grep -i "nccl\|error" "$data/log" | tail -5
} 2>&1 | tee "$out/multi1.txt"
