# pacer build and test entry points. `make test` is the test command CI runs.
GO      ?= go
PKGS    := ./...
BIN     := bin

.PHONY: all build test test-short vet fmt-check deps bench bench-quick bench-deps clean demo web-assets dashboard-png fuzz soak

all: build

# Without cgo: only then can pacerd drop its capabilities on all its
# threads once its link runs (a binary with cgo warns and keeps them).
build:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./cmd/...

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
# Packages run one at a time (-p 1): the traffic tests of different
# packages would otherwise share the two cores and judge each other's load.
test: deps fmt-check vet
	$(GO) test -race -short -count=1 -p 1 -timeout 10m $(PKGS)
	$(GO) test -count=1 -p 1 -timeout 14m $(PKGS)

# test-short skips the traffic tests (no root needed).
test-short:
	$(GO) test -short -count=1 $(PKGS)

# bench measures pacer against its references in one run (x/time/rate, the
# bare TUN copy loop, a veth pair, tc tbf, and fq_codel, cake and netem where
# the kernel has them) and writes BENCHMARKS.md and the plots in bench/. It
# needs root and takes about 10 minutes: sudo make bench.
# bench-quick is the same in short runs (under 2 minutes), written to
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
	rm -rf $(BIN)

# web-assets fetches the dashboard's chart library (uPlot, at the version
# pinned in stats/web/fetch-uplot.sh) from npm again, checks it against the
# sha256 sums in stats/web/assets/uplot.sha256 and copies it into
# stats/web/assets/. It needs npm; go build needs none of it.
web-assets:
	./stats/web/fetch-uplot.sh

# dashboard-png remakes docs/metrics.md's screenshot of the dashboard,
# docs/dashboard.png, with the browser test: pacerd shaping iperf3 traffic
# between two namespaces, seen by headless Chromium (root: sudo make
# dashboard-png).
dashboard-png: deps
	PACER_DASHBOARD_PNG=$(CURDIR)/docs/dashboard.png $(GO) test -count=1 -run '^TestDashboardBrowser$$' ./cmd/pacerd

# demo builds pacerd and runs it between two namespaces with iperf3 traffic
# (root: sudo make demo).
demo: build deps
	./configs/demo.sh
