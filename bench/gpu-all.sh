#!/usr/bin/env bash
# The GPU machine's whole check in one call of the device tool, as root:
# the GPU-gated Go tests (make test/gpu's, from the binaries make gpu/pack
# built into .carry/: the GPU machine has no Go), then bench/gpu.sh's
# measurement series. docs/performance.md gives the exact call.
#   TESTS  the tests' -test.run pattern (default make test/gpu's), or none
#   PARTS  bench/gpu.sh's parts (default: latency inline cold), or none
#   N      each series' length (default 5 here, so that both fit one call)
# Writes $OUT/system.txt, $OUT/gotest-PKG.txt and bench/gpu.sh's files.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
mkdir -p bin/lib
for f in kernelbox problems.test appliance.test gpu.test; do
  xz -dc ".carry/$f.xz" >"bin/$f" && chmod +x "bin/$f" || { echo "no .carry/$f.xz: run make gpu/pack first"; exit 1; }
done
cp .carry/lib/libseccomp.so.2 bin/lib/ 2>/dev/null
ldd bin/kernelbox | grep -q "libseccomp.so.2 => not found" && export LD_LIBRARY_PATH=$PWD/bin/lib
export KERNELBOX_TEST_GPU=1 PYTHONUNBUFFERED=1
{
  echo "commit $(cat .carry/commit 2>/dev/null), $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
  for py in python3 /opt/torch/.venv/bin/python3; do # the first that imports torch, as the daemon looks
    "$py" -c 'import torch, triton; print(torch.__file__, "torch", torch.__version__, "triton", triton.__version__)' 2>/dev/null && break
  done
  stat -fc 'cgroup %T' /sys/fs/cgroup; nproc; id -u
} 2>&1 | tee "$out/system.txt"

tests=${TESTS:-OnGPU|CUDA|RealHost}
if [ "$tests" != none ]; then
  echo; echo "== Go tests matching $tests (KERNELBOX_TEST_GPU=1)"
  b=$(date +%s)
  # The packages at once: they check verdicts, not times.
  for p in problems appliance gpu; do
    (cd "$p" && "$OLDPWD/bin/$p.test" -test.run "$tests" -test.v -test.parallel 4 -test.timeout 7m >"$out/gotest-$p.txt" 2>&1
     echo "exit $?" >>"$out/gotest-$p.txt") &
  done
  wait
  for p in problems appliance gpu; do
    echo "-- $p"; grep -E '^(--- |ok|FAIL|PASS|exit)|^\s+--- (FAIL|SKIP)|_test.go:[0-9]+: ' "$out/gotest-$p.txt" | cut -c1-300 | head -80
  done
  echo "tests took $(( $(date +%s) - b )) s"
fi

parts=${PARTS:-latency inline cold}
[ "$parts" != none ] && OUT=$out PARTS=$parts N=${N:-5} bash bench/gpu.sh
exit 0
