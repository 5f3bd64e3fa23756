#!/usr/bin/env bash
# Re-check of the two sandboxed GPU steps that failed in the first run
# (load_inline needs the venv's ninja on PATH; lang cu needs the compiled
# binary kept across phases).
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
kb=./bin/kernelbox
devs="--device /dev/nvidia0 --device /dev/nvidiactl --device /dev/nvidia-uvm"
{
  echo "== CUDA load_inline template, sandboxed"
  $kb eval --sandbox $devs -p grayscale problems/library/grayscale/templates/cuda_inline.py | tail -3
  echo "== native CUDA (lang cu), sandboxed, leaderboard"
  $kb eval --sandbox $devs --bind /opt -p problems/testdata/cuda_identity -m leaderboard problems/testdata/cuda_identity/submission.cu | tail -6
} 2>&1 | tee "$out/sandbox-fix.txt"
