#!/usr/bin/env bash
# Checks a built kernelbox .deb (make deb/check runs it; CI runs that):
# its control fields, its file list and conffile, the binary and config it
# ships, the systemd unit (systemd-analyze verify), the maintainer scripts
# (sh -n, shellcheck, and a run of each against stub commands), and then
# the package installed and run as its unit would run it, with the
# sandbox on (check-deb-unit.sh: dpkg -i into a scratch root, the daemon
# started with the unit's ExecStart, user, umask, environment and
# directories, a correct and a wrong submission through the packaged CLI).
#
# The first checks read the package unpacked with dpkg-deb -x into a
# temporary directory; only check-deb-unit.sh installs it, into an
# overlay of this host's root that vanishes with its mount namespace.
set -euo pipefail

deb=${1:?usage: check-deb.sh dist/kernelbox_VERSION_ARCH.deb}
[ -f "$deb" ] || { echo "check-deb: no $deb: run make deb" >&2; exit 1; }

fail() { echo "check-deb: $*" >&2; exit 1; }
ok() { echo "check-deb: ok: $*"; }

# Tools: dpkg-deb is in every Debian; systemd-analyze comes with systemd,
# which a minimal image may lack; shellcheck is in Debian's main.
need=()
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v shellcheck >/dev/null || need+=(shellcheck)
command -v curl >/dev/null || need+=(curl)
if ((${#need[@]})); then
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	echo "check-deb: installing ${need[*]}"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

tmp=$(mktemp -d /tmp/kernelbox-check-deb.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# --- control fields -------------------------------------------------------
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = kernelbox ] || fail "Package is $(field Package)"
arch=$(basename "$deb" .deb)
arch=${arch##*_}
[ "$(field Architecture)" = "$arch" ] || fail "Architecture $(field Architecture), file name says $arch"
version=$(field Version)
case "$version" in [0-9]*) ;; *) fail "Version $version does not start with a digit" ;; esac
[ "$(basename "$deb")" = "kernelbox_${version}_$arch.deb" ] || fail "file name $(basename "$deb") is not kernelbox_${version}_$arch.deb"
for dep in libseccomp2 python3 adduser; do
	field Depends | tr ',' '\n' | grep -x " *$dep" >/dev/null || fail "Depends lacks $dep: $(field Depends)"
done
for rec in python3-torch python3-numpy python3-yaml; do
	field Recommends | tr ',' '\n' | grep -x " *$rec" >/dev/null || fail "Recommends lacks $rec: $(field Recommends)"
done
ok "fields: kernelbox $version $arch; Depends: $(field Depends); Recommends: $(field Recommends)"

# --- files ----------------------------------------------------------------
dpkg-deb -c "$deb" | awk '{print $NF}' | sed 's#^\./#/#' >"$tmp/list"
want=(
	/usr/bin/kernelbox
	/lib/systemd/system/kernelbox.service
	/etc/kernelbox/config.yaml
	/usr/share/doc/kernelbox/packaging.md
	/usr/share/doc/kernelbox/operations.md
	/usr/share/doc/kernelbox/configuration.md
	/usr/share/doc/kernelbox/backup.md
	/usr/share/doc/kernelbox/security.md
	/usr/share/doc/kernelbox/integrity.md
	/usr/share/kernelbox/dist/SHA256SUMS
)
for os_arch in linux-amd64 linux-arm64 darwin-amd64 darwin-arm64 windows-amd64.exe windows-arm64.exe; do
	want+=("/usr/share/kernelbox/dist/kernelbox-$os_arch")
done
for f in "${want[@]}"; do
	grep -qx "$f" "$tmp/list" || fail "the package lacks $f"
done
dpkg-deb -e "$deb" "$tmp/control"
[ "$(cat "$tmp/control/conffiles")" = /etc/kernelbox/config.yaml ] || fail "conffiles: $(cat "$tmp/control/conffiles")"
for s in postinst prerm postrm; do
	[ -x "$tmp/control/$s" ] || fail "no executable $s"
done
ok "files: ${#want[@]} expected paths, conffile /etc/kernelbox/config.yaml, $(du -h "$deb" | cut -f1) package"

root="$tmp/root"
dpkg-deb -x "$deb" "$root"
kb="$root/usr/bin/kernelbox"
got=$("$kb" --version)
case "$got" in *kernelbox*) ;; *) fail "kernelbox --version printed $got" ;; esac
# The daemon's build: cgo and libseccomp (a client build would not serve).
# grep reads all of ldd's output (no -q): under pipefail, a writer cut
# off by grep's early exit (SIGPIPE) fails the pipeline on a busy machine.
ldd "$kb" | grep libseccomp >/dev/null || fail "/usr/bin/kernelbox is not linked with libseccomp (not make build's binary?)"
(cd "$root/usr/share/kernelbox/dist" && sha256sum --quiet -c SHA256SUMS) || fail "the clients do not match their SHA256SUMS"
ok "binary: $got, linked with libseccomp; the clients match SHA256SUMS"

