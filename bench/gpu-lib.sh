# Helpers of bench/gpu.sh (sourced): the binary, the GPU's type, the
# daemon with a config, and Slurm's commands stood in for. Needs
# bin/kernelbox built with -tags seccomp and lazy binding, and, where the
# machine lacks it, bin/lib/libseccomp.so.2 (bench/gpu-all.sh unpacks both
# from .carry/; docs/performance.md says how they are built).
ldd ./bin/kernelbox | grep -q "libseccomp.so.2 => not found" && export LD_LIBRARY_PATH=$PWD/bin/lib
export PYTHONUNBUFFERED=1
kb=$PWD/bin/kernelbox
lock=${LOCK:-1500}
lib=problems/library/vectoradd
# The GPU's type as the daemon names it (H100, H200), from nvidia-smi;
# GTYPE=cpu tries a part on a machine without a GPU.
gtype=${GTYPE:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -oE '[A-Z][0-9]{2,3}' | head -1)}
step() { echo; echo "== $*"; }
now() { date +%s.%N; }
secs() { python3 -c "print(round($(now)-$1,2))"; }
start() { # $1: config file; sets $data, $pid and the client's variables
  data=$(mktemp -d); export KERNELBOX_CLIENT_CONFIG=$data/client.json
  $kb serve --config "$1" --data "$data" --listen "${LISTEN:-127.0.0.1:0}" --cpu-slots 0 >"$data/out" 2>"$data/log" &
  pid=$!
  for _ in $(seq 300); do grep -q "serving on" "$data/out" 2>/dev/null && break; sleep 0.2; done
  export KERNELBOX_SERVER=http://$(sed -n 's/.* serving on \([^ ]*\).*/\1/p' "$data/out")
  export KERNELBOX_TOKEN=$(cat "$data/admin-token")
}
stop() { kill -TERM $pid; wait $pid; }
locked() { # the daemon with the SM clock locked at $lock MHz; $1: more config lines
  printf 'measurement:\n  clocks: {%s: "%s"}\n%s' "$gtype" "$lock" "${1:-}" > /tmp/kb-gpu.yaml
  start /tmp/kb-gpu.yaml
  sleep 15 # the canary and the standbys settle
}
fake_slurm() { # $1: a directory: sbatch, squeue and scancel standing in for Slurm's
  # One job at a time on this machine's GPU, as Slurm's GRES allocation
  # would have it, with SLURM_JOB_GPUS naming its /dev/nvidiaN as slurmd
  # does. Everything else (the coordinator, `kernelbox node run-job`,
  # discovery, the clock lock, the sandbox) is the real thing.
  local d=$1 minor
  minor=${MINOR:-$(nvidia-smi -q | awk -F: '/Minor Number/{gsub(/ /,"",$2); print $2; exit}')}
  mkdir -p "$d/state"
  cat > "$d/sbatch" <<SH
#!/bin/sh
d=$d/state
id=\$(( \$(cat \$d/next 2>/dev/null || echo 0) + 1 )); echo \$id > \$d/next
o=/dev/null; for a in "\$@"; do case \$a in --output=*) o=\${a#--output=};; esac; done
o=\$(echo "\$o" | sed "s/%j/\$id/g")
cat > \$d/\$id.sh; echo "\$@" > \$d/\$id.args
SLURM_JOB_ID=\$id SLURM_JOB_GPUS=$minor SLURMD_NODENAME=\$(hostname) CUDA_VISIBLE_DEVICES=0 setsid flock \$d/gpu.lock sh \$d/\$id.sh >"\$o" 2>&1 </dev/null &
echo \$! > \$d/\$id.pid; echo \$id
SH
  # squeue --jobs=a,b,... --format=%i|%T|%r|%N, as the coordinator asks.
  cat > "$d/squeue" <<SH
#!/bin/sh
for a in "\$@"; do case \$a in --jobs=*) j=\${a#--jobs=};; esac; done
[ -n "\${j:-}" ] || exit 0
for id in \$(echo "\$j" | tr , ' '); do
  if kill -0 \$(cat $d/state/\$id.pid) 2>/dev/null; then echo "\$id|RUNNING|None|\$(hostname)"; else echo "\$id|COMPLETED|None|\$(hostname)"; fi
done
SH
  cat > "$d/scancel" <<SH
#!/bin/sh
# The job's process group (setsid made it): flock passes no signal on.
for j in "\$@"; do kill -TERM -- -\$(cat $d/state/\$j.pid) 2>/dev/null; done
SH
  chmod +x "$d/sbatch" "$d/squeue" "$d/scancel"
}
coordinator() { # $1: the fake Slurm's directory, $2: how nodes reach the coordinator (PORT: its port)
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  printf 'data: %s\npython: %s\nmeasurement:\n  clocks: {%s: "%s"}\n' "$(mktemp -d)" "${PY:-$(command -v python3)}" "$gtype" "$lock" > /tmp/kb-node.yaml
  cat > /tmp/kb-coord.yaml <<Y
executor: slurm
slurm:
  ${2//PORT/$port}
  bin: $1
  command: [$kb]
  node_config: /tmp/kb-node.yaml
  poll: 500ms
  output: $1/state/job-%j.out
  pools:
    - {gres: gpu, gpu_type: $gtype, gpus: 1}
Y
  LISTEN=127.0.0.1:$port start /tmp/kb-coord.yaml
}
