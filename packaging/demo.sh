#!/bin/sh
# make demo: the whole box on this machine, end to end, as a newcomer would
# drive it by hand (README "A first competition"). It starts the daemon on a
# temporary data directory, creates a contestant, submits the bundled
# vectoradd solutions (correct and wrong) in test and leaderboard mode
# through the CLI, prints the results and the ranking, and stops the daemon.
set -eu

KB=${KB:-./bin/kernelbox}
DATA=$(mktemp -d /tmp/kernelbox-demo.XXXXXX)
LOG="$DATA/serve.log"
export KERNELBOX_CLIENT_CONFIG="$DATA/client.json" # leave ~/.config alone

sandbox_flag=""
if [ "$(id -u)" != 0 ]; then
	echo "demo: not root, so the daemon runs submissions WITHOUT the sandbox (run as root for the real thing)" >&2
	sandbox_flag="--no-sandbox"
fi

"$KB" serve --data "$DATA" --listen 127.0.0.1:0 --cpu-slots 2 $sandbox_flag >"$DATA/serve.out" 2>"$LOG" &
PID=$!
cleanup() {
	kill -TERM "$PID" 2>/dev/null || true
	wait "$PID" 2>/dev/null || true
	rm -rf "$DATA"
}
trap cleanup EXIT INT TERM

# The daemon prints "serving on ADDR" once it listens.
i=0
until grep -q "serving on" "$DATA/serve.out" 2>/dev/null; do
	i=$((i + 1))
	if [ "$i" -gt 600 ] || ! kill -0 "$PID" 2>/dev/null; then
		echo "demo: the daemon did not start; its log:" >&2
		cat "$LOG" >&2
		exit 1
	fi
	sleep 0.1
done
ADDR=$(sed -n 's/.* serving on \([^ ]*\).*/\1/p' "$DATA/serve.out")
export KERNELBOX_SERVER="http://$ADDR"
ADMIN=$(cat "$DATA/admin-token")

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { step "$@"; "$@"; }
# expect_fail runs a command that must exit 1 (a failed submission).
expect_fail() {
	step "$@"
	rc=0
	"$@" || rc=$?
	if [ "$rc" != 1 ]; then echo "demo: expected exit 1 (failed submission), got $rc" >&2; exit 1; fi
	echo "(exit 1: the submission failed, as it should)"
}

echo "kernelbox daemon on $KERNELBOX_SERVER, data in $DATA"
step "kernelbox leaderboards"
KERNELBOX_TOKEN=$ADMIN "$KB" leaderboards
step "kernelbox admin users add alice"
ALICE=$(KERNELBOX_TOKEN=$ADMIN "$KB" admin users add alice)
echo "$ALICE"
export KERNELBOX_TOKEN="$ALICE"

LIB=problems/library/vectoradd/solutions
run "$KB" submit "$LIB/correct/chunked_add.py" --leaderboard vectoradd --gpu cpu --mode test
expect_fail "$KB" submit "$LIB/wrong/drops_tail.py" --leaderboard vectoradd --gpu cpu --mode test
run "$KB" submit "$LIB/correct/chunked_add.py" --leaderboard vectoradd --gpu cpu --mode leaderboard
expect_fail "$KB" submit "$LIB/wrong/fp32_output.py" --leaderboard vectoradd --gpu cpu --mode leaderboard
run "$KB" leaderboard vectoradd --gpu cpu
run "$KB" submissions list
run "$KB" queue

step "stopping the daemon (SIGTERM: graceful)"
kill -TERM "$PID"
wait "$PID"
trap - EXIT INT TERM
rm -rf "$DATA"
echo "demo: done"
