#!/usr/bin/env bash
# The sandbox on the GPU machine, in one call of the device tool: needs
# bin/kernelbox and bin/sandbox.test built here with -tags seccomp.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out"
kb=./bin/kernelbox
# libseccomp travels with the binaries in case the machine lacks it.
ldd $kb | grep -q "libseccomp.so.2 => not found" && export LD_LIBRARY_PATH=$PWD/bin/lib
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
devs="--device /dev/nvidia0 --device /dev/nvidiactl --device /dev/nvidia-uvm"
step() { echo; echo "== $*"; }
{
  step "cgroup and libseccomp"; stat -fc %T /sys/fs/cgroup; ldd $kb | grep -i seccomp
  step "doctor"; $kb doctor
  step "nvidia-smi in the sandbox"; $kb sandbox run $devs --memory 4G -- nvidia-smi -L
  step "device nodes in the sandbox"; $kb sandbox run $devs -- /bin/sh -c 'ls /dev; id -u'
  step "PyTorch + Triton template, test mode, sandboxed"
  $kb eval --sandbox $devs -p vectoradd problems/library/vectoradd/templates/triton.py | tail -4
  step "CUDA load_inline template, test mode, sandboxed"
  $kb eval --sandbox $devs -p grayscale problems/library/grayscale/templates/cuda_inline.py | tail -4
  step "native CUDA (lang cu: nvcc and the binary in the sandbox), leaderboard"
  $kb eval --sandbox $devs --bind /opt -p problems/testdata/cuda_identity -m leaderboard problems/testdata/cuda_identity/submission.cu | tail -8
  step "ncu in the sandbox"
  $kb sandbox run $devs --bind /opt --memory 8G --timeout 120s -- ncu --metrics gpu__time_duration.sum \
    /opt/torch/.venv/bin/python3 -c "import torch; x = torch.ones(1 << 20, device='cuda'); print((x * 2).sum().item())" 2>&1 | tail -15
  step "sandbox tests on cgroup v2 (verdicts, red team)"
  (cd sandbox && ../bin/sandbox.test -test.run 'Runtime|RedTeam' 2>&1 | tail -15)
  step "overhead benchmark"
  (cd sandbox && ../bin/sandbox.test -test.run XXX -test.bench Overhead -test.benchtime 40x 2>&1 | grep -E 'Benchmark|ok')
} 2>&1 | tee "$out/sandbox.txt"
