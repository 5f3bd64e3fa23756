#!/usr/bin/env bash
# The GPU checks of a session, in one call of the device tool:
#   bench/gpu-check.sh check   every problem's fixtures and templates (parallel)
#   bench/gpu-check.sh rank    a leaderboard run of each correct fixture (serial)
# Writes logs to $OUT (or ./gpu-out). Needs bin/kernelbox built here.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
kb=./bin/kernelbox
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv; python3 -c 'import torch,triton;print(torch.__version__, triton.__version__)'; } > "$out/system.txt" 2>&1
case "${1:-check}" in
check)
  names=$($kb problems list)
  for p in $names; do
    ( $kb problems check --templates --no-rank "problems/library/$p" > "$out/check-$p.log" 2>&1; echo "exit $?" >> "$out/check-$p.log" ) &
  done
  wait
  for p in $names; do cat "$out/check-$p.log"; done > "$out/check.txt"
  rm -f "$out"/check-*.log
  cat "$out/check.txt"
  ;;
rank)
  for p in $($kb problems list); do
    f=$(ls problems/library/$p/solutions/correct/*.py | head -1)
    $kb eval -p "problems/library/$p" -m leaderboard "$f" 2>&1 | tee -a "$out/rank.txt"
  done
  ;;
esac
