#!/usr/bin/env bash
# Issue 22's node side on a GPU (the GPU machine has no Slurm: sbatch,
# squeue and scancel are stand-ins written here that run each batch
# script at once on this machine, with SLURM_JOB_GPUS naming the GPU's
# /dev/nvidiaN, as slurmd would). Everything else is the real thing: the
# coordinator with executor: slurm hands each run to "Slurm", the batch
# script runs `kernelbox node run-job`, which fetches the run over HTTP,
# discovers the GPU Slurm named, locks its clocks, gates, samples and runs
# the harness in its sandbox, and reports to the coordinator.
# - local: the vectoradd chunked solution, leaderboard mode x$N (5), on
#   the daemon with the local executor (clocks locked at $LOCK MHz);
# - shared: the same through a coordinator whose node side reports in a
#   shared directory (slurm.shared_dir), not to its API;
# - slurm: the same through the coordinator's API and the node side;
# - modes: one test and one profile run through the node side (the
#   .ncu-rep comes back to the coordinator and is downloaded from it).
# Writes $OUT/gpu-slurm.txt and the submissions' JSON under $OUT/runs.
set -u
out=${OUT:-gpu-out}; mkdir -p "$out/runs"
source bench/gpu-lib.sh
n=${N:-5}
# GTYPE=cpu MINOR=0 SKIP_LOCAL=1 tries the script on a machine without a GPU.
gtype=${GTYPE:-$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oE '[A-Z][0-9]{2,3}' | head -1)}
minor=${MINOR:-$(nvidia-smi -q | awk -F: '/Minor Number/{gsub(/ /,"",$2); print $2; exit}')}
sol=$lib/solutions/correct/chunked_add.py
fake=$(mktemp -d); mkdir -p "$fake/state"
cat > "$fake/sbatch" <<SH
#!/bin/sh
d=$fake/state
id=\$(( \$(cat \$d/next 2>/dev/null || echo 0) + 1 )); echo \$id > \$d/next
o=/dev/null; for a in "\$@"; do case \$a in --output=*) o=\${a#--output=};; esac; done
o=\$(echo "\$o" | sed "s/%j/\$id/g")
cat > \$d/\$id.sh; echo "\$@" > \$d/\$id.args
# One job at a time on the GPU, as Slurm's GRES allocation would have it.
SLURM_JOB_ID=\$id SLURM_JOB_GPUS=$minor SLURMD_NODENAME=\$(hostname) CUDA_VISIBLE_DEVICES=0 setsid flock \$d/gpu.lock sh \$d/\$id.sh >"\$o" 2>&1 </dev/null &
echo \$! > \$d/\$id.pid; echo \$id
SH
# squeue --jobs=a,b,... --format=%i|%T|%r|%N, as the coordinator asks.
cat > "$fake/squeue" <<SH
#!/bin/sh
for a in "\$@"; do case \$a in --jobs=*) j=\${a#--jobs=};; esac; done
[ -n "\${j:-}" ] || exit 0
echo "\$(date +%s.%N) \$j" >> $fake/state/squeue.calls
for id in \$(echo "\$j" | tr , ' '); do
  if kill -0 \$(cat $fake/state/\$id.pid) 2>/dev/null; then echo "\$id|RUNNING|None|\$(hostname)"; else echo "\$id|COMPLETED|None|\$(hostname)"; fi
done
SH
cat > "$fake/scancel" <<SH
#!/bin/sh
# The job's process group (setsid made it): flock passes no signal on.
for j in "\$@"; do kill -TERM -- -\$(cat $fake/state/\$j.pid) 2>/dev/null; done
SH
chmod +x "$fake"/*
py=${PY:-$(command -v python3)}
{
echo "GPU: $gtype (/dev/nvidia$minor), clocks locked at $lock MHz on both sides; python $py"

submit_all() { # $1 tag, $2 mode
  : > "$out/runs/walls-$1.txt"
  for i in $(seq $n); do
    t0=$(date +%s.%N)
    $kb submit $sol -l vectoradd -g $gtype -m $2 --json > "$out/runs/$1-$i.json" || echo "$1 $i failed: $(head -c 300 $out/runs/$1-$i.json)"
    echo "$i $(python3 -c "print(round($(date +%s.%N)-$t0,2))")" >> "$out/runs/walls-$1.txt"
  done
  python3 - "$out/runs" "$1" <<'PY'
import json, statistics, sys
d, tag = sys.argv[1], sys.argv[2]
walls = [float(l.split()[1]) for l in open(f"{d}/walls-{tag}.txt")]
scores = []
for i in range(1, len(walls) + 1):
    try:
        j = json.load(open(f"{d}/{tag}-{i}.json"))
    except ValueError:
        continue
    if j.get("passed") and j.get("score") is not None:
        scores.append(j["score"] * 1e6)
    else:
        print("  not passed:", (j.get("reason") or "")[:300])
cv = statistics.stdev(scores) / statistics.mean(scores) * 100 if len(scores) > 1 else 0
print(f"  {tag}: walls {' '.join(f'{w:.1f}' for w in walls)} s, median {statistics.median(walls):.2f} s; "
      f"scores n={len(scores)} median {statistics.median(scores) if scores else 0:.3f} us CV {cv:.2f} %")
open(f"{d}/median-{tag}.txt", "w").write(f"{statistics.median(scores) if scores else 0} {statistics.median(walls)}\n")
PY
}

if [ -z "${SKIP_LOCAL:-}" ]; then
step "local executor"
printf 'measurement:\n  clocks: {%s: "%s"}\n' "$gtype" "$lock" > /tmp/kb-local.yaml
start /tmp/kb-local.yaml
submit_all local leaderboard
stop
fi

nodedata=$(mktemp -d)
printf 'data: %s\npython: %s\nmeasurement:\n  clocks: {%s: "%s"}\n' "$nodedata" "$py" "$gtype" "$lock" > /tmp/kb-node.yaml
# coordinator LINK: a coordinator with executor: slurm whose nodes reach
# it by LINK (a slurm.coordinator or a slurm.shared_dir line).
coordinator() {
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
link=${1//PORT/$port}
cat > /tmp/kb-coord.yaml <<Y
listen: 127.0.0.1:$port
executor: slurm
slurm:
  $link
  bin: $fake
  command: [$kb]
  node_config: /tmp/kb-node.yaml
  poll: 500ms
  output: $fake/state/job-%j.out
  pools:
    - {gres: gpu, gpu_type: $gtype, gpus: 1}
Y
data=$(mktemp -d); export KERNELBOX_CLIENT_CONFIG=$data/client.json
$kb serve --config /tmp/kb-coord.yaml --data "$data" >"$data/out" 2>"$data/log" &
pid=$!
for i in $(seq 300); do grep -q "serving on" "$data/out" 2>/dev/null && break; sleep 0.2; done
export KERNELBOX_SERVER=http://127.0.0.1:$port KERNELBOX_TOKEN=$(cat "$data/admin-token")
}
ratio() { # $1 tag
python3 - "$out/runs" "$1" <<'PY'
import os, sys
d, tag = sys.argv[1], sys.argv[2]
if not os.path.exists(f"{d}/median-local.txt"):
    sys.exit(0)
l = [float(x) for x in open(f"{d}/median-local.txt").read().split()]
s = [float(x) for x in open(f"{d}/median-{tag}.txt").read().split()]
if l[0] and s[0]:
    print(f"  ratio {tag}/local: score {s[0]/l[0]:.4f}, wall {s[1]/l[1]:.2f} ({s[1]-l[1]:+.2f} s)")
PY
}

step "slurm executor through a shared directory (stand-in sbatch), node side real"
shared=$(mktemp -d)
coordinator "shared_dir: $shared"
submit_all shared leaderboard
ratio shared
echo "  attempt directories left: $(ls $shared/kernelbox-* | wc -l)"
echo "  coordinator log (warnings and errors):"; grep -E "level=(WARN|ERROR)" "$data/log" | tail -20
stop

step "slurm executor through the API (stand-in sbatch), node side real"
coordinator "coordinator: http://127.0.0.1:PORT"
$kb gpus
submit_all slurm leaderboard
ratio slurm
step "a run's record through the node side"
python3 - "$KERNELBOX_SERVER" "$KERNELBOX_TOKEN" <<'PY'
import json, sys, urllib.request
srv, tok = sys.argv[1], sys.argv[2]
req = urllib.request.Request(srv + "/api/submissions?all=1", headers={"Authorization": "Bearer " + tok})
subs = json.load(urllib.request.urlopen(req))
for sid in sorted(s["id"] for s in subs):
  req = urllib.request.Request(f"{srv}/api/submissions/{sid}", headers={"Authorization": "Bearer " + tok})
  s = json.load(urllib.request.urlopen(req))
  for r in s.get("runs", []):
    info = r.get("system_info") or {}
    tel = r.get("telemetry") or {}
    print("  submission", sid, "run", r["id"], "secret" if r["secret"] else "public", r["status"], "attempts", r["attempts"],
          "| node", info.get("node"), "slurm_job", info.get("slurm_job"), "gpu", info.get("gpu_name"), info.get("gpu_uuid"),
          "clocks", info.get("clocks"), "| gate", bool(tel.get("gate")), "samples", tel.get("samples"),
          "sm MHz", tel.get("sm_clock_min_mhz"), "-", tel.get("sm_clock_max_mhz"), "throttled", tel.get("throttled"))
PY
step "test and profile modes through the node side"
$kb submit $sol -l vectoradd -g $gtype -m test --json > "$out/runs/slurm-test.json"; echo "  test exit $?: $(python3 -c "import json;d=json.load(open('$out/runs/slurm-test.json'));print('passed', d.get('passed'), len(d.get('tests') or []), 'tests')")"
$kb submit $sol -l vectoradd -g $gtype -m profile --json > "$out/runs/slurm-profile.json"; echo "  profile exit $?"
latest=$(python3 -c "import json,urllib.request as u;print(max(s['id'] for s in json.load(u.urlopen(u.Request('$KERNELBOX_SERVER/api/submissions?all=1',headers={'Authorization':'Bearer $KERNELBOX_TOKEN'})))))")
$kb submissions show "$latest" --profile "$out/slurm.ncu-rep" >/dev/null; echo "  profile of submission $latest: exit $?, $(ls -l $out/slurm.ncu-rep 2>&1 | awk '{print $5, "bytes"}')"
echo "  sbatch arguments of the last job: $(cat $fake/state/$(cat $fake/state/next).args)"
stop
echo; echo "coordinator log (warnings and errors):"; grep -E "level=(WARN|ERROR)" "$data/log" | tail -20
echo "the first job's output (the shared-directory series):"; tail -5 "$fake/state/job-1.out"
if [ -s "$fake/state/squeue.calls" ]; then
  echo "squeue calls, both series: $(wc -l < $fake/state/squeue.calls), the most jobs in one: $(awk '{print split($2, a, ",")}' $fake/state/squeue.calls | sort -n | tail -1)"
fi
echo "each job on the node: setup (config, sandbox runtime, Python probe or its kept copy, GPU discovery, clock lock), then the run to its report"
python3 - "$fake/state" <<'PY'
import glob, re, sys
from datetime import datetime
def at(line):
    return datetime.fromisoformat(re.search(r"time=(\S+)", line).group(1).replace("Z", "+00:00"))
for f in sorted(glob.glob(sys.argv[1] + "/job-*.out"), key=lambda f: int(re.search(r"job-(\d+)", f).group(1))):
    lines = open(f).read().splitlines()
    ready = [l for l in lines if "node ready" in l]
    rep = [l for l in lines if "msg=reported" in l]
    if ready and rep:
        setup = re.search(r"setup=(\S+)", ready[0]).group(1)
        print(f"  {f.rsplit('/', 1)[1]}: setup {setup}, run to report {(at(rep[0]) - at(ready[0])).total_seconds():.2f} s")
PY
} 2>&1 | tee "$out/gpu-slurm.txt"
