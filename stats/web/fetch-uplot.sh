#!/usr/bin/env bash
# fetch-uplot.sh re-fetches the dashboard's chart library, uPlot, from the
# npm registry at the pinned version and checks it against the sha256 sums
# recorded in assets/uplot.sha256 (the npm tarball's and the files taken
# from it), then copies the files into assets/. `make web-assets` runs it.
# go build needs none of this: the files are committed.
#
# To move to another version: change UPLOT_VERSION, run with RECORD=1 to
# write the new sums, and review the diff of assets/ before committing.
set -euo pipefail
UPLOT_VERSION=1.6.32
here="$(cd "$(dirname "$0")" && pwd)"
assets="$here/assets"
sums="$assets/uplot.sha256"
tgz="uplot-$UPLOT_VERSION.tgz"

command -v npm >/dev/null || { echo "fetch-uplot.sh: needs npm (Debian package npm)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "uplot@$UPLOT_VERSION" >/dev/null)
mkdir "$tmp/out"
tar -xzf "$tmp/$tgz" -C "$tmp"
cp "$tmp/$tgz" "$tmp/out/"
cp "$tmp/package/dist/uPlot.iife.min.js" "$tmp/package/dist/uPlot.min.css" "$tmp/out/"
cp "$tmp/package/LICENSE" "$tmp/out/uPlot.LICENSE"

if [ "${RECORD:-}" = 1 ]; then
	(cd "$tmp/out" && sha256sum "$tgz" uPlot.iife.min.js uPlot.min.css uPlot.LICENSE) > "$sums"
	echo "recorded $sums for uplot@$UPLOT_VERSION"
fi
if ! (cd "$tmp/out" && sha256sum --quiet -c "$sums"); then
	echo "fetch-uplot.sh: uplot@$UPLOT_VERSION does not match $sums" >&2
	exit 1
fi
cp "$tmp/out/uPlot.iife.min.js" "$tmp/out/uPlot.min.css" "$tmp/out/uPlot.LICENSE" "$assets/"
echo "uplot@$UPLOT_VERSION: sha256 ok, copied to $assets"