# --- the config loads -----------------------------------------------------
conf="$root/etc/kernelbox/config.yaml"
"$kb" config check "$conf" >/dev/null || fail "kernelbox config check rejects the packaged config"
# Each key the conffile shows commented out, uncommented alone, is
# accepted too: the file's defaults are ones the daemon takes.
n=0
while IFS= read -r key; do
	sed "s/^#\($key:\)/\1/" "$conf" >"$tmp/one.yaml"
	"$kb" config check "$tmp/one.yaml" >/dev/null 2>"$tmp/one.err" || { cat "$tmp/one.err" >&2; fail "config.yaml with $key uncommented is rejected"; }
	n=$((n + 1))
done < <(sed -n 's/^#\([a-z_]*\):.*/\1/p' "$conf")
ok "config: kernelbox config check accepts the packaged config.yaml, and each of its $n commented keys uncommented"

# --- the systemd unit -----------------------------------------------------
# verify wants ExecStart's binary where the unit says: check a copy that
# points at the unpacked one, and fail on anything it prints about it.
mkdir "$tmp/unit"
sed "s#^ExecStart=/usr/bin/kernelbox #ExecStart=$kb #" "$root/lib/systemd/system/kernelbox.service" >"$tmp/unit/kernelbox.service"
grep -q "^ExecStart=$kb serve --config /etc/kernelbox/config.yaml" "$tmp/unit/kernelbox.service" || fail "unexpected ExecStart"
if ! SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no "$tmp/unit/kernelbox.service" >"$tmp/verify.out" 2>&1; then
	cat "$tmp/verify.out" >&2
	fail "systemd-analyze verify failed"
fi
if grep -i "kernelbox" "$tmp/verify.out" >&2; then
	fail "systemd-analyze verify warns about the unit"
fi
u="$root/lib/systemd/system/kernelbox.service"
for line in Delegate=yes KillMode=mixed Restart=on-failure StateDirectory=kernelbox ConfigurationDirectory=kernelbox \
	ProtectSystem=full ProtectHome=read-only PrivateTmp=yes; do
	grep -qx "$line" "$u" || fail "the unit lacks $line"
done
for forbidden in NoNewPrivileges PrivateDevices RestrictNamespaces SystemCallFilter ProtectControlGroups ProtectKernelTunables; do
	! grep -q "^$forbidden=" "$u" || fail "the unit sets $forbidden, which breaks the sandbox or the GPUs (see its comments)"
done
ok "unit: systemd-analyze verify is clean ($(systemd-analyze --version | head -n1))"

# --- the maintainer scripts -----------------------------------------------
for s in postinst prerm postrm; do
	sh -n "$tmp/control/$s" || fail "$s: sh -n"
done
shellcheck -s sh "$tmp/control/postinst" "$tmp/control/prerm" "$tmp/control/postrm" || fail "shellcheck"

# Run them as dpkg would, with every command that would change this host
# (adduser, systemctl, the doctor) replaced by a stub that logs its call.
stubs="$tmp/stubs"
mkdir "$stubs"
for c in addgroup adduser systemctl kernelbox umount; do
	printf '#!/bin/sh\necho "%s $*" >>"%s"\n' "$c" "$tmp/calls" >"$stubs/$c"
done
printf '#!/bin/sh\nexit 2\n' >"$stubs/getent" # no such user or group yet
chmod +x "$stubs"/*
run() { PATH="$stubs:$PATH" sh "$tmp/control/$1" "${@:2}" >"$tmp/script.out" 2>&1 || { cat "$tmp/script.out" >&2; fail "$*"; }; }
run postinst configure ""
grep -q "^addgroup --system" "$tmp/calls" || fail "postinst configure did not add the kernelbox group"
grep -q "^adduser --system.* kernelbox$" "$tmp/calls" || fail "postinst configure did not add the kernelbox user"
grep -q "^kernelbox doctor" "$tmp/calls" || fail "postinst configure did not run kernelbox doctor"
grep -q "admin-token" "$tmp/script.out" || fail "postinst does not say where the admin token is"
for says in /usr/share/doc/kernelbox/ operations.md http://BOX:8470/download/ unix:/var/lib/kernelbox/kernelbox.sock; do
	grep -qF "$says" "$tmp/script.out" || fail "postinst does not point at $says"
done
grep -qF /usr/share/doc/kernelbox/ "$conf" || fail "the packaged config.yaml does not point at /usr/share/doc/kernelbox/"
run prerm remove
run postrm remove
[ ! -d /run/systemd/system ] || grep -q "^systemctl stop kernelbox.service" "$tmp/calls" || fail "prerm remove did not stop the service"
# Purge under DPKG_ROOT, on a fake tree: the data directory goes.
fake="$tmp/fake"
mkdir -p "$fake/var/lib/kernelbox/problems" "$fake/etc/systemd/system/multi-user.target.wants"
touch "$fake/var/lib/kernelbox/admin-token" "$fake/etc/systemd/system/multi-user.target.wants/kernelbox.service"
DPKG_ROOT=$fake run postrm purge
[ ! -e "$fake/var/lib/kernelbox" ] || fail "postrm purge left /var/lib/kernelbox"
[ ! -e "$fake/etc/systemd/system/multi-user.target.wants/kernelbox.service" ] || fail "postrm purge left the unit enabled"
DPKG_ROOT=$fake run postrm remove
ok "scripts: sh -n, shellcheck $(shellcheck --version | sed -n 's/^version: //p'), and postinst/prerm/postrm against stubs"

# --- installed, and run as the unit would ---------------------------------
"$(dirname "$0")/check-deb-unit.sh" "$deb"
echo "check-deb: $deb is good"
