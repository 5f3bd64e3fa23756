#!/usr/bin/env bash
# Issue 6's last GPU checks, in one call: does a persisting L2 window
# survive the flush, and does the harness's reset undo it (bench/l2-persist.py);
# the L2 cheat against the Triton template under `kernelbox eval -m
# benchmark`, alternated; the generator hook in leaderboard mode; and the
# defences' cost with the second check's loading in parallel. Needs
# bin/kernelbox and bin/baseline.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
. "$(dirname "$0")/gpu-lib.sh"
parts=${PARTS:-l2 eval cost}  # a subset reruns only those
{
  case " $parts " in *" l2 "*)
  step "persisting L2 against the flush"
  timeout 120 python3 bench/l2-persist.py;; esac
  case " $parts " in *" eval "*)
  step "kernelbox eval -m benchmark: the L2 cheat and the template, alternated"
  for r in 1 2; do
    for f in problems/testdata/cheats/vectoradd_l2_persist.py $lib/templates/triton.py; do
      echo "== round $r $f"; evalshow benchmark "$f"
    done
  done
  step "kernelbox eval -m leaderboard: the generator hook"
  evalshow leaderboard problems/testdata/cheats/vectoradd_generator_hook.py;; esac
  case " $parts " in *" cost "*)
  step "the defences' cost: leaderboard mode, the Triton template, before and now"
  BASELINE=$PWD/bin/baseline/problems/library KB=$kb timeout 300 bash bench/defence-cost.sh vectoradd 2 $lib/templates/triton.py;; esac
} 2>&1 | tee "$out/check3.txt"
