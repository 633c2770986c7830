#!/bin/sh
# version.sh prints pacer's version for the build (see VERSION in the
# Makefile): the newest v* tag as git describe gives it (v1.2.0,
# v1.2.0-3-gabcdef012345), or without a tag a Go pseudo-version of the
# commit (v0.0.0-20260101120000-abcdef012345), with "+dirty" when the work
# tree has uncommitted changes; v0.0.0-unknown outside a git checkout.
set -u
cd "$(dirname "$0")/.." || exit 1
if ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo v0.0.0-unknown
	exit 0
fi
v=$(git describe --tags --match 'v[0-9]*' --abbrev=12 2>/dev/null) ||
	v=$(TZ=UTC git log -1 --format='v0.0.0-%cd-%H' --date=format-local:%Y%m%d%H%M%S | cut -c1-34)
git diff --quiet HEAD -- 2>/dev/null || v="$v+dirty"
echo "$v"
