# holdfast build and test entry points. `make test` is what CI runs (see .ci/run).
#
# Two modules: the library at the root (kept free of test-only heavyweights) and the nested
# integration module in integration/ (real-Redis tests, testcontainers fallback).

GO ?= go
# Extra flags for the test runs, e.g. `make test TESTFLAGS=-v` or TESTFLAGS='-run Lock'.
TESTFLAGS ?=
# Arguments for the benchmark tool, e.g. `make bench BENCHARGS='-duration 30s'`.
BENCHARGS ?=

GOFILES = $(shell find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*')

.DEFAULT_GOAL := test
.PHONY: test lint fmt-check vet test-root test-integration setup bench soak

## test: the CI test command: lint, then race tests of both modules.
test: lint test-root test-integration

## lint: gofmt check and go vet for both modules.
lint: fmt-check vet

fmt-check:
	@out="$$(gofmt -l $(GOFILES))"; \
	if [ -n "$$out" ]; then echo "gofmt: these files need formatting (run gofmt -w):"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	cd integration && $(GO) vet ./...

test-root:
	$(GO) test -race -count=1 $(TESTFLAGS) ./...

test-integration:
	cd integration && $(GO) test -race -count=1 -timeout 15m $(TESTFLAGS) ./...

## setup: install what the tests need (redis-server) on a Debian machine.
setup:
	bash scripts/setup.sh

## bench: run the benchmark tool against Redis.
bench:
	cd bench && $(GO) run ./cmd/holdfast-bench $(BENCHARGS)

## soak: the long fault-injection run (build tag soak); length: SOAK_DURATION (default 2m).
SOAK_DURATION ?= 2m
soak:
	cd integration && HOLDFAST_SOAK_DURATION=$(SOAK_DURATION) $(GO) test -tags soak -race -count=1 -run Soak -v -timeout 60m $(TESTFLAGS) .
