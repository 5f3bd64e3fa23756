#!/usr/bin/env bash
# The daemon on the GPU machine (cgroup v2), in one call of the device tool:
# needs bin/kernelbox, bin/appliance.test and bin/queue.test built here with
# -tags seccomp (see docs/gpu-runs.md). The daemon serves the CPU backend
# only until GPU slots exist (issue 5); this checks the daemon, its sandbox
# on cgroup v2, crash recovery and the figures of issue 4 on this machine.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
ldd ./bin/kernelbox | grep -q "libseccomp.so.2 => not found" && export LD_LIBRARY_PATH=$PWD/bin/lib
step() { echo; echo "== $*"; }
{
  step "machine"; stat -fc %T /sys/fs/cgroup; nproc; id -u
  step "daemon end-to-end tests (real sandbox, SQLite, CPU backend)"
  (cd appliance && ../bin/appliance.test -test.run 'TestDaemon|TestStore|TestConfig' -test.v 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok)|accepted in' | grep -v '=== RUN')
  step "daemon benchmarks"
  (cd appliance && ../bin/appliance.test -test.run XXX -test.bench Daemon -test.benchtime 100x 2>&1 | grep -E '^Benchmark|^ok|FAIL')
  step "queue benchmark"
  (cd queue && ../bin/queue.test -test.run XXX -test.bench . 2>&1 | grep -E '^Benchmark|^ok')
  step "make demo's script"
  KB=./bin/kernelbox timeout 300 ./packaging/demo.sh 2>&1 | grep -vE '^\s+(✓|✗) test' | tail -40
} 2>&1 | tee "$out/daemon.txt"
