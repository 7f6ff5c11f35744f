# nftproxy build and test entry points. `make test` and `make demo` need
# root for the kernel and namespace parts; see README.md.
SHELL := /bin/bash
GO ?= go
BIN := bin

.PHONY: cluster-deps cluster-binaries cluster cluster-down cluster-swap cluster-disruption cluster-soak conformance-binaries conformance skiplist
.PHONY: all build test unit fuzz fuzz-short differential e2e-binaries deps bench plots demo image image-docker clean

all: build

build:
	$(GO) build -o $(BIN)/nftproxy ./cmd/nftproxy
	$(GO) build -o $(BIN)/echoserver ./e2e/tools/echoserver
	$(GO) build -o $(BIN)/demo ./e2e/tools/demo

# Time limits, sized for a cold, loaded 2-core machine. A step that takes
# longer fails with a message instead of hanging CI.
DOWNLOAD_TIMEOUT ?= 20m
TOOL_BUILD_TIMEOUT ?= 40m
TEST_TIMEOUT ?= 10m
E2E_TIMEOUT ?= 45m

# Go modules of the project and of the two test-tool modules (kube-proxy's
# oracle and the cluster binaries), downloaded once into GOMODCACHE.
deps:
	@echo "deps: downloading Go modules (cold: several minutes, about 1.5 GB)"
	timeout $(DOWNLOAD_TIMEOUT) $(GO) mod download
	cd e2e/legacy && timeout $(DOWNLOAD_TIMEOUT) $(GO) mod download
	cd e2e/etcd && timeout $(DOWNLOAD_TIMEOUT) $(GO) mod download
	cd e2e/tools/plot && timeout $(DOWNLOAD_TIMEOUT) $(GO) mod download

# The test tools that take minutes to build from source: etcd,
# kube-apiserver and kubectl (for the real API server e2e) and kube-proxy's
# own iptables proxier (the oracle of the compat tests), into e2e/.cache/bin.
# `go build` skips a binary that is already up to date, so a warm run costs
# seconds; a cold one on 2 cores about 10 minutes.
E2E_BIN := e2e/.cache/bin
K8S_LDFLAGS := -s -w -X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37
e2e-binaries: deps
	@mkdir -p $(E2E_BIN)
	@echo "e2e-binaries: etcd (1/6)"
	cd e2e/etcd && timeout $(TOOL_BUILD_TIMEOUT) $(GO) build -mod=mod -ldflags "$(K8S_LDFLAGS)" -o $(CURDIR)/$(E2E_BIN)/etcd go.etcd.io/etcd/server/v3
	@echo "e2e-binaries: kube-apiserver (2/6; the longest cold build)"
	cd e2e/legacy && timeout $(TOOL_BUILD_TIMEOUT) $(GO) build -mod=mod -ldflags "$(K8S_LDFLAGS)" -o $(CURDIR)/$(E2E_BIN)/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
	@echo "e2e-binaries: kubectl (3/6)"
	cd e2e/legacy && timeout $(TOOL_BUILD_TIMEOUT) $(GO) build -mod=mod -ldflags "$(K8S_LDFLAGS)" -o $(CURDIR)/$(E2E_BIN)/kubectl k8s.io/kubernetes/cmd/kubectl
	@echo "e2e-binaries: kube-proxy iptables oracle (4/6)"
	cd e2e/legacy && timeout $(TOOL_BUILD_TIMEOUT) $(GO) build -mod=mod -o $(CURDIR)/$(E2E_BIN)/kube-proxy-oracle ./oracle
	@echo "e2e-binaries: kube-proxy (5/6; for the daemon memory comparison)"
	cd e2e/legacy && timeout $(TOOL_BUILD_TIMEOUT) $(GO) build -mod=mod -ldflags "$(K8S_LDFLAGS)" -o $(CURDIR)/$(E2E_BIN)/kube-proxy k8s.io/kubernetes/cmd/kube-proxy
	@echo "e2e-binaries: kubeadm's kube-proxy objects (6/6; for the DaemonSet test)"
	cd e2e/legacy && timeout $(TOOL_BUILD_TIMEOUT) $(GO) build -mod=mod -o $(CURDIR)/$(E2E_BIN)/kubeadm-proxy ./kubeadmproxy
	@echo "e2e-binaries: done"

