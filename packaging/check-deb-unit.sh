#!/usr/bin/env bash
# Installs a built kernelbox .deb into a scratch root and runs the daemon
# as its systemd unit would, with the sandbox on (check-deb.sh runs it;
# make deb/check runs that). It tests the shipped artefact under the
# shipped conditions: a daemon started by hand, with the sandbox off or
# another umask, passed where the unit's daemon failed every sandboxed
# run (issue 38).
#
#  1. The scratch root is an overlay of this host's root (its packages:
#     python3-torch, libseccomp2, ...) with the writes on a tmpfs, in
#     private mount and network namespaces: nothing is written to this
#     host's /usr, /etc or /var/lib/kernelbox, and 127.0.0.1:8470 is the
#     namespace's own. `dpkg -i` installs the package there, running its
#     postinst (the kernelbox user, kernelbox doctor).
#  2. The unit is read from the installed kernelbox.service, not from a
#     copy in this script: ExecStart, User, UMask, Environment,
#     StateDirectory/ConfigurationDirectory and their modes, PrivateTmp,
#     ProtectSystem, ProtectHome, KillSignal, TimeoutStopSec. A key this
#     script does not know fails the check, so that a new line in the
#     unit is either emulated here or listed as not emulated, with why.
#  3. The daemon starts as systemd would start it: in a mount namespace
#     of its own, pivoted into the scratch root (libcontainer needs a
#     real root, not a chroot), with the directories, mounts, umask,
#     user and environment the unit names, stdin on /dev/null. The
#     packaged config is used as shipped, but for one line (below).
#  4. Through the packaged CLI: a contestant, one correct CPU submission
#     that must pass, a wrong one that must fail; /readyz, /metrics and
#     /download/; `kernelbox admin backup` over the unix socket; the
#     modes of the data directory's files; a stop by KillSignal within
#     TimeoutStopSec; `kernelbox admin restore` of the backup under an
#     operator's umask, which must leave the files 0600.
#
# What systemd would do that is not emulated (no systemd runs here, and
# CI has none): docs/packaging.md lists it.
#
# Usage: check-deb-unit.sh dist/kernelbox_VERSION_ARCH.deb (as root,
# with python3-torch installed: make setup).
set -euo pipefail

fail() {
	echo "check-deb: $*" >&2
	exit 1
}
ok() { echo "check-deb: ok: $*"; }
self=$(realpath "$0")

# The one change to the packaged config: the runs' parent cgroup. The
# cgroup tree is this host's, shared with any other kernelbox daemon or
# test here, and a daemon removes the empty run cgroups under its parent
# that it does not know (sandbox CleanStale).
scratch_conf() { printf '\n# check-deb-unit.sh: a cgroup of its own on a shared host.\ncgroup_parent: kernelbox-check-deb-%s\n' "$1"; }

