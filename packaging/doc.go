// Package packaging holds no code: its tests check what `make install`,
// `make uninstall`, `make deb` and `make release` produce, with real
// builds and a real dpkg into scratch roots (never the machine's own /etc
// or systemd). The packager itself is tools/nfpm, a module of its own;
// the maintainer scripts are in scripts/, the shell completion in
// completion/, the version the Makefile links in comes from version.sh.
//
// The tests build binaries and packages, so -short skips them; the one
// that installs the .deb needs root (and fails instead of skipping under
// CI=true). Two quick checks of the repository run with -short too:
// TestNoLargeTrackedFiles (no tracked file over 1 MB) and TestNotice
// (NOTICE lists every third-party work pacer ships, with its licence).
package packaging
