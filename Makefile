# Makefile: developer entry points. CI runs .ci/run, which uses these targets.
#
#   make test        the test suite (go test ./...), as the README says
#   make race        the test suite with the race detector
#   make build       static binary ./pcp-exporter (CGO_ENABLED=0, version stamped)
#   make lint        go vet + gofmt -l (fails on any unformatted file) + shellcheck
#   make fuzz        every Fuzz target for FUZZTIME (default 5s) each
#   make bench       every side-by-side comparison with the PCP peers + Go benchmarks -> docs/performance.md
#   make bench-go    every Go benchmark once, with -benchmem
#   make bench-peers every bench/*/run.sh (side-by-side runs against real PCP peers)
#   make soak        the soak test script (scripts/soak.sh)
#   make helm        helm lint --strict + helm template of deploy/helm for every ci/*-values.yaml
#   make image       OCI image of the static binary (deploy/image), checked to answer --version

GO        ?= go
PKG       := github.com/pcp-exporter/pcp-exporter
BINARY    ?= pcp-exporter
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BRANCH    ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
BUILDUSER ?= $(shell id -un 2>/dev/null || echo unknown)@$(shell hostname 2>/dev/null || echo unknown)
BUILDDATE ?= $(shell date -u +%Y%m%d-%H:%M:%S)
FUZZTIME  ?= 5s
VPKG      := github.com/prometheus/common/version
LDFLAGS   := -s -w \
	-X $(VPKG).Version=$(VERSION) \
	-X $(VPKG).Revision=$(REVISION) \
	-X $(VPKG).Branch=$(BRANCH) \
	-X $(VPKG).BuildUser=$(BUILDUSER) \
	-X $(VPKG).BuildDate=$(BUILDDATE)

.PHONY: all test race build lint vet fmt shellcheck fuzz bench bench-go bench-peers soak helm image clean

all: lint build test

test:
	$(GO) test ./...

race:
	$(GO) test -race ./...

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BINARY) ./cmd/pcp-exporter

vet:
	$(GO) vet ./...

fmt:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt: these files are not formatted:"; echo "$$out"; exit 1; fi

shellcheck:
	shellcheck .ci/run scripts/*.sh examples/*/*.sh

lint: vet fmt shellcheck

# Each fuzz target runs alone (go test -fuzz accepts one target per package run).
fuzz:
	GO=$(GO) bash scripts/fuzz.sh $(FUZZTIME)

bench:
	bash bench/run-all.sh

bench-go:
	GOMAXPROCS=$${GOMAXPROCS:-1} $(GO) test -run '^$$' -bench . -benchmem -count 1 ./...

bench-peers:
	@set -e; found=0; \
	for s in bench/*/run.sh; do \
		[ -x "$$s" ] || [ -f "$$s" ] || continue; found=1; \
		echo "== $$s"; bash "$$s"; \
	done; \
	if [ $$found = 0 ]; then echo "make bench-peers: no bench/*/run.sh scripts in this tree" >&2; exit 1; fi

soak:
	@if [ ! -f scripts/soak.sh ]; then echo "make soak: scripts/soak.sh does not exist yet (no soak test in this tree)" >&2; exit 1; fi
	bash scripts/soak.sh

helm:
	@if [ ! -f scripts/check-helm.sh ]; then echo "make helm: scripts/check-helm.sh does not exist yet" >&2; exit 1; fi
	bash scripts/check-helm.sh

image:
	@if [ ! -f scripts/build-image.sh ]; then echo "make image: scripts/build-image.sh does not exist yet" >&2; exit 1; fi
	bash scripts/build-image.sh

clean:
	rm -f $(BINARY)
