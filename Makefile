# pacer build and test entry points. `make test` is the test command CI runs.
GO      ?= go
PKGS    := ./...
BIN     := bin

.PHONY: all build test test-short vet fmt-check deps bench bench-quick bench-deps clean demo web-assets dashboard-png fuzz soak
.PHONY: install uninstall deb rpm release

all: build

# VERSION is pacer's version: the newest v* tag as git describe gives it
# (v1.2.0, v1.2.0-3-gabcdef012345), or without a tag a Go pseudo-version
# of the commit (v0.0.0-20260101120000-abcdef012345); "+dirty" when the
# work tree has changes. REVISION is the commit. Both are linked into the
# binaries (pacerd -version, pacer_build_info, the startup log line);
# `make VERSION=v1.2.3` overrides.
ifeq ($(origin VERSION),undefined)
VERSION := $(shell ./packaging/version.sh)
endif
ifeq ($(origin REVISION),undefined)
REVISION := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
endif
# SOURCE_DATE_EPOCH is the time written into packages and archives: the
# commit's, so that one commit gives the same bytes.
ifeq ($(origin SOURCE_DATE_EPOCH),undefined)
SOURCE_DATE_EPOCH := $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
endif
export SOURCE_DATE_EPOCH

# Static, reproducible binaries: no cgo (only then can pacerd drop its
# capabilities on all its threads once its link runs; a binary with cgo
# warns and keeps them), no build paths (-trimpath), no symbol tables
# (-s -w: stack traces still work), the version linked in. The same
# commit and Go version give the same bytes.
GOARCH_BUILD ?= $(shell $(GO) env GOARCH)
LDFLAGS := -s -w -X github.com/pacer-dev/pacer/stats.linkVersion=$(VERSION) -X github.com/pacer-dev/pacer/stats.linkRevision=$(REVISION)
GOBUILD = CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH_BUILD) $(GO) build -trimpath -ldflags '$(LDFLAGS)'

build:
	$(GOBUILD) -o $(BIN)/ ./cmd/...

