# phalanx — see README.md. Every target installs what it needs through the Go
# module proxy; nothing is expected on the machine beyond Go, make and bash.

SHELL := /usr/bin/env bash
GO ?= go
BIN := bin
PKG := github.com/phalanx-sched/phalanx

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
# The same flags as the Dockerfile's build (hack/ldflags.sh).
LDFLAGS := $(shell bash hack/ldflags.sh $(VERSION))

# The image tag is the chart's appVersion: the chart and manifests/ name exactly
# the image `make image` builds. Push it where your nodes pull from.
APP_VERSION := $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' charts/phalanx/Chart.yaml)
IMAGE ?= ghcr.io/phalanx-sched/phalanx:$(APP_VERSION)
# Integration and simulator runs take longer than go test's 10-minute default.
TEST_TIMEOUT ?= 30m

.PHONY: all build tools test unit integration workloads karmada e2e stress verify lint generate manifests demo trace bench bench-estimator bench-global bench-perf bench-all bench-bins image clean

all: build

## build: the scheduler, the controller, the global tier, the simulator and the CLI into bin/
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/phalanx-scheduler ./cmd/phalanx-scheduler
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/phalanx-controller ./cmd/phalanx-controller
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/phalanx-global ./cmd/phalanx-global
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/phalanx-sim ./cmd/phalanx-sim
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-phalanx ./cmd/kubectl-phalanx

## test: everything CI checks — verify, unit tests, integration tests on a real API server,
## the operators' controllers (workloads), Karmada, e2e. The binaries and tools are
## built first; then the suites run TEST_JOBS at a time (they wait on API servers more
## than they compute), each suite's output printed whole when it ends, and a failed
## suite named at the end (make: *** [...: <suite>] Error).
TEST_JOBS ?= 3
test:
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory build tools && \
	$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target verify unit integration workloads karmada e2e; \
	rc=$$?; echo "make test: rc=$$rc in $$(( $$(date +%s) - start ))s"; exit $$rc

## tools: the pinned code generators, linters and helm into bin/tools (hack/tools.sh)
tools:
	bash hack/tools.sh

unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v -e /test/integration -e /test/e2e)

## integration: each test in its own process, INTEGRATION_JOBS at a time
## (hack/test-parallel.sh; test/integration/slow.txt starts the longest first)
INTEGRATION_JOBS ?= 3
integration: build
	$(GO) build -o $(BIN)/kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
	PHALANX_SCHEDULER_BIN=$(CURDIR)/$(BIN)/phalanx-scheduler KUBE_SCHEDULER_BIN=$(CURDIR)/$(BIN)/kube-scheduler \
	PHALANX_TEST_TIMEOUT=$(TEST_TIMEOUT) \
		bash hack/test-parallel.sh test/integration $(INTEGRATION_JOBS)

## workloads: the operators' controllers and CRDs (JobSet, LeaderWorkerSet,
## KubeRay, training-operator, Trainer) against phalanx; a separate Go module
## (test/workloads) so their dependencies do not move the main module's
workloads:
	cd test/workloads && $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

## karmada: Karmada's real components (karmada-scheduler, karmada-aggregated-apiserver,
## karmada-scheduler-estimator, v1.18.2) against phalanx's estimator; a separate Go module
## (test/karmada, Karmada's commands built from test/karmada/upstream at Karmada's own versions)
karmada: build
	cd test/karmada && PHALANX_SCHEDULER_BIN=$(CURDIR)/$(BIN)/phalanx-scheduler PHALANX_GLOBAL_BIN=$(CURDIR)/$(BIN)/phalanx-global \
		PHALANX_KUBECTL_BIN=$(CURDIR)/$(BIN)/kubectl-phalanx \
		$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

## e2e: test/e2e in both modes on an in-process API server that enforces RBAC,
## with the chart applied and the binaries run as their pod specs say (bubblewrap,
## installed by hack/ensure-deb.sh). On kind: hack/e2e-kind.sh.
e2e: build
	bash hack/ensure-deb.sh bwrap bubblewrap
	bash hack/tools.sh
	PHALANX_BIN_DIR=$(CURDIR)/$(BIN) PHALANX_HELM=$(CURDIR)/$(BIN)/tools/helm \
		$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./test/e2e/...

## stress: the kill -9 crash-recovery test over many seeds (make test runs a few)
STRESS_SEEDS ?= 50
stress: build
	PHALANX_SCHEDULER_BIN=$(CURDIR)/$(BIN)/phalanx-scheduler PHALANX_CRASH_SEEDS=$(STRESS_SEEDS) \
		$(GO) test -count=1 -timeout 120m -run TestCrashRecovery -v ./test/integration/

## verify: formatting, vet, lint, and generated files up to date
verify: lint
	bash hack/verify-codegen.sh
	bash hack/verify-manifests.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run ./hack/sizes -check
	cd test/workloads && $(GO) vet ./...
	cd test/karmada && $(GO) vet ./...
	bash hack/tools.sh
	$(BIN)/tools/staticcheck $$($(GO) list ./... | grep -v /pkg/generated/)
	cd test/workloads && $(CURDIR)/$(BIN)/tools/staticcheck ./...
	cd test/karmada && $(CURDIR)/$(BIN)/tools/staticcheck ./...

## generate: deepcopy, conversion, defaults, clients, CRDs, install manifests
generate:
	bash hack/update-codegen.sh
	bash hack/update-manifests.sh

