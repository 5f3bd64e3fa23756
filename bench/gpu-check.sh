#!/usr/bin/env bash
# The GPU checks of a session, in one call of the device tool:
#   bench/gpu-check.sh check   every problem's fixtures and templates (parallel)
#   bench/gpu-check.sh gotest  the Go test binaries in bin/ (problems, appliance)
#   bench/gpu-check.sh rank    a leaderboard run of each correct fixture (serial)
# Writes logs to $OUT (or ./gpu-out). Needs bin/kernelbox built here.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
kb=./bin/kernelbox
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv; python3 -c 'import torch,triton;print(torch.__version__, triton.__version__)'; } > "$out/system.txt" 2>&1
for step in "${@:-check}"; do
case "$step" in
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
gotest)
  for pkg in problems appliance; do
    ( cd $pkg && ../bin/$pkg.test -test.v -test.timeout 20m 2>&1 ) > "$out/gotest-$pkg.txt"
    echo "$pkg: exit $?"; grep -E '^(--- |ok|FAIL|PASS)' "$out/gotest-$pkg.txt" | grep -v -- '--- PASS' | head -40
    grep -c -- '--- PASS' "$out/gotest-$pkg.txt"
  done
  ;;
rank)
  for p in $($kb problems list); do
    f=$(ls problems/library/$p/solutions/correct/*.py | head -1)
    $kb eval -p "problems/library/$p" -m leaderboard "$f" 2>&1 | tee -a "$out/rank.txt"
  done
  ;;
esac
done