# --- the unit -------------------------------------------------------------
# parse_unit reads the [Service] section of the unit file $1 into unit_*
# variables, and fails on any key it does not emulate or knowingly skip.
parse_unit() {
	local file=$1 section="" line key val
	unit_exec="" unit_user=root unit_umask=0022 unit_env=() unit_type=simple
	unit_state="" unit_state_mode=0755 unit_conf="" unit_conf_mode=0755
	unit_private_tmp=no unit_protect_system=no unit_protect_home=no
	unit_kill_signal=SIGTERM unit_kill_mode=control-group unit_timeout_stop=90
	unit_skipped=()
	while IFS= read -r line || [ -n "$line" ]; do
		case $line in
		'' | '#'* | ';'*) continue ;;
		'['*']')
			section=${line:1:${#line}-2}
			continue
			;;
		*\\) fail "unit: a continued line is not emulated: $line" ;;
		*=*) ;;
		*) fail "unit: not a key=value line: $line" ;;
		esac
		[ "$section" = Service ] || continue
		key=${line%%=*}
		val=${line#*=}
		case $key in
		Type)
			case $val in simple | exec) unit_type=$val ;; *) fail "unit: Type=$val is not emulated (simple and exec are)" ;; esac
			;;
		ExecStart)
			[ -z "$unit_exec" ] || fail "unit: more than one ExecStart"
			# No prefixes (-@:+!), quotes, specifiers, variables or escapes:
			# then systemd splits the line on spaces, as read does here.
			case $val in [-@:+!]* | *[\"\'%\$\\]*) fail "unit: ExecStart=$val uses syntax this check does not emulate" ;; esac
			unit_exec=$val
			;;
		User) unit_user=$val ;;
		UMask)
			[[ $val =~ ^0?[0-7]{3}$ ]] || fail "unit: UMask=$val"
			unit_umask=$val
			;;
		Environment)
			case $val in *[%\$\\]*) fail "unit: Environment=$val uses syntax this check does not emulate" ;; esac
			local -a words
			# systemd's quoting, as far as xargs splits it the same way.
			mapfile -t words < <(xargs -n1 printf '%s\n' <<<"$val")
			for w in "${words[@]}"; do
				[[ $w == [A-Za-z_]*=* ]] || fail "unit: Environment=$val: $w is not NAME=VALUE"
				unit_env+=("$w")
			done
			;;
		StateDirectory)
			[[ $val =~ ^[A-Za-z0-9._-]+$ ]] || fail "unit: StateDirectory=$val: one plain name is emulated"
			unit_state=$val
			;;
		StateDirectoryMode) unit_state_mode=$val ;;
		ConfigurationDirectory)
			[[ $val =~ ^[A-Za-z0-9._-]+$ ]] || fail "unit: ConfigurationDirectory=$val: one plain name is emulated"
			unit_conf=$val
			;;
		ConfigurationDirectoryMode) unit_conf_mode=$val ;;
		PrivateTmp)
			case $val in yes | true | no | false) unit_private_tmp=$val ;; *) fail "unit: PrivateTmp=$val is not emulated" ;; esac
			;;
		ProtectSystem)
			case $val in yes | true | full | no | false) unit_protect_system=$val ;; *) fail "unit: ProtectSystem=$val is not emulated (yes and full are)" ;; esac
			;;
		ProtectHome)
			case $val in read-only | no | false) unit_protect_home=$val ;; *) fail "unit: ProtectHome=$val is not emulated (read-only is)" ;; esac
			;;
		KillSignal) unit_kill_signal=$val ;;
		KillMode)
			# mixed: the stop signal goes to the main process alone, as
			# here; what is left after the timeout would get SIGKILL.
			[ "$val" = mixed ] || fail "unit: KillMode=$val is not emulated (mixed is)"
			unit_kill_mode=$val
			;;
		TimeoutStopSec)
			[[ $val =~ ^([0-9]+)s?$ ]] || fail "unit: TimeoutStopSec=$val: seconds are emulated"
			unit_timeout_stop=${BASH_REMATCH[1]}
			;;
		# Known and not emulated, and why (docs/packaging.md):
		# Delegate: no systemd makes (and marks delegated) the unit's
		# cgroup here, so the daemon takes its fallback parent; the check
		# names one of its own (cgroup_parent, below). Under systemd with
		# cgroup v2 the runs go under the unit's cgroup instead: not
		# exercised here (docs/packaging.md).
		# Restart, RestartSec: nothing here crashes on purpose.
		Delegate | Restart | RestartSec) unit_skipped+=("$key=$val") ;;
		*) fail "unit: $key=$val is neither emulated nor known to this check: teach packaging/check-deb-unit.sh" ;;
		esac
	done <"$file"
	[ -n "$unit_exec" ] || fail "unit: no ExecStart"
}