# deps installs what the privileged tests need when it is missing: iperf3,
# the Debian package prometheus (promtool and the prometheus server),
# chromium (the dashboard's browser test), ping and redis-server (the
# global limits' tests start their own on 127.0.0.1), with one apt-get
# update.
deps:
	@need=""; \
	command -v iperf3 >/dev/null 2>&1 || need="$$need iperf3"; \
	{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || need="$$need prometheus"; \
	command -v chromium >/dev/null 2>&1 || need="$$need chromium"; \
	command -v ping >/dev/null 2>&1 || need="$$need iputils-ping"; \
	command -v redis-server >/dev/null 2>&1 || need="$$need redis-server"; \
	command -v ethtool >/dev/null 2>&1 || need="$$need ethtool"; \
	if [ -n "$$need" ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$need >/dev/null; \
	fi

vet:
	$(GO) vet $(PKGS)
	cd tools/nfpm && $(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# test runs the whole suite. First everything but the real-traffic tests
# (-short) under the race detector: the unit, property and concurrency
# tests, the data path on fake devices, the daemon's API. Then the whole
# suite without it, which adds the tests that need root, TUN devices or
# network namespaces and move real traffic: they measure rates and
# latencies, which the race detector's five- to tenfold slowdown would
# distort on two cores. With CI=true those tests fail instead of skipping
# when they cannot run.
# The second pass runs only the packages that have such tests (LONG_PKGS:
# their tests ask testing.Short, skipShort or rateTest); the others ran
# whole in the first. In it packages run one at a time (-p 1): the traffic
# tests of different packages would otherwise share the two cores and
# judge each other's load. Within a package, the tests that judge only
# rates and counts over seconds at 100 Mbit/s or less (rateTest) run three
# at a time (-parallel 3; GOMAXPROCS, two here, would be the default): the
# shaper package took 473-494 s instead of 555, its rate errors stayed
# within the spread of runs at two (largest -0.37% against 2%; -1.20% at
# two). The others (skipShort) still run first, one at a time.
# The first pass moves no traffic and builds and runs two packages at once.
# The packaging tests (package packaging: make install, make deb into a
# scratch root with dpkg, make release) build and move no traffic: they
# run beside the first pass, which does not keep both cores busy, not in
# the second, where nothing may run beside the traffic tests. The first
# pass took 61 s alone and 64-67 s with them beside it; they took 18 s
# alone. Their output follows the first pass's. The packager's own
# module, tools/nfpm, is tested on its own.
LONG_PKGS := $(shell grep -rlE --include='*_test.go' 'testing[.]Short|skipShort|rateTest' . | grep -v '^[.]/tools/' | xargs -r -n1 dirname | sort -u)
TRAFFIC_PKGS := $(filter-out ./packaging,$(LONG_PKGS))

test: deps fmt-check vet
	@log=$$(mktemp); \
	$(GO) test -count=1 -timeout 10m ./packaging >$$log 2>&1 & pkg=$$!; \
	echo "$(GO) test -race -short -count=1 -p 2 -timeout 10m $(PKGS)"; \
	$(GO) test -race -short -count=1 -p 2 -timeout 10m $(PKGS); first=$$?; \
	wait $$pkg; packaging=$$?; \
	echo "$(GO) test -count=1 -timeout 10m ./packaging (beside the first pass)"; \
	cat $$log; rm -f $$log; \
	[ $$first -eq 0 ] && [ $$packaging -eq 0 ]
	$(GO) test -count=1 -p 1 -parallel 3 -timeout 14m $(TRAFFIC_PKGS)
	cd tools/nfpm && $(GO) test -count=1 ./...

# test-short skips the traffic tests (no root needed).
test-short:
	$(GO) test -short -count=1 $(PKGS)

# bench measures pacer against its references in one run (x/time/rate, the
# bare TUN copy loop, a veth pair, tc tbf, and fq_codel, cake and netem where
# the kernel has them) and writes BENCHMARKS.md and the plots in bench/. It
# needs root and takes about 25 minutes (15 of them scenario 14, autorate
# against fixed rates on an emulated ISP): sudo make bench.
# bench-quick is the same in short runs (about 6 minutes), written to
# bench/out/ for development.
bench: bench-deps
	$(GO) build -o $(BIN)/pacer-bench ./bench
	./$(BIN)/pacer-bench -go "$(GO)" -out BENCHMARKS.md -plots bench/

bench-quick: bench-deps
	$(GO) build -o $(BIN)/pacer-bench ./bench
	./$(BIN)/pacer-bench -quick -go "$(GO)" -out bench/out/BENCHMARKS.md -plots bench/out/

# bench-deps installs what the benchmarks run (iperf3, ping, ethtool, tc)
# when it is missing.
bench-deps:
	@[ "$$(id -u)" -eq 0 ] || { echo "make bench needs root (TUN devices, network namespaces): sudo make bench"; exit 1; }
	@for t in iperf3 ping ethtool tc; do command -v $$t >/dev/null 2>&1 || missing=1; done; \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		iperf3 iputils-ping ethtool iproute2 >/dev/null; fi

# soak runs pacerd (the binary make build makes) for DURATION (default
# 20m) under a class change every second (pacerctl) and a reload every 10
# seconds (SIGHUP), with a few hundred Mbit/s of iperf3 traffic through
# three classes between two namespaces; every 10 seconds it samples
# pacerd's RSS, goroutines, open files and each class's rate error, and
# writes SOAK.md, docs/soak.csv and docs/soak.png. It fails unless every
# line is flat (criteria in SOAK.md; a rate window judges to 1%, short
# only where the class was offered its rate). Root, not in CI:
# sudo make soak DURATION=20m
DURATION ?= 20m
soak: bench-deps build
	$(GO) build -o $(BIN)/pacer-bench ./bench
	./$(BIN)/pacer-bench -soak -duration $(DURATION) -out SOAK.md -plots docs/

# fuzz runs every fuzz target of the module (each `func FuzzX` in a
# _test.go file) for FUZZTIME, one after another, prints a table of
# target, package, executions and result, and fails at the end if any
# target failed. A failing input lands in the package's testdata/fuzz/
# (commit it as a regression case once the cause is fixed). FUZZFLAGS
# passes more flags to go test, e.g. on a shared machine:
#   nice -n 19 make fuzz FUZZTIME=5m FUZZFLAGS='-parallel 1'
FUZZTIME  ?= 5m
FUZZFLAGS ?=
fuzz:
	GO="$(GO)" FUZZTIME="$(FUZZTIME)" FUZZFLAGS="$(FUZZFLAGS)" ./bench/fuzz.sh

clean:
	rm -rf $(BIN) $(DIST)

# web-assets fetches the dashboard's chart library (uPlot, at the version
# pinned in stats/web/fetch-uplot.sh) from npm again, checks it against the
# sha256 sums in stats/web/assets/uplot.sha256 and copies it into
# stats/web/assets/. It needs npm; go build needs none of it.
web-assets:
	./stats/web/fetch-uplot.sh

# dashboard-png remakes docs/metrics.md's screenshot of the dashboard,
# docs/dashboard.png, with the class tree's browser test: pacerd shaping
# iperf3 traffic through a class tree between two namespaces, seen by
# headless Chromium (root: sudo make dashboard-png).
dashboard-png: deps
	PACER_DASHBOARD_PNG=$(CURDIR)/docs/dashboard.png $(GO) test -count=1 -run '^TestDashboardTree$$' ./cmd/pacerd

# demo builds pacerd and runs it between two namespaces with iperf3 traffic
# (root: sudo make demo).
demo: build deps
	./configs/demo.sh

# install puts pacer where a system daemon's files go (GNU conventions:
# PREFIX, DESTDIR for staging):
#   $(BINDIR)/pacerd, pacerctl                 (both in bin: pacerd -check
#                                               and pacerd shell are for users too)
#   $(UNITDIR)/pacerd.service                  the hardened unit, its paths
#                                               set to BINDIR and SYSCONFDIR
#   $(SYSCONFDIR)/pacer/pacer.yaml             the example config, only if
#                                               there is none: a user's file
#                                               is never overwritten (its
#                                               trace paths point to DATADIR)
#   $(DATADIR)/pacer/                          example.yaml, traces/ (with
#                                               the Mahimahi trace's licence,
#                                               LICENSE.mahimahi),
#                                               prometheus.yml, grafana-dashboard.json
#   $(DOCDIR)/                                 README.md, docs/*.md, LICENSE
#                                               (Apache-2.0) and NOTICE (the
#                                               third-party works and their
#                                               licences)
#   $(BASHCOMPDIR)/pacerctl, $(ZSHCOMPDIR)/_pacerctl   shell completion
# It installs what `make build` built (run that first as yourself, then
# `sudo make install`). uninstall removes exactly these files and pacer's
# own directories (with DESTDIR, every directory it leaves empty); the
# config only if it is still the example, unchanged.
# Neither enables, starts nor stops the unit.
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
DATADIR     ?= $(PREFIX)/share
DOCDIR      ?= $(DATADIR)/doc/pacer
SYSCONFDIR  ?= /etc
UNITDIR     ?= $(PREFIX)/lib/systemd/system
BASHCOMPDIR ?= $(DATADIR)/bash-completion/completions
ZSHCOMPDIR  ?= $(DATADIR)/zsh/site-functions
INSTALL     ?= install

TRACES := $(wildcard configs/traces/*)
DOCS   := README.md LICENSE NOTICE $(wildcard docs/*.md)
SHARED := configs/prometheus.yml configs/grafana-dashboard.json

# The binaries, if `make build` has not made them yet.
$(BIN)/pacerd $(BIN)/pacerctl:
	$(GOBUILD) -o $(BIN)/ ./cmd/...

install: $(BIN)/pacerd $(BIN)/pacerctl
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/pacer \
		$(DESTDIR)$(DATADIR)/pacer/traces $(DESTDIR)$(DOCDIR) $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR)
	$(INSTALL) -m 0755 $(BIN)/pacerd $(BIN)/pacerctl $(DESTDIR)$(BINDIR)/
	sed -e 's|/usr/local/bin/|$(BINDIR)/|g' -e 's|/etc/pacer/|$(SYSCONFDIR)/pacer/|g' \
		-e 's|/usr/share/doc/pacer/|$(DOCDIR)/|g' configs/pacerd.service >$(DESTDIR)$(UNITDIR)/pacerd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/pacerd.service
	sed -e 's|trace: traces/|trace: $(DATADIR)/pacer/traces/|' configs/example.yaml >$(DESTDIR)$(DATADIR)/pacer/example.yaml
	chmod 0644 $(DESTDIR)$(DATADIR)/pacer/example.yaml
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/pacer/pacer.yaml ]; then \
		echo "$(DESTDIR)$(SYSCONFDIR)/pacer/pacer.yaml exists: kept (the example is $(DATADIR)/pacer/example.yaml)"; \
	else \
		echo "$(INSTALL) -m 0644 $(DESTDIR)$(DATADIR)/pacer/example.yaml $(DESTDIR)$(SYSCONFDIR)/pacer/pacer.yaml"; \
		$(INSTALL) -m 0644 $(DESTDIR)$(DATADIR)/pacer/example.yaml $(DESTDIR)$(SYSCONFDIR)/pacer/pacer.yaml; \
	fi
	$(INSTALL) -m 0644 $(SHARED) $(DESTDIR)$(DATADIR)/pacer/
	$(INSTALL) -m 0644 $(TRACES) $(DESTDIR)$(DATADIR)/pacer/traces/
	$(INSTALL) -m 0644 $(DOCS) $(DESTDIR)$(DOCDIR)/
	$(INSTALL) -m 0644 packaging/completion/pacerctl.bash $(DESTDIR)$(BASHCOMPDIR)/pacerctl
	$(INSTALL) -m 0644 packaging/completion/_pacerctl $(DESTDIR)$(ZSHCOMPDIR)/_pacerctl

uninstall:
	@c=$(DESTDIR)$(SYSCONFDIR)/pacer/pacer.yaml; \
	if [ -e $$c ] && cmp -s $$c $(DESTDIR)$(DATADIR)/pacer/example.yaml; then echo "rm -f $$c"; rm -f $$c; \
	elif [ -e $$c ]; then echo "$$c: changed since install, kept"; fi
	rm -f $(DESTDIR)$(DATADIR)/pacer/example.yaml
	rm -f $(DESTDIR)$(BINDIR)/pacerd $(DESTDIR)$(BINDIR)/pacerctl $(DESTDIR)$(UNITDIR)/pacerd.service
	rm -f $(addprefix $(DESTDIR)$(DATADIR)/pacer/,$(notdir $(SHARED)))
	rm -f $(addprefix $(DESTDIR)$(DATADIR)/pacer/traces/,$(notdir $(TRACES)))
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(DOCS)))
	rm -f $(DESTDIR)$(BASHCOMPDIR)/pacerctl $(DESTDIR)$(ZSHCOMPDIR)/_pacerctl
	@for d in $(DESTDIR)$(DATADIR)/pacer/traces $(DESTDIR)$(DATADIR)/pacer $(DESTDIR)$(DOCDIR) $(DESTDIR)$(SYSCONFDIR)/pacer; do \
		if [ -d $$d ]; then rmdir $$d 2>/dev/null && echo "rmdir $$d" || echo "$$d: not empty, kept"; fi; \
	done
	@# In a staging tree (DESTDIR) the standard directories are install's
	@# too: removed when empty, up to DESTDIR. On the system they stay.
	@if [ -n "$(DESTDIR)" ]; then \
		for d in $(BINDIR) $(UNITDIR) $(BASHCOMPDIR) $(ZSHCOMPDIR) $(DOCDIR) $(DATADIR) $(SYSCONFDIR); do \
			while [ "$$d" != / ] && [ "$$d" != . ]; do \
				if [ -d "$(DESTDIR)$$d" ]; then rmdir "$(DESTDIR)$$d" 2>/dev/null || break; fi; \
				d=$$(dirname "$$d"); \
			done; \
		done; \
	fi

# deb and rpm build the packages into dist/ from a staging install
# (PREFIX=/usr, the unit in /usr/lib/systemd/system) with nfpm, a Go
# program of its own module (tools/nfpm: pacerd does not link it);
# packaging/scripts holds the maintainer scripts; packaging/copyright
# becomes the .deb's /usr/share/doc/pacer/copyright. ARCH picks the
# architecture (amd64, arm64). No dpkg-dev or rpmbuild needed.
ARCH  ?= $(shell $(GO) env GOARCH)
DIST  ?= dist
STAGE  = $(DIST)/stage-$(ARCH)

NFPM   = $(DIST)/tools/nfpm
PACKAGE = $(abspath $(NFPM)) -arch $(ARCH) -version $(VERSION) -stage $(abspath $(STAGE)) \
	-scripts $(abspath packaging/scripts) -copyright $(abspath packaging/copyright) -out $(abspath $(DIST))

deb: stage $(NFPM)
	$(PACKAGE) -format deb

rpm: stage $(NFPM)
	$(PACKAGE) -format rpm

# tar is the release archive of ARCH (see release).
.PHONY: tar
tar: stage $(NFPM)
	$(PACKAGE) -format tar

# Rebuilt when its source changes: an older one may lack a flag PACKAGE passes.
$(NFPM): tools/nfpm/main.go tools/nfpm/go.mod tools/nfpm/go.sum
	cd tools/nfpm && $(GO) build -o $(abspath $(NFPM)) .

.PHONY: stage
stage:
	rm -rf $(STAGE)
	$(MAKE) --no-print-directory GOARCH_BUILD=$(ARCH) BIN=$(DIST)/bin-$(ARCH) build
	$(MAKE) --no-print-directory BIN=$(DIST)/bin-$(ARCH) DESTDIR=$(abspath $(STAGE)) PREFIX=/usr \
		UNITDIR=/usr/lib/systemd/system ZSHCOMPDIR=/usr/share/zsh/vendor-completions install >/dev/null

# release builds, for linux/amd64 and linux/arm64, a tar.gz of the files a
# package installs (under pacer-VERSION-linux-ARCH/, laid out for /:
# usr/bin/pacerd ...), the .deb and the .rpm, and dist/SHA256SUMS.
RELEASE_ARCHES ?= amd64 arm64
release:
	rm -rf $(DIST)
	for a in $(RELEASE_ARCHES); do $(MAKE) --no-print-directory ARCH=$$a tar deb rpm || exit 1; done
	rm -rf $(DIST)/stage-* $(DIST)/bin-* $(DIST)/tools
	cd $(DIST) && sha256sum *.tar.gz *.deb *.rpm >SHA256SUMS
	@cat $(DIST)/SHA256SUMS
