# nftproxy build and test entry points. `make test` and `make demo` need
# root for the kernel and namespace parts; see README.md.
SHELL := /bin/bash
GO ?= go
BIN := bin

.PHONY: all build test unit fuzz bench demo image clean

all: build

build:
	$(GO) build -o $(BIN)/nftproxy ./cmd/nftproxy
	$(GO) build -o $(BIN)/echoserver ./e2e/echoserver
	$(GO) build -o $(BIN)/demo ./e2e/demo

# The whole suite: formatting, vet, unit tests and, as root, the kernel and
# end-to-end tests (they skip, saying so, when not root).
test:
	@fmt="$$(gofmt -l .)"; if [ -n "$$fmt" ]; then echo "gofmt needed:"; echo "$$fmt"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -count=1 -v ./...
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 1x ./nftgen ./compat ./proxier/model
	$(MAKE) fuzz FUZZTIME=10s

# Fuzz targets (the generation one applies every ruleset to a kernel in a
# namespace of its own when run as root). Seeds are in the test files.
FUZZTIME ?= 1m
fuzz:
	$(GO) test ./proxier/model -run '^$$' -fuzz FuzzModel -fuzztime $(FUZZTIME)
	$(GO) test ./nftgen -run '^$$' -fuzz FuzzGenerate -fuzztime $(FUZZTIME)

# Benchmarks (as root): the Go benchmarks of model building, rule
# generation and the compat rendering, then the side-by-side benchmark of
# issue #7 (e2e TestSideBySide): nftproxy against kube-proxy's rules in
# iptables-legacy, iptables-nft and `nft -f`, control plane and data plane,
# at BENCH_SIZES Services x 10 endpoints. It writes results.md, results.csv
# and results.png into e2e/results. Times are reported, never asserted.
BENCH_SIZES ?= 100,1000,10000,30000
BENCH_CONNS ?= 1500
BENCH_ROUNDS ?= 7
bench:
	$(GO) test -count=1 -run '^$$' -bench . -benchmem ./nftgen ./compat ./proxier/model
	NFTPROXY_BENCH_SIZES=$(BENCH_SIZES) NFTPROXY_BENCH_CONNS=$(BENCH_CONNS) NFTPROXY_BENCH_ROUNDS=$(BENCH_ROUNDS) \
	NFTPROXY_BENCH_OUT=$(CURDIR)/e2e/results $(GO) test -count=1 -v -timeout 40m -run TestSideBySide ./e2e

# Unit tests only; no root, no kernel.
unit:
	$(GO) test -count=1 ./nftgen/... ./proxier/... ./compat/... ./cmd/...

# Builds, programs the example Services in a throwaway namespace topology,
# sends traffic and prints the split and the ruleset, then cleans up.
demo: build
	./$(BIN)/demo -nftproxy $(BIN)/nftproxy -echo $(BIN)/echoserver -objects deploy/examples/services.yaml

image:
	docker build -t nftproxy:dev .

clean:
	rm -rf $(BIN)