# --- the daemon's side: a service manager's start -------------------------
# start ROOT: run in a mount namespace of the daemon's own (unshare),
# become the unit's service inside the scratch root, exec ExecStart.
start() {
	local root=$1
	parse_unit "$root/lib/systemd/system/kernelbox.service"
	local -a argv
	read -ra argv <<<"$unit_exec"
	# Directories, as systemd makes them before the start: a missing
	# one is made with the unit's mode; an existing one keeps its own
	# (systemd only logs a notice).
	if [ -n "$unit_state" ] && [ ! -d "$root/var/lib/$unit_state" ]; then
		mkdir -m "$unit_state_mode" "$root/var/lib/$unit_state"
	fi
	if [ -n "$unit_conf" ] && [ ! -d "$root/etc/$unit_conf" ]; then
		mkdir -m "$unit_conf_mode" "$root/etc/$unit_conf"
	fi
	# A real root for the daemon: libcontainer pivots each run's root,
	# which fails inside a chroot.
	cd "$root"
	mkdir -p .check-deb-oldroot
	pivot_root . .check-deb-oldroot
	cd /
	case $unit_private_tmp in yes | true)
		mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
		mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /var/tmp
		;;
	esac
	local -a ro=()
	case $unit_protect_system in yes | true) ro+=(/usr /boot /efi) ;; full) ro+=(/usr /boot /efi /etc) ;; esac
	[ "$unit_protect_home" = read-only ] && ro+=(/home /root /run/user)
	for d in "${ro[@]}"; do
		[ -d "$d" ] || continue
		mount --bind "$d" "$d"
		mount -o remount,bind,ro "$d"
	done
	umount -l /.check-deb-oldroot
	rmdir /.check-deb-oldroot
	# The environment systemd gives a system service: its PATH, the
	# user's identity, the directories', and the unit's Environment.
	local home shell group
	home=$(getent passwd "$unit_user" | cut -d: -f6)
	shell=$(getent passwd "$unit_user" | cut -d: -f7)
	local -a env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
		"HOME=$home" "USER=$unit_user" "LOGNAME=$unit_user" "SHELL=$shell")
	[ -z "$unit_state" ] || env+=("STATE_DIRECTORY=/var/lib/$unit_state")
	[ -z "$unit_conf" ] || env+=("CONFIGURATION_DIRECTORY=/etc/$unit_conf")
	env+=("${unit_env[@]}")
	# systemd's default open-files limit for services: 1024, and 524288
	# at most for the hard limit (which a container may hold lower).
	ulimit -Sn 1024
	[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -le 524288 ] || ulimit -Hn 524288
	umask "$unit_umask"
	local -a as_user=()
	if [ "$unit_user" != root ]; then
		group=$(id -gn "$unit_user")
		as_user=(setpriv "--reuid=$unit_user" "--regid=$group" --init-groups --)
	fi
	exec "${as_user[@]}" env -i "${env[@]}" "${argv[@]}" </dev/null
}

