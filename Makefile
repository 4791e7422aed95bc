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

.PHONY: all build test unit integration workloads e2e stress verify lint generate manifests demo bench image clean

all: build

## build: the scheduler, the controller and the simulator into bin/
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/phalanx-scheduler ./cmd/phalanx-scheduler
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/phalanx-controller ./cmd/phalanx-controller
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/phalanx-sim ./cmd/phalanx-sim

## test: everything CI checks — verify, unit tests, integration tests on a real API server,
## the operators' controllers (workloads), e2e
test: verify build unit integration workloads e2e

unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v -e /test/integration -e /test/e2e)

integration: build
	PHALANX_SCHEDULER_BIN=$(CURDIR)/$(BIN)/phalanx-scheduler \
		$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./test/integration/...

## workloads: the operators' controllers and CRDs (JobSet, LeaderWorkerSet,
## KubeRay, training-operator, Trainer) against phalanx; a separate Go module
## (test/workloads) so their dependencies do not move the main module's
workloads:
	cd test/workloads && $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

## e2e: test/e2e in both modes on an in-process API server that enforces RBAC,
## with the chart applied and the binaries run as their pod specs say (bubblewrap,
## installed by hack/ensure-bwrap.sh). On kind: hack/e2e-kind.sh.
e2e: build
	bash hack/ensure-bwrap.sh
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
	cd test/workloads && $(GO) vet ./...
	bash hack/tools.sh
	$(BIN)/tools/staticcheck $$($(GO) list ./... | grep -v /pkg/generated/)
	cd test/workloads && $(CURDIR)/$(BIN)/tools/staticcheck ./...

## generate: deepcopy, conversion, defaults, clients, CRDs, install manifests
generate:
	bash hack/update-codegen.sh
	bash hack/update-manifests.sh

## demo: an in-process cluster, the scheduler, the reference scenarios, a report
demo:
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/phalanx-sim demo

## bench: stock kube-scheduler profile vs phalanx in one run; pods/s and ratios
bench:
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/phalanx-sim bench

## image: the container image $(IMAGE) (needs a Docker engine); push it yourself
image:
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

clean:
	rm -rf $(BIN)
