# Makefile: developer entry points. CI runs .ci/run, which uses these targets.
#
#   make test        the test suite (go test ./...), as the README says: the long
#                    sweeps run a representative part unless PCPX_LONG_TESTS=1
#   make test-long   the test suite with every long sweep (PCPX_LONG_TESTS=1)
#   make race        the test suite with the race detector
#                    (GOTESTFLAGS adds go test flags to these three, e.g. -count=1;
#                    TESTPARALLEL: parallel tests per package and TESTP: packages
#                    at once, 4 each by default for test and test-long (go test's
#                    default is the number of CPUs) since the end-to-end runs wait
#                    on their peers, not on the CPU; race runs one parallel test
#                    per CPU, go test's default (which cmd/pcp-exporter's TestMain
#                    raises to 4 when -parallel is not given): the detector makes
#                    the tests CPU-bound)
#   make build       every package and the static binary ./pcp-exporter
#                    (CGO_ENABLED=0, version stamped)
#   make lint        go vet + gofmt -l (fails on any unformatted file) + staticcheck
#                    (the Go tool in go.mod) + shellcheck + no conflict markers
#   make fuzz        every Fuzz target for FUZZTIME (default 5s) each
#   make bench       every side-by-side comparison with the PCP peers + Go benchmarks -> docs/performance.md
#   make bench-compare BASE=REV  the user workloads by REV's build and this tree's,
#                    in turns in one run (bench/compare.sh)
#   make bench-go    every Go benchmark once, with -benchmem
#   make bench-peers every bench/*/run.sh (side-by-side runs against real PCP peers)
#   make soak        the soak test script (scripts/soak.sh; SOAK_DURATION)
#   make generate    go generate ./... (derive's parser tables)
#   make helm        helm lint --strict + helm template of deploy/helm for every ci/*-values.yaml
#   make image       OCI image of the static binary (deploy/image), checked to answer --version
#   make package     .deb and .rpm in dist/ (scripts/build-packages.sh: nfpm, the Go tool in go.mod)
#   make mixin       render mixin/ (jsonnet) into its committed YAML and JSON files

GO        ?= go
PKG       := github.com/pcp-exporter/pcp-exporter
BINARY    ?= pcp-exporter
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BRANCH    ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
BUILDUSER ?= $(shell id -un 2>/dev/null || echo unknown)@$(shell hostname 2>/dev/null || echo unknown)
BUILDDATE ?= $(shell date -u +%Y%m%d-%H:%M:%S)
FUZZTIME  ?= 5s
GOTESTFLAGS ?=
# go test's per-package deadline: cmd/pcp-exporter's end-to-end tests run one
# after another for more than 10 minutes with PCPX_LONG_TESTS=1 (go test's
# default is 10 minutes)
TESTTIMEOUT ?= 45m
TESTPARALLEL ?= 4
TESTP ?= 4
RACEPARALLEL ?= $(shell nproc 2>/dev/null || echo 2)
VPKG      := github.com/prometheus/common/version
LDFLAGS   := -s -w \
	-X $(VPKG).Version=$(VERSION) \
	-X $(VPKG).Revision=$(REVISION) \
	-X $(VPKG).Branch=$(BRANCH) \
	-X $(VPKG).BuildUser=$(BUILDUSER) \
	-X $(VPKG).BuildDate=$(BUILDDATE)

.PHONY: all test test-long race build binary generate lint vet fmt staticcheck shellcheck conflicts fuzz bench bench-compare bench-go bench-peers soak helm image package mixin clean

all: lint build test

test:
	$(GO) test -timeout $(TESTTIMEOUT) -p $(TESTP) -parallel $(TESTPARALLEL) $(GOTESTFLAGS) ./...

test-long:
	PCPX_LONG_TESTS=1 $(GO) test -timeout $(TESTTIMEOUT) -p $(TESTP) -parallel $(TESTPARALLEL) $(GOTESTFLAGS) ./...

race:
	$(GO) test -race -timeout $(TESTTIMEOUT) -parallel $(RACEPARALLEL) $(GOTESTFLAGS) ./...

build:
	CGO_ENABLED=0 $(GO) build ./...
	$(MAKE) --no-print-directory binary

# binary: the static, version-stamped binary alone
binary:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BINARY) ./cmd/pcp-exporter

generate:
	$(GO) generate ./...

vet:
	$(GO) vet ./...

fmt:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt: these files are not formatted:"; echo "$$out"; exit 1; fi

# staticcheck's default checks; a deliberate exception is a //lint:ignore
# with its reason next to the line
staticcheck:
	$(GO) tool staticcheck ./...

shellcheck:
	shellcheck .ci/run scripts/*.sh examples/*/*.sh packaging/scripts/*.sh

# a merge's conflict markers left in any tracked file
conflicts:
	@if git grep -nE '^(<<<<<<<|>>>>>>>)( |$$)'; then echo "conflict markers left by a merge"; exit 1; fi

lint: vet fmt staticcheck shellcheck conflicts

# Each fuzz target runs alone (go test -fuzz accepts one target per package run).
fuzz:
	GO=$(GO) bash scripts/fuzz.sh $(FUZZTIME)

bench:
	bash bench/run-all.sh

# make bench-compare BASE=<commit>: the user workloads by BASE's build and
# the working tree's, side by side in one run (bench/compare.sh).
bench-compare:
	bash bench/compare.sh $(or $(BASE),$(error set BASE=<commit>))

bench-go:
	GOMAXPROCS=$${GOMAXPROCS:-1} $(GO) test -run '^$$' -bench . -benchmem -count 1 ./...

bench-peers:
	@set -e; for s in bench/*/run.sh; do echo "== $$s"; bash "$$s"; done

soak:
	bash scripts/soak.sh

helm:
	bash scripts/check-helm.sh

image:
	bash scripts/build-image.sh

package:
	GO=$(GO) bash scripts/build-packages.sh dist

mixin:
	$(MAKE) -C mixin

clean:
	rm -f $(BINARY)
	rm -rf dist