# The real two-node cluster (e2e/cluster, docs/real-cluster.md): the
# node and control-plane programs beside e2e-binaries, built from
# k8s.io/kubernetes v1.37.2, plus the e2e suite for `make conformance`.
# Not part of `make test`: cold, about 25 minutes and 4 GB on 2 cores.
CLUSTER_DEBS := containerd runc containernetworking-plugins busybox-static netcat-openbsd openssl curl wget bc conntrack jq bind9-dnsutils
# Prometheus (Debian's, its service not started) comes with the test deps.
cluster-deps:
	@command -v prometheus >/dev/null || bash .ci/deps
	@missing=""; for p in $(CLUSTER_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "cluster-deps: apt-get install$$missing"; \
	  DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi

cluster-binaries: e2e-binaries cluster-deps
	@echo "cluster-binaries: kubelet, kube-controller-manager, kube-scheduler, agnhost, regression-issue-74839, coredns, iperf 2.2, ginkgo"
	cd e2e/legacy && for c in kubelet kube-controller-manager kube-scheduler; do \
	  timeout $(TOOL_BUILD_TIMEOUT) $(GO) build -mod=mod -ldflags "$(K8S_LDFLAGS)" -o $(CURDIR)/$(E2E_BIN)/$$c k8s.io/kubernetes/cmd/$$c || exit 1; done
	cd e2e/legacy && for i in agnhost regression-issue-74839; do CGO_ENABLED=0 timeout $(TOOL_BUILD_TIMEOUT) $(GO) build -mod=mod -ldflags "$(K8S_LDFLAGS)" -o $(CURDIR)/$(E2E_BIN)/$$i k8s.io/kubernetes/test/images/$$i || exit 1; done
	cd e2e/coredns && timeout $(DOWNLOAD_TIMEOUT) $(GO) mod download && CGO_ENABLED=0 timeout $(TOOL_BUILD_TIMEOUT) $(GO) build -mod=mod -o $(CURDIR)/$(E2E_BIN)/coredns github.com/coredns/coredns
	e2e/cluster/iperf2.sh $(CURDIR)/$(E2E_BIN)/iperf
	cd e2e/legacy && timeout $(TOOL_BUILD_TIMEOUT) $(GO) build -mod=mod -o $(CURDIR)/$(E2E_BIN)/ginkgo github.com/onsi/ginkgo/v2/ginkgo

# A cluster that stays up (cluster-down removes it and checks the host);
# CLUSTER_STACK=dual makes it IPv4/IPv6 dual-stack.
CLUSTER_STACK ?= ipv4
cluster: cluster-binaries image
	CLUSTER_STACK=$(CLUSTER_STACK) e2e/cluster/cluster.sh up

cluster-down:
	e2e/cluster/cluster.sh down

# The operator's swap to nftproxy and rollback, under traffic, on the
# cluster of `make cluster` (writes e2e/results/cluster/cluster-swap.md).
cluster-swap: image
	e2e/cluster/swap.sh

# Disruption under traffic on the cluster of `make cluster`, kube-proxy and
# nftproxy in turn: the proxy's pod deleted, the API server down for 60 s,
# a node's daemons killed, a node failed whole (writes
# e2e/results/cluster/cluster-disruption.md).
cluster-disruption: image
	e2e/cluster/disruption.sh

# Churn soak on the cluster of `make cluster`, kube-proxy on node 1 and
# nftproxy on node 2 in the same run: 500 Services, 25 Deployments rolling
# for 30 minutes, a client on each node (writes
# e2e/results/cluster/cluster-soak.{md,csv,png}; SOAK_MINUTES and the other
# SOAK_ settings of e2e/cluster/soak.sh change it).
cluster-soak: image
	e2e/cluster/soak.sh

# Kubernetes' own e2e suite, built from the module (a long cold build).
conformance-binaries: cluster-binaries
	cd e2e/legacy && timeout $(TOOL_BUILD_TIMEOUT) $(GO) test -mod=mod -c -timeout $(TOOL_BUILD_TIMEOUT) -ldflags "$(K8S_LDFLAGS)" -o $(CURDIR)/$(E2E_BIN)/e2e.test k8s.io/kubernetes/test/e2e

# Every [sig-network] spec that `make conformance` leaves out, with its
# reason (e2e/cluster/skips.tsv), from the suite's own list: no cluster.
skiplist: conformance-binaries
	e2e/cluster/skiplist.sh

# A fresh dual-stack cluster (so that the IPv6 and dual-stack specs run
# too; CONFORMANCE_STACK=ipv4 for an IPv4-only one), the suite with
# kube-proxy and with nftproxy, the table e2e/results/cluster/conformance.md,
# and the cluster removed (the host check included), even when a step fails.
CONFORMANCE_STACK ?= dual
conformance: conformance-binaries image
	CLUSTER_STACK=$(CONFORMANCE_STACK) e2e/cluster/cluster.sh up
	e2e/cluster/conformance.sh; rc=$$?; e2e/cluster/cluster.sh down || rc=1; exit $$rc

# The whole suite: formatting, vet, unit tests and, as root, the kernel and
# end-to-end tests (they skip, saying so, when not root). Seed corpora of
# the fuzz targets run as ordinary tests here; fuzz-short then fuzzes for a
# fixed number of inputs (a count, not a time: Go's fuzzing engine can
# report its own time limit as a failure on a loaded machine).
test: e2e-binaries
	@fmt="$$(gofmt -l .)"; if [ -n "$$fmt" ]; then echo "gofmt needed:"; echo "$$fmt"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -count=1 -v -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v '/e2e$$')
	$(GO) test -count=1 -v -timeout $(E2E_TIMEOUT) ./e2e
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 1x -timeout $(TEST_TIMEOUT) ./nftgen ./compat ./proxier/model
	cd e2e/tools/plot && $(GO) vet ./... && $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(MAKE) fuzz-short

