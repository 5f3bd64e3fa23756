#!/usr/bin/env bash
# Profile mode through the judge (issue 39) on the GPU machine, in one call:
# (1) kernelbox eval -m profile under the real ncu, for the Triton and the
# torch templates of vectoradd: ncu must profile only the worker's kernels
# in the custom_kernel range (one process; no copy, zero_ or flush kernel of
# the judge's); (2) the same without ncu (PyTorch's table, CUDA rows);
# (3) a wrong kernel fails profile mode; (4) the problems test binary's
# Profile and Harness tests. Writes $OUT/profile.txt. Needs bin/kernelbox
# (-tags seccomp) and bin/problems.test built here.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
source bench/gpu-lib.sh
ncu=$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
{
step system
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch,triton;print(torch.__version__, triton.__version__)'
echo "ncu: $ncu $($ncu --version 2>&1 | tail -1)"
for tmpl in triton torch; do
  step "profile under ncu: vectoradd $tmpl template"
  t0=$(date +%s.%N)
  $kb eval -p $lib -m profile --ncu "$ncu" --profile "$out/$tmpl.ncu-rep" -v $lib/templates/$tmpl.py 2>&1 | cut -c1-240 | head -60
  echo "exit ${PIPESTATUS[0]}, $(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),1))" $t0) s"
  if [ -s "$out/$tmpl.ncu-rep" ]; then
    "$ncu" --import "$out/$tmpl.ncu-rep" --csv --page details 2>/dev/null | python3 -c '
import csv, sys
rows = list(csv.DictReader(sys.stdin))
seen = sorted({(r["Process ID"], r["Process Name"], r["ID"], r["Kernel Name"][:80]) for r in rows})
print("profiled (pid, process, id, kernel):")
for s in seen:
    print("  ", s)'
  fi
done
step "profile without ncu: PyTorch's table (CUDA rows)"
$kb eval -p $lib -m profile --ncu off --json $lib/templates/triton.py > /tmp/p.json; echo "exit $?"
python3 - <<'PY'
import base64, json
d = json.load(open("/tmp/p.json"))
print("passed", d.get("passed"), d.get("reason"))
for b in d.get("benchmarks") or []:
    print(base64.b64decode(b.get("report", "")).decode()[:1800])
PY
step "a wrong kernel in profile mode"
$kb eval -p $lib -m profile --ncu off $lib/solutions/wrong/fp32_output.py 2>&1 | cut -c1-240 | head -20; echo "exit ${PIPESTATUS[0]}"
$kb eval -p $lib -m profile --ncu "$ncu" $lib/solutions/wrong/fp32_output.py 2>&1 | cut -c1-240 | head -20; echo "exit ${PIPESTATUS[0]}"
step "go test problems -run Profile|Harness"
( cd problems && ../bin/problems.test -test.run 'Profile|Harness' -test.v -test.timeout 8m 2>&1 ) > "$out/gotest.txt"
echo "exit $?"; grep -E '^(--- |ok|FAIL|PASS)' "$out/gotest.txt" | head -40
} 2>&1 | tee "$out/profile.txt"