# --- the check's side -----------------------------------------------------
# check DEB TMP: in private mount and network namespaces (unshare), with
# TMP a directory of this host's for the logs.
check() {
	local deb=$1 tmp=$2 here
	here=$(dirname "$self")
	ip link set lo up

	# The scratch root: this host's root, read-only below, a tmpfs above.
	local fs=$tmp/fs root=$tmp/fs/root
	mkdir "$fs"
	mount -t tmpfs -o mode=0755 check-deb "$fs"
	mkdir "$fs/upper" "$fs/work" "$root"
	mount -t overlay check-deb -o "lowerdir=/,upperdir=$fs/upper,workdir=$fs/work" "$root"
	for d in dev proc sys; do
		mount --rbind "/$d" "$root/$d"
	done
	mountpoint -q "$root" || fail "the scratch root is not mounted"
	local stage=$root/srv/check-deb
	mkdir -p "$stage"
	cp "$deb" "$stage/kernelbox.deb"
	cp "$here/../problems/library/vectoradd/solutions/correct/chunked_add.py" "$stage/correct.py"
	cp "$here/../problems/library/vectoradd/solutions/wrong/drops_tail.py" "$stage/wrong.py"
	in_root() { chroot "$root" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

	# --- install --------------------------------------------------------
	local t0=$SECONDS
	if ! in_root env DEBIAN_FRONTEND=noninteractive dpkg -i /srv/check-deb/kernelbox.deb >"$tmp/dpkg.log" 2>&1; then
		cat "$tmp/dpkg.log" >&2
		fail "dpkg -i failed in the scratch root"
	fi
	# shellcheck disable=SC2016 # dpkg-query's format, not the shell's
	in_root dpkg-query -W -f='${Status}' kernelbox | grep -qx "install ok installed" || fail "dpkg does not say kernelbox is installed"
	in_root getent passwd kernelbox >/dev/null || fail "the postinst did not add the kernelbox user"
	for doc in packaging operations configuration backup security integrity; do
		[ -s "$root/usr/share/doc/kernelbox/$doc.md" ] || fail "the package lacks /usr/share/doc/kernelbox/$doc.md"
	done
	ok "install: dpkg -i in a scratch root in $((SECONDS - t0))s (postinst and kernelbox doctor ran; the kernelbox user exists)"

	# --- the unit, read from the installed file -------------------------
	local unit=$root/lib/systemd/system/kernelbox.service
	parse_unit "$unit"
	[ "$unit_exec" != "${unit_exec#/usr/bin/kernelbox serve }" ] || fail "unit: ExecStart=$unit_exec does not run the packaged kernelbox serve"
	[ "$unit_state" = kernelbox ] || fail "unit: StateDirectory=$unit_state, the config's data is /var/lib/kernelbox"
	ok "unit: Type=$unit_type ExecStart=$unit_exec User=$unit_user UMask=$unit_umask StateDirectory=$unit_state ($unit_state_mode)" \
		"ConfigurationDirectory=$unit_conf ($unit_conf_mode) PrivateTmp=$unit_private_tmp ProtectSystem=$unit_protect_system" \
		"ProtectHome=$unit_protect_home Environment=[${unit_env[*]}] KillMode=$unit_kill_mode KillSignal=$unit_kill_signal" \
		"TimeoutStopSec=${unit_timeout_stop}s; not emulated: ${unit_skipped[*]}"

	scratch_conf $$ >>"$root/etc/kernelbox/config.yaml"
	cgroup=kernelbox-check-deb-$$ # global: the EXIT trap reads it
	in_root kernelbox config check /etc/kernelbox/config.yaml >/dev/null || fail "kernelbox config check rejects the installed config"

	# --- start ----------------------------------------------------------
	local pid
	t0=$SECONDS
	unshare --mount --propagation private -- "$self" --start "$root" >"$tmp/journal.out" 2>"$tmp/journal.err" &
	pid=$!
	# The runs' parent cgroup, once the daemon is gone: in the unified
	# tree and in each v1 hierarchy (rmdir takes only empty ones).
	remove_cgroup() {
		for cg in "/sys/fs/cgroup/$cgroup" /sys/fs/cgroup/*/"$cgroup"; do
			[ -d "$cg" ] || continue
			find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
		done
	}
	stop_daemon() {
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		remove_cgroup
	}
	trap stop_daemon EXIT
	journal() {
		echo "--- the daemon's stdout:" >&2
		cat "$tmp/journal.out" >&2
		echo "--- the daemon's log (last 60 lines):" >&2
		tail -n 60 "$tmp/journal.err" >&2
	}
	die() {
		journal
		fail "$@"
	}
	for ((i = 0; i < 1200; i++)); do
		grep -q " serving on " "$tmp/journal.out" && break
		kill -0 "$pid" 2>/dev/null || die "the daemon exited before it served"
		sleep 0.1
	done
	grep -q " serving on " "$tmp/journal.out" || die "the daemon did not say it serves within 120s"
	local addr
	addr=$(sed -n 's/.* serving on \([^ ]*\).*/\1/p' "$tmp/journal.out")
	[ "$addr" = 127.0.0.1:8470 ] || die "the daemon serves on $addr; the packaged config says 127.0.0.1:8470"
	local data=$root/var/lib/kernelbox
	ok "start: serving on $addr after $((SECONDS - t0))s, as the unit starts it (sandbox on: the config's default)"

	# The emulation took: the daemon's umask and mounts, as the kernel
	# reports them for its process.
	local got got_umask
	got_umask=$(sed -n 's/^Umask:[[:space:]]*//p' "/proc/$pid/status")
	[ "$((8#$got_umask))" = "$((8#$unit_umask))" ] || die "the daemon's umask is $got_umask, the unit says $unit_umask"
	local -a want_ro=()
	case $unit_protect_system in yes | true) want_ro+=(/usr) ;; full) want_ro+=(/usr /etc) ;; esac
	[ "$unit_protect_home" = read-only ] && want_ro+=(/root)
	for d in "${want_ro[@]}"; do
		got=$(findmnt --task "$pid" -n -o OPTIONS --mountpoint "$d") || die "the daemon has no mount on $d"
		[[ $got == ro,* ]] || die "the daemon's $d is mounted $got, not read-only"
	done
	case $unit_private_tmp in yes | true)
		[ "$(findmnt --task "$pid" -n -o FSTYPE --mountpoint /tmp)" = tmpfs ] || die "the daemon's /tmp is not its own"
		;;
	esac
	ok "the daemon's process: umask $got_umask, read-only ${want_ro[*]}, /tmp its own"

	# The files the daemon made under the unit's umask.
	[ "$(stat -c %a "$data")" = "${unit_state_mode#0}" ] || die "the data directory is $(stat -c %a "$data"), the unit says $unit_state_mode"
	for f in admin-token kernelbox.db; do
		[ "$(stat -c %a "$data/$f")" = 600 ] || die "$f is $(stat -c %a "$data/$f"), want 600"
	done
	[ "$(stat -c %a "$data/kernelbox.sock")" = 660 ] || die "kernelbox.sock is $(stat -c %a "$data/kernelbox.sock"), want 660"
	ok "modes: /var/lib/kernelbox $(stat -c %a "$data"), admin-token and kernelbox.db 600, kernelbox.sock 660"

	local server=http://$addr admin ready
	admin=$(cat "$data/admin-token")
	# Ready only once the canary (a bundled problem run the contestants'
	# way, in the sandbox) has passed on the CPU slot: 503 until then.
	local i
	for ((i = 0; i < 180; i++)); do
		ready=$(curl -sS -o "$tmp/readyz" -w '%{http_code}' "$server/readyz") || die "GET /readyz"
		if [ "$ready" != 503 ] || ! grep -q "has not finished yet" "$tmp/readyz"; then
			break
		fi
		sleep 1
	done
	[ "$ready $(cat "$tmp/readyz")" = "200 ready" ] || die "GET /readyz: $ready $(cat "$tmp/readyz")"
	curl -sS -o "$tmp/canary-metrics" "$server/metrics" || die "GET /metrics"
	grep -qx 'kernelbox_canary_ok{gpu_type="cpu"} 1' "$tmp/canary-metrics" || die "/metrics: the cpu canary is not 1"
	ok "/readyz: 200 ready after the canary passed in $((i))s; kernelbox_canary_ok{gpu_type=\"cpu\"} 1"

	# --- submissions through the packaged CLI ---------------------------
	kb() { in_root KERNELBOX_SERVER="$server" KERNELBOX_CLIENT_CONFIG=/srv/check-deb/client.json "$@"; }
	local alice out rc
	alice=$(kb KERNELBOX_TOKEN="$admin" kernelbox admin users add alice) || die "kernelbox admin users add alice"
	t0=$SECONDS
	rc=0
	out=$(kb KERNELBOX_TOKEN="$alice" timeout 600 kernelbox submit /srv/check-deb/correct.py --leaderboard vectoradd --gpu cpu --mode test 2>&1) || rc=$?
	if [ "$rc" != 0 ] || ! grep -q "^PASSED: submission" <<<"$out"; then
		echo "$out" >&2
		die "the correct vectoradd submission did not pass (exit $rc)"
	fi
	ok "submit: vectoradd correct/chunked_add.py passed in the sandbox ($((SECONDS - t0))s)"
	t0=$SECONDS
	rc=0
	out=$(kb KERNELBOX_TOKEN="$alice" timeout 600 kernelbox submit /srv/check-deb/wrong.py --leaderboard vectoradd --gpu cpu --mode test 2>&1) || rc=$?
	if [ "$rc" != 1 ] || ! grep -q "^FAILED: submission" <<<"$out"; then
		echo "$out" >&2
		die "the wrong vectoradd submission did not fail as a wrong answer (exit $rc, want 1 and FAILED)"
	fi
	ok "submit: vectoradd wrong/drops_tail.py failed, as it should ($((SECONDS - t0))s): $(grep "^FAILED" <<<"$out")"

	# --- metrics, downloads ---------------------------------------------
	curl -fsS "$server/metrics" >"$tmp/metrics" || die "GET /metrics"
	for want in 'kernelbox_ready 1' \
		'kernelbox_runs_total{gpu_type="cpu",mode="test",outcome="passed"} 1' \
		'kernelbox_runs_total{gpu_type="cpu",mode="test",outcome="failed"} 1' \
		'kernelbox_queue_jobs{class="test",gpu_type="cpu",state="queued"} 0'; do
		grep -qxF "$want" "$tmp/metrics" || die "/metrics lacks the line: $want"
	done
	# Runs went through the sandbox: its verdicts are counted only there
	# (a daemon with the sandbox off has none).
	local sandboxed
	sandboxed=$(sed -n 's/^kernelbox_sandbox_verdicts_total{verdict="ok"} \([0-9]*\)$/\1/p' "$tmp/metrics")
	[ "${sandboxed:-0}" -ge 1 ] || die "/metrics counts no sandboxed process that ended ok: $(grep '^kernelbox_sandbox_verdicts_total' "$tmp/metrics")"
	! grep -q '^kernelbox_sandbox_verdicts_total{verdict="sandbox_error"} [1-9]' "$tmp/metrics" || die "/metrics counts sandbox errors"
	ok "/metrics: ready, one run passed and one failed on cpu, no job queued, $sandboxed sandboxed processes ended ok, no sandbox error"
	curl -fsS "$server/download/" >"$tmp/download.html" || die "GET /download/"
	grep -q 'href="kernelbox-linux-amd64"' "$tmp/download.html" || die "GET /download/ does not list the packaged clients"
	ok "/download/: lists the packaged clients"

	# --- backup over the unix socket ------------------------------------
	out=$(kb KERNELBOX_TOKEN="$admin" KERNELBOX_SERVER=unix:/var/lib/kernelbox/kernelbox.sock \
		kernelbox admin backup /srv/check-deb/backup.tar.gz 2>&1) || {
		echo "$out" >&2
		die "kernelbox admin backup over unix:/var/lib/kernelbox/kernelbox.sock"
	}
	grep -q "every checksum verified" <<<"$out" || die "admin backup: $out"
	[ "$(stat -c %a "$stage/backup.tar.gz")" = 600 ] || die "the backup is $(stat -c %a "$stage/backup.tar.gz"), want 600"
	ok "admin backup over unix:/var/lib/kernelbox/kernelbox.sock: $(grep -c . <<<"$out") lines, the file 600"

	# --- stop, as systemctl stop would ----------------------------------
	t0=$SECONDS
	kill "-${unit_kill_signal#SIG}" "$pid"
	for ((i = 0; i < unit_timeout_stop * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$pid" 2>/dev/null && die "the daemon did not stop within TimeoutStopSec=${unit_timeout_stop}s of $unit_kill_signal"
	rc=0
	wait "$pid" || rc=$?
	trap remove_cgroup EXIT
	[ "$rc" = 0 ] || die "the daemon exited $rc on $unit_kill_signal"
	ok "stop: $unit_kill_signal to the main process; it exited 0 in $((SECONDS - t0))s (TimeoutStopSec=${unit_timeout_stop}s)"

	# --- restore, as docs/backup.md says, under an operator's umask ------
	out=$(in_root sh -c 'umask 022 && kernelbox admin restore /srv/check-deb/backup.tar.gz --data /var/lib/kernelbox' 2>&1) || {
		echo "$out" >&2
		fail "kernelbox admin restore into the stopped daemon's directory"
	}
	for f in admin-token kernelbox.db; do
		[ "$(stat -c %a "$data/$f")" = 600 ] || fail "after the restore (umask 022) $f is $(stat -c %a "$data/$f"), want 600"
	done
	ok "admin restore under umask 022: admin-token and kernelbox.db 600"
}

case ${1:-} in
--start) start "$2" ;;
--check) check "$2" "$3" ;;
*)
	deb=${1:?usage: check-deb-unit.sh dist/kernelbox_VERSION_ARCH.deb}
	[ -f "$deb" ] || fail "no $deb: run make deb"
	[ "$(id -u)" -eq 0 ] || fail "installing and running the package as its unit would needs root (mounts, the sandbox)"
	# The scratch root starts from this host's files: a host where
	# kernelbox is installed would lend it its data and config.
	if dpkg-query -W -f='${Status}' kernelbox 2>/dev/null | grep -q installed || [ -e /var/lib/kernelbox ] || [ -e /etc/kernelbox ]; then
		fail "kernelbox is installed on this host (or /var/lib/kernelbox or /etc/kernelbox exists): run this check on a build machine or in CI"
	fi
	/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "the CPU backend needs /usr/bin/python3 with torch: make setup"
	tmp=$(mktemp -d /tmp/kernelbox-check-deb-unit.XXXXXX)
	rc=0
	unshare --mount --net --propagation private -- "$self" --check "$(realpath "$deb")" "$tmp" || rc=$?
	rm -rf "$tmp"
	exit "$rc"
	;;
esac
