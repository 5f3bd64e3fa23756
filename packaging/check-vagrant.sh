#!/usr/bin/env bash
# Checks the Vagrantfile with `vagrant validate` (make vagrant/check runs
# it; CI runs that). It installs Debian's vagrant when it is missing: CI's
# machine has no VM provider, and validate needs none. Nothing here may
# reach the internet: validate neither downloads the box nor, with the
# checkpoint off, asks HashiCorp for a newer vagrant; as root the check runs
# in a network namespace of its own, to prove it.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v vagrant >/dev/null; then
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	echo "check-vagrant: installing vagrant"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends vagrant >/dev/null
fi

export VAGRANT_CHECKPOINT_DISABLE=1
# Vagrant's own state (~/.vagrant.d: plugins, boxes) in a temporary home,
# so the check sees no plugin or box of this machine's user.
home=$(mktemp -d /tmp/kernelbox-vagrant.XXXXXX)
trap 'rm -rf "$home"' EXIT
export VAGRANT_HOME="$home"

# --ignore-provider: no provider is installed here (VirtualBox, libvirt),
# and validate would otherwise ask for the default one.
cmd=(vagrant validate --ignore-provider)
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
	cmd=(unshare --net "${cmd[@]}")
fi
echo "check-vagrant: ${cmd[*]} ($(vagrant --version))"
"${cmd[@]}"
