#!/usr/bin/env bash
# The box as the packaged unit runs it, on the GPU machine, in one call of
# the device tool (issue 38): `kernelbox serve` under UMask=0077 with the
# sandbox on, its canary on the GPU type and the CPU slot, a correct and a
# wrong vectoradd on the GPU through the CLI, a ranked run, /readyz and
# /metrics; then a daemon whose harness Python the sandbox cannot see,
# which must say so; then the Go tests of the issue on cgroup v2 (this
# machine's; CI's is v1). Needs, built here with -tags seccomp and packed
# by the caller: .carry/kernelbox.xz, .carry/appliance.test.xz,
# .carry/sandbox.test.xz, .carry/lib/libseccomp.so.2 (see
# docs/performance.md). TESTS picks the appliance tests (a -test.run
# pattern), SANDBOX_TESTS the sandbox ones.
set -u
export PYTHONUNBUFFERED=1
out=${OUT:-gpu-out}; mkdir -p "$out"
bin=$(mktemp -d)
for f in kernelbox appliance.test sandbox.test; do
	xz -dc ".carry/$f.xz" >"$bin/$f" && chmod +x "$bin/$f"
done
ldd "$bin/kernelbox" | grep -q "libseccomp.so.2 => not found" && export LD_LIBRARY_PATH=$PWD/.carry/lib
kb=$bin/kernelbox
step() { echo; echo "== $*"; }
health() { curl -s "$KERNELBOX_SERVER/api/health"; }
serve() { # $1: data dir, $2: config file; under the unit's umask
	(umask 0077; exec "$kb" serve --config "$2" --data "$1" --listen 127.0.0.1:0 --cpu-slots 1 --log-format json \
		>"$1.out" 2>"$1.log") &
	pid=$!
	for _ in $(seq 300); do grep -q "serving on" "$1.out" 2>/dev/null && break; sleep 0.2; done
	export KERNELBOX_SERVER=http://$(sed -n 's/.* serving on \([^ ]*\).*/\1/p' "$1.out")
	export KERNELBOX_TOKEN=$(cat "$1/admin-token")
	export KERNELBOX_CLIENT_CONFIG=$1.client.json
}
canaries_done() { # waits until no canary is pending ($1 seconds, 180 unless given)
	for _ in $(seq "${1:-180}"); do
		health | python3 -c 'import json,sys; c=json.load(sys.stdin).get("canaries") or []; sys.exit(0 if c and not any(x.get("pending") for x in c) else 1)' && return 0
		sleep 1
	done
	return 1
}
{
	step "machine"
	nvidia-smi -L; stat -fc %T /sys/fs/cgroup; cat /proc/self/cgroup; umask
	step "doctor (it sets the unit's umask itself)"
	(umask 0022; time "$kb" doctor) 2>&1 | tee "$out/doctor.txt"

	step "the daemon under umask 0077, sandbox on"
	data=$(mktemp -d)/data
	: >/tmp/kb.yaml
	t0=$(date +%s.%N)
	serve "$data" /tmp/kb.yaml
	canaries_done || echo "canaries still pending after 3 minutes"
	echo "canaries done $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s after the start"
	health | python3 -m json.tool
	echo "--- /readyz"; curl -s -w '%{http_code}\n' "$KERNELBOX_SERVER/readyz"
	echo "--- /metrics (canary, ready)"; curl -s "$KERNELBOX_SERVER/metrics" | grep -E '^kernelbox_(canary|ready)'
	gtype=$(health | python3 -c 'import json,sys; print([g for g in json.load(sys.stdin)["gpus"] if g != "cpu"][0])')
	echo "GPU type: $gtype"
	lib=problems/library/vectoradd
	for c in "test templates/triton.py" "test solutions/wrong/drops_tail.py" "leaderboard templates/triton.py"; do
		set -- $c
		b=$(date +%s.%N)
		timeout 150 "$kb" submit "$lib/$2" -l vectoradd -g "$gtype" -m "$1" >"$out/submit.txt" 2>&1
		rc=$?
		echo "--- $1 $2 on $gtype: exit $rc in $(python3 -c "print(round($(date +%s.%N)-$b,1))") s"
		grep -E 'PASSED|FAILED|ERROR|score|phase' "$out/submit.txt" | head -8
	done
	"$kb" gpus
	"$kb" submissions list
	echo "--- data directory modes"; stat -c '%a %U %n' "$data" "$data/kernelbox.db" "$data/admin-token"
	kill -TERM $pid; wait $pid; echo "daemon stopped: exit $?"

	step "a harness Python the sandbox cannot see: the canary must fail and say why"
	hidden=$(mktemp -d)
	py=$(sed -n 's/.*harness Python *\([^ ]*\) .*/\1/p' "$out/doctor.txt") # as doctor found it
	# Not resolved: a virtual environment's interpreter finds its
	# pyvenv.cfg through the link (resolved, it is the base Python, without
	# torch, and the daemon's own probe refuses it before any canary).
	ln -s "$py" "$hidden/python3"
	printf 'python: %s\n' "$hidden/python3" >/tmp/kb-broken.yaml
	data2=$(mktemp -d)/data
	serve "$data2" /tmp/kb-broken.yaml
	canaries_done 60 || echo "no canary ended within a minute"
	echo "--- /readyz"; curl -s -w '%{http_code}\n' "$KERNELBOX_SERVER/readyz"
	curl -s "$KERNELBOX_SERVER/metrics" | grep -E '^kernelbox_(canary_ok|ready)'
	kill -TERM $pid; wait $pid

	step "Go tests on this machine (cgroup v2)"
	(cd appliance && "$bin/appliance.test" -test.run "${TESTS:-TestDaemon_UnitUmask|TestCanary}" -test.v -test.timeout 8m 2>&1 |
		grep -E '^(--- |PASS|FAIL|ok)|_test.go:')
	(cd sandbox && "$bin/sandbox.test" -test.run "${SANDBOX_TESTS:-TestRuntime}" -test.v -test.timeout 5m 2>&1 |
		grep -E '^(--- |PASS|FAIL|ok)|_test.go:')
} 2>&1 | tee "$out/service.txt"
