#!/usr/bin/env bash
# The harness's guards on the GPU (quick): the Triton template passes, the
# clock patch, the lazy tensor and the side stream are caught. Needs
# bin/kernelbox.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
kb=$PWD/bin/kernelbox
{
  for f in problems/library/vectoradd/templates/triton.py problems/testdata/cheats/vectoradd_clock_patch.py \
      problems/testdata/cheats/vectoradd_lazy_tensor.py problems/testdata/cheats/vectoradd_side_stream.py; do
    echo "== $f"
    $kb eval -p vectoradd -m benchmark --json "$f" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print("passed", d["passed"], "|", (d.get("reason") or "")[:200])
for b in d.get("benchmarks") or []:
    print("  ", b["spec"][:24], round(b.get("mean_ns", 0) / 1e3, 2), "us")'
  done
} 2>&1 | tee "$out/harness.txt"
