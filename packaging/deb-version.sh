#!/bin/sh
# Prints the Debian package version of this checkout. dpkg wants a version
# that starts with a digit and sorts in build order, which `git describe`
# does not give: a tag v1.2.3 gives 1.2.3, the fourth commit after it
# 1.2.3+4.gabc1234, and a history without a tag 0.0.0+git<commits>.<hash>
# (the commit count keeps later builds sorting later); a tree with
# uncommitted changes adds .dirty. Outside git it prints 0.0.0+unknown.
set -eu
cd "$(dirname "$0")/.."
if d=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
	# v1.2.3[-rc1][-4-gabc1234][-dirty] -> 1.2.3[~rc1][+4.gabc1234][.dirty]:
	# a pre-release sorts before its release (~), later commits after (+).
	echo "$d" | sed -e 's/^v//' -e 's/-\([0-9]*\)-g\([0-9a-f]*\)/+\1.g\2/' -e 's/-dirty$/.dirty/' -e 's/-/~/g'
elif n=$(git rev-list --count HEAD 2>/dev/null); then
	h=$(git rev-parse --short HEAD)
	dirty=""
	git diff --quiet HEAD 2>/dev/null || dirty=.dirty
	echo "0.0.0+git$n.g$h$dirty"
else
	echo 0.0.0+unknown
fi
