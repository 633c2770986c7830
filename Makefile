# pacer build and test entry points. `make test` is the test command CI runs.
GO      ?= go
PKGS    := ./...
BIN     := bin

.PHONY: all build test test-short vet fmt-check deps bench clean demo

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# deps installs what the privileged tests need (iperf3) when it is missing.
deps:
	@command -v iperf3 >/dev/null 2>&1 || { \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3 >/dev/null; }

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# test runs the whole suite with the race detector. Tests that need root,
# TUN devices or network namespaces run here too; with CI=true they fail
# instead of skipping when those are missing.
test: deps fmt-check vet
	$(GO) test -race -count=1 -timeout 12m $(PKGS)

# test-short skips the traffic tests (no root needed).
test-short:
	$(GO) test -short -count=1 $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./bucket

clean:
	rm -rf $(BIN)

# demo builds pacerd and runs it between two namespaces with iperf3 traffic
# (root: sudo make demo).
demo: build deps
	./configs/demo.sh