## demo: an in-process cluster, the scheduler, the reference scenarios, a report
demo:
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/phalanx-sim demo

## trace: a generated openb-derived trace (examples/trace) replayed with phalanx,
## phalanx without its fragmentation score (phalanx-no-fgd),
## stock kube-scheduler and upstream's gang plugin in turns, time-compressed;
## report/trace/trace.html and the CSVs it replayed. Not part of make test
## (TestTraceReplayShort in make unit replays a tiny trace with phalanx).
## TRACE_ARGS="-generate -seed 2 -load 1.3" etc.; your own history:
## TRACE_ARGS="-nodes n.csv -jobs j.csv -queues q.csv -speed 20" (docs/simulator.md).
## Then the shipped larger traces (examples/trace/cluster-64x8 at 50x, about
## 21 min; cluster-512 at 10x, the speed 2 cores follow, about 25 min a
## scheduler) with TRACE_LARGE_SCHEDULERS, unless TRACE_LARGE= is empty:
## reports report/trace/cluster-*.html.
TRACE_ARGS ?= -generate -seed 1 -load 1.25 -speed 50
TRACE_LARGE ?= cluster-64x8:50 cluster-512:10
TRACE_LARGE_SCHEDULERS ?= phalanx,phalanx-consolidate,stock,upstream-gang
trace: bench-bins
	$(BIN)/phalanx-sim trace -kube-scheduler $(BIN)/kube-scheduler -out report/trace -html report/trace/trace.html $(TRACE_ARGS)
	@for t in $(TRACE_LARGE); do name=$${t%%:*}; speed=$${t##*:}; d=examples/trace/$$name; \
	  echo "== $$name at $${speed}x"; \
	  $(BIN)/phalanx-sim trace -kube-scheduler $(BIN)/kube-scheduler -nodes $$d/nodes.csv -jobs $$d/jobs.csv -queues $$d/queues.csv \
	    -speed $$speed -schedulers $(TRACE_LARGE_SCHEDULERS) -html report/trace/$$name.html -details report/trace/$$name || exit 1; done

## bench: stock kube-scheduler, upstream GangScheduling, phalanx and raw binds side by side
## (child processes, one API server per workload): pods/s, CPU/pod, peak RSS,
## top costs, ratios; medians of 3 passes. BENCH_ARGS="-profile -only gangs" etc.
## Then the Karmada estimator's latency (bench-estimator) and the global tier (bench-global).
BENCH_ARGS ?=
bench: bench-bins
	$(BIN)/phalanx-sim bench -kube-scheduler $(BIN)/kube-scheduler -phalanx-scheduler $(BIN)/phalanx-scheduler $(BENCH_ARGS)
	$(BIN)/phalanx-sim estimator-bench -phalanx-scheduler $(BIN)/phalanx-scheduler $(ESTIMATOR_ARGS)
	$(BIN)/phalanx-sim global-bench $(GLOBAL_ARGS)

## bench-estimator: the Karmada estimator's answer time on a 5000-node member
## (half its GPUs taken) for a 1024-pod set, with and without a required
## ib-cluster, and for single replicas: client round trip and the estimator's
## own time, median, range, p95 of 20 calls. ESTIMATOR_ARGS="-profile -runs 50" etc.
ESTIMATOR_ARGS ?=
bench-estimator:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/phalanx-scheduler ./cmd/phalanx-scheduler
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/phalanx-sim ./cmd/phalanx-sim
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-phalanx ./cmd/kubectl-phalanx
	$(BIN)/phalanx-sim estimator-bench -phalanx-scheduler $(BIN)/phalanx-scheduler $(ESTIMATOR_ARGS)

## bench-global: the global tier (internal/global) in a simulated run on stand-in
## members (no gRPC, no API server) against Karmada's default dispatch (first come
## first served, most free GPUs): pass cost at 100 and 1000 waiting jobs, dispatches
## per second, waits, utilisation, team shares against weights; 3 and 20 members,
## medians of 5 seeds (~2 min). GLOBAL_ARGS="-runs 3 -members 3,20,50 -weights 2,1" etc.
GLOBAL_ARGS ?=
bench-global:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/phalanx-sim ./cmd/phalanx-sim
	$(BIN)/phalanx-sim global-bench $(GLOBAL_ARGS)

## bench-perf: the same workloads through upstream's scheduler_perf (plain and
## gang workloads by default; PERF_BENCH selects test cases, PERF_COUNT passes)
PERF_BENCH ?= BenchmarkPerfScheduling/(plain-pods|gangs)_
PERF_COUNT ?= 3
PERF_ARGS ?=
bench-perf: bench-bins
	PATH=$(CURDIR)/$(BIN):$$PATH ARTIFACTS=$$(mktemp -d) $(GO) test ./test/schedperf -run '^$$' -bench '$(PERF_BENCH)' \
		-benchtime 1x -count $(PERF_COUNT) -timeout 3h $(PERF_ARGS)

bench-all: bench bench-perf

# The binaries the benchmarks run: upstream kube-scheduler at the go.mod
# version, phalanx-scheduler, and the etcd stand-in scheduler_perf execs.
bench-bins:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/phalanx-scheduler ./cmd/phalanx-scheduler
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/phalanx-sim ./cmd/phalanx-sim
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-phalanx ./cmd/kubectl-phalanx
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
	$(GO) build -o $(BIN)/etcd ./test/schedperf/etcd

## image: the container image $(IMAGE) (needs a Docker engine); push it yourself
image:
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

clean:
	rm -rf $(BIN)
