# phalanx — see README.md. Every target installs what it needs through the Go
# module proxy; nothing is expected on the machine beyond Go, make and bash.

SHELL := /usr/bin/env bash
GO ?= go
BIN := bin
PKG := github.com/phalanx-sched/phalanx

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
K8S_VERSION := $(shell $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes)
K8S_MINOR := $(word 2,$(subst ., ,$(K8S_VERSION)))
LDFLAGS := -X $(PKG)/internal/version.Version=$(VERSION) \
	-X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=$(K8S_MINOR)

IMAGE ?= ghcr.io/phalanx-sched/phalanx:$(VERSION)
# Integration and simulator runs take longer than go test's 10-minute default.
TEST_TIMEOUT ?= 30m

.PHONY: all build test unit integration workloads verify lint generate manifests demo bench image clean

all: build

## build: the scheduler, the controller and the simulator into bin/
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/phalanx-scheduler ./cmd/phalanx-scheduler
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/phalanx-controller ./cmd/phalanx-controller
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/phalanx-sim ./cmd/phalanx-sim

## test: everything CI checks — verify, unit tests, integration tests on a real API server
test: verify build unit integration workloads

unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /test/integration)

integration: build
	PHALANX_SCHEDULER_BIN=$(CURDIR)/$(BIN)/phalanx-scheduler \
		$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./test/integration/...

## workloads: the operators' controllers and CRDs (JobSet, LeaderWorkerSet,
## KubeRay, training-operator, Trainer) against phalanx; a separate Go module
## (test/workloads) so their dependencies do not move the main module's
workloads:
	cd test/workloads && $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

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

## image: the container image (needs a Docker engine)
image:
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

clean:
	rm -rf $(BIN)
