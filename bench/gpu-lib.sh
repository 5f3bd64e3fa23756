# Helpers of the GPU machine's scripts (sourced): the daemon with a config,
# and the spread of one solution timed 10 times through it.
ldd ./bin/kernelbox | grep -q "libseccomp.so.2 => not found" && export LD_LIBRARY_PATH=$PWD/bin/lib
kb=$PWD/bin/kernelbox
lock=${LOCK:-1500}
lib=problems/library/vectoradd
step() { echo; echo "== $*"; }
smi() { nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,clocks_event_reasons.active,temperature.gpu,power.draw --format=csv,noheader 2>&1 | tail -1; }
start() { # $1: config file
  data=$(mktemp -d); export KERNELBOX_CLIENT_CONFIG=$data/client.json
  $kb serve --config "$1" --data "$data" --listen 127.0.0.1:0 --cpu-slots 0 >"$data/out" 2>"$data/log" &
  pid=$!
  for i in $(seq 300); do grep -q "serving on" "$data/out" 2>/dev/null && break; sleep 0.2; done
  export KERNELBOX_SERVER=http://$(sed -n 's/.* serving on \([^ ]*\).*/\1/p' "$data/out")
  export KERNELBOX_TOKEN=$(cat "$data/admin-token")
}
stop() { kill -TERM $pid; wait $pid; }
start_locked() { # the daemon with the H200's clocks locked at $lock MHz
  printf 'measurement:\n  clocks: {H200: "%s"}\n' "$lock" > /tmp/kb-locked.yaml
  start /tmp/kb-locked.yaml
}
spread() { # $1: label, $2: the solution (default the chunked one)
  sol=${2:-$lib/solutions/correct/chunked_add.py}
  for i in $(seq 10); do
    $kb submit $sol -l vectoradd -g H200 -m ${MODE:-benchmark} --json > "$data/b$i.json" || echo "run $i failed: $(head -c 300 $data/b$i.json)"
  done
  mkdir -p "$out/runs"; tag=$(echo "$1 $(basename $sol .py)" | tr -c 'a-zA-Z0-9\n' '-')
  for i in $(seq 10); do cp "$data/b$i.json" "$out/runs/$tag-$i.json" 2>/dev/null; done
  step "$1: spread over 10 runs of $(basename $sol)"
  python3 - "$data" <<'PY'
import json, statistics, sys, glob
d = sys.argv[1]
per = {}
for f in sorted(glob.glob(d + "/b*.json")):
    try:
        doc = json.load(open(f))
    except Exception:
        continue
    for b in doc["benchmarks"]:
        per.setdefault(b["spec"], []).append(b["mean_ns"])
for spec, means in per.items():
    m = statistics.mean(means); cv = statistics.stdev(means) / m * 100 if len(means) > 1 else 0
    print(f"{spec}: n={len(means)} mean {m/1e3:.3f} us, CV {cv:.2f} %, min {min(means)/1e3:.3f} max {max(means)/1e3:.3f}")
PY
}
evalshow() { # $1 mode, $2 file: kernelbox eval of vectoradd, a line per phase and benchmark
  timeout 150 $kb eval -p vectoradd -m "$1" --json "$2" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print("passed", d["passed"], "|", (d.get("reason") or "")[:300])
for p in d.get("phases") or []:
    r = p.get("result") or {}
    print("  phase", p["name"], "passed", p["passed"], (p.get("reason") or "")[:300])
    x = r.get("extra") or {}
    for b in r.get("benchmarks") or []:
        i = b["index"]
        print("    ", b["spec"][:26], round(b.get("mean_ns", 0) / 1e3, 2), "us, runs", b.get("runs"),
              "tails", b.get("tails", 0), "retries", x.get(f"benchmark.{i}.retries"), "round trip ns",
              x.get(f"benchmark.{i}.round_trip"), "limit", x.get(f"benchmark.{i}.tail_limit"),
              "l2 reset", x.get(f"benchmark.{i}.l2_reset"), (b.get("error") or "")[:200])'
}