# Fuzz targets (the generation one applies every ruleset to a kernel in a
# namespace of its own when run as root). Seeds are in the test files and
# testdata/fuzz. `make fuzz FUZZTIME=10m` for long runs.
# Go minimizes every new interesting input for up to -fuzzminimizetime
# (60 s by default) and counts no executions meanwhile, which showed as
# windows of 0 execs/s. A count (not a time, for the same reason as
# -fuzztime) bounds it; a crasher is still written after a short one.
FUZZTIME ?= 1m
FUZZMINIMIZE ?= 200x
# The time limit of `make fuzz`; raise it too for FUZZTIME near 3h.
FUZZ_TIMEOUT ?= 3h
fuzz:
	$(GO) test ./proxier/model -run '^$$' -fuzz FuzzModel -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) -timeout $(FUZZ_TIMEOUT)
	$(GO) test ./nftgen/kernel -run '^$$' -fuzz FuzzGenerate -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) -timeout $(FUZZ_TIMEOUT)

FUZZ_MODEL_EXECS ?= 100000x
FUZZ_YAML_EXECS ?= 100000x
FUZZ_GENERATE_EXECS ?= 20000x
fuzz-short:
	$(GO) test ./proxier/model -run '^$$' -fuzz FuzzModel -fuzztime $(FUZZ_MODEL_EXECS) -fuzzminimizetime $(FUZZMINIMIZE) -timeout $(TEST_TIMEOUT)
	$(GO) test ./nftgen/kernel -run '^$$' -fuzz FuzzGenerate -fuzztime $(FUZZ_GENERATE_EXECS) -fuzzminimizetime $(FUZZMINIMIZE) -timeout $(TEST_TIMEOUT)
	$(GO) test ./proxier/objfile -run '^$$' -fuzz FuzzFastYAML -fuzztime $(FUZZ_YAML_EXECS) -fuzzminimizetime $(FUZZMINIMIZE) -timeout $(TEST_TIMEOUT)

# The differential test against kube-proxy's own iptables proxier over
# DIFF_SEEDS generated cluster states (make test runs 100); about 0.3 s per
# seed on 2 cores.
DIFF_SEEDS ?= 2000
differential: e2e-binaries
	$(GO) test -count=1 -timeout 90m -run TestDifferentialAgainstKubeProxy ./e2e -args -diff-seeds $(DIFF_SEEDS)

