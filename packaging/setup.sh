#!/usr/bin/env bash
# Installs what kernelbox's build and its CPU backend need on Debian or
# Ubuntu. Idempotent: it installs only what is missing, so `make demo` and
# `make test` can call it every time. With --browser it also installs
# Chromium, which the web pages' end-to-end tests drive headless.
set -euo pipefail

# iproute2: the sandbox tests probe a run's network namespace with ip.
pkgs=(gcc make git libseccomp-dev pkg-config python3 python3-torch python3-numpy python3-yaml iproute2)
[ "${1:-}" = --browser ] && pkgs+=(chromium)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  if ! command -v apt-get >/dev/null; then
    echo "setup: missing ${missing[*]}, and this is not a Debian system: install them by hand" >&2
    exit 1
  fi
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v go >/dev/null; then
  echo "setup: Go 1.26 or newer is needed on PATH (https://go.dev/dl/)" >&2
  exit 1
fi
