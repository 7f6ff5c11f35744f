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

# Benchmarks: the Go benchmarks of model building, rule generation and the
# compat rendering (1,000 Services x 10 endpoints), then, as root, the
# control-plane scale probe through netlink at SCALE_SIZES Services. Times
# are printed, never asserted. Not yet: the iptables side-by-side, the
# data-plane rates, and the CSV, table and plot (issue #7).
SCALE_SIZES ?= 1000,3000,10000
bench:
	$(GO) test -count=1 -run '^$$' -bench . -benchmem ./nftgen ./compat ./proxier/model
	NFTPROXY_SCALE_SIZES=$(SCALE_SIZES) $(GO) test -count=1 -v -timeout 30m -run TestControlPlaneScale ./e2e

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