# Benchmarks (as root): the Go benchmarks of model building, rule
# generation and the compat rendering, one Service change in the engine at
# BENCH_ENGINE_SERVICES, then the side-by-side benchmark
# (e2e TestSideBySide): nftproxy against kube-proxy's rules in
# iptables-legacy, iptables-nft and `nft -f`, control plane and data plane,
# at BENCH_SIZES Services x 10 endpoints. It writes results.md, results.csv
# and results.png into e2e/results/bench. Then the daemons side by side:
# nftproxy, kube-proxy's nftables mode and its iptables mode, each against
# the same real API server: first sync, one change, peak RSS (daemons.md);
# then nftproxy and kube-proxy's nftables mode under EndpointSlice churn
# (churn.md, churn.png).
# Times and sizes are reported, never asserted.
BENCH_SIZES ?= 100,1000,10000,30000
BENCH_CONNS ?= 1500
BENCH_ROUNDS ?= 7
# Service counts of the daemons side by side with kube-proxy (each
# needs its objects created through a real API server: about 1 min per
# 10,000).
BENCH_DAEMON_SIZES ?= 1000,10000,30000
# Services held by the engine benchmark of one Service change (nftproxy's
# own work per change, the kernel left out).
BENCH_ENGINE_SERVICES ?= 30000
# Services of the large table (large.md: cold sync, one change, save, a
# full resync and --cleanup; about 4 min at 100,000).
BENCH_LARGE_SERVICES ?= 100000
# The churn side by side (churn.md, churn.png): services,minutes,updates
# per second, nftproxy then kube-proxy's nftables mode (about 35 min).
BENCH_CHURN ?= 30000,10,20
bench: e2e-binaries
	$(GO) test -count=1 -run '^$$' -bench . -benchmem -timeout $(TEST_TIMEOUT) ./nftgen ./compat ./proxier/model ./proxier/objfile
	NFTPROXY_LARGE_SERVICES=$(BENCH_LARGE_SERVICES) NFTPROXY_BENCH_OUT=$(CURDIR)/e2e/results/bench \
	$(GO) test -count=1 -v -timeout 30m -run TestLargeScale ./e2e
	NFTPROXY_BENCH_SERVICES=$(BENCH_ENGINE_SERVICES) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '^$$' \
		-bench OneServiceChange -benchmem -benchtime 2000x ./proxier
	NFTPROXY_BENCH_SIZES=$(BENCH_SIZES) NFTPROXY_BENCH_CONNS=$(BENCH_CONNS) NFTPROXY_BENCH_ROUNDS=$(BENCH_ROUNDS) \
	NFTPROXY_BENCH_OUT=$(CURDIR)/e2e/results/bench $(GO) test -count=1 -v -timeout 40m -run TestSideBySide ./e2e
	NFTPROXY_DAEMON_SIZES=$(BENCH_DAEMON_SIZES) NFTPROXY_BENCH_OUT=$(CURDIR)/e2e/results/bench \
	$(GO) test -count=1 -v -timeout 120m -run TestDaemonsSideBySide ./e2e
	NFTPROXY_CHURN=$(BENCH_CHURN) NFTPROXY_BENCH_OUT=$(CURDIR)/e2e/results/bench \
	$(GO) test -count=1 -v -timeout 90m -run TestChurnSideBySide ./e2e
	$(MAKE) plots

# The PNG plots of make bench, drawn from its CSV files by e2e/tools/plot,
# a module of its own (the plotting library stays out of nftproxy's go.mod).
BENCH_OUT := $(CURDIR)/e2e/results/bench
plots:
	cd e2e/tools/plot && timeout $(TEST_TIMEOUT) $(GO) run . -results $(BENCH_OUT)/results.csv -out $(BENCH_OUT)/results.png
	cd e2e/tools/plot && timeout $(TEST_TIMEOUT) $(GO) run . -churn $(BENCH_OUT)/churn.csv -out $(BENCH_OUT)/churn.png \
		-title "$$(echo $(BENCH_CHURN) | cut -d, -f1) Services, $$(echo $(BENCH_CHURN) | cut -d, -f3) updates/s"

# Unit tests only; no root, no kernel.
unit:
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./nftgen/... ./proxier/... ./compat/... ./cmd/...

# Builds, programs the example Services in a throwaway namespace topology,
# sends traffic and prints the split and the ruleset, then cleans up.
demo: build
	./$(BIN)/demo -nftproxy $(BIN)/nftproxy -echo $(BIN)/echoserver -objects deploy/examples/services.yaml

# The container image as an OCI archive, without a container daemon or
# builder: a static binary, stamped with VERSION, on an empty base
# (deploy/image). ARCH picks the architecture (GOARCH); load the archive
# with podman load -i, skopeo copy oci-archive:..., ctr images import or
# docker load. `make image-docker` builds the Dockerfile with a builder.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
ARCH ?= $(shell $(GO) env GOARCH)
IMAGE ?= nftproxy:$(VERSION)
OTHER_ARCHS ?= $(filter-out $(ARCH),amd64 arm64)
image:
	@mkdir -p $(BIN)
	for a in $(ARCH) $(OTHER_ARCHS); do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $(BIN)/nftproxy-linux-$$a ./cmd/nftproxy || exit 1; done
	$(GO) run ./deploy/image -binary $(BIN)/nftproxy-linux-$(ARCH) -arch $(ARCH) $(foreach a,$(OTHER_ARCHS),-other $(a)=$(BIN)/nftproxy-linux-$(a)) -tag $(IMAGE) -version $(VERSION) -o $(BIN)/nftproxy-image-$(ARCH).tar
	@echo "image: $(BIN)/nftproxy-image-$(ARCH).tar ($(IMAGE), linux/$(ARCH) $(OTHER_ARCHS))"

image-docker:
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

clean:
	rm -rf $(BIN)
