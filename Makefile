# holdfast build and test entry points. `make test` is what CI runs (see .ci/run).
#
# `make test` tests seven modules: the library at the root (kept free of test-only heavyweights),
# the nested integration module in integration/ (real-Redis tests), the test harness in
# integration/redistest (published, so that holdfastotel's tests can use it; see
# docs/design.md), holdfastotel/ (the OpenTelemetry observer, OTel API modules only; SDK in its
# tests), holdfastgocron/ (gocron v2's Locker and Elector), holdfastasynq/ (asynq's scheduler
# run by a leader, per-key and per-type middlewares) and examples/otel (the example
# wiring Prometheus, redisotel and holdfastotel). The
# harness's testcontainers fallback is a module of its own, integration/redistest/containers,
# built only when a test needs it (see integration/redistest/doc.go); bench/ holds the benchmark
# tool.

GO ?= go
# Extra flags for the test runs, e.g. `make test TESTFLAGS=-v` or TESTFLAGS='-run Lock'.
TESTFLAGS ?=
# The go test flags of every test run: the race detector on, results never cached.
GOTESTFLAGS = -race -count=1 -timeout 15m $(TESTFLAGS)
# Arguments for the benchmark tool, e.g. `make bench BENCHARGS='-duration 30s'`.
BENCHARGS ?=
# Where `make bench` writes performance.md and img/ (bench/out/ is gitignored);
# `make bench-docs` writes docs/ instead, the tracked report.
BENCH_OUT ?= $(CURDIR)/bench/out
# The link between the benchmarks' clients and their private redis-server (bench, bench-semaphore,
# bench-loss, bench-scale; -link): loopback (the default: direct, PING 20–60 µs), proxy (a forwarding
# proxy, no added delay), slow (a proxy delaying each chunk 1 ms each way, PING about 2.3 ms) or
# slower (2 ms each way, PING about 4.5 ms), e.g. `make bench LINK=slow`. Each report's header gives
# the link and the PING measured through it; see "Link" in docs/performance.md's Definitions.
LINK ?=
LINKFLAG = $(if $(LINK),-link $(LINK))

GOFILES = $(shell find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*')

.DEFAULT_GOAL := test
## wake-table: how soon a waiting call of another client returns after a hold ends from outside
## (DEL, a count set by hand), per kind: p50/p99 over 50 rounds, and without client tracking for
## comparison (about 40 s).
wake-table: setup
	cd integration && $(GO) test -count=1 -run '^$$' -bench OutsideEnd -benchtime 1x .

.PHONY: wake-table test lint fmt-check vet vet-containers test-root test-integration test-otel test-fips test-bench setup servers test-servers release-check bench bench-semaphore bench-loss bench-scale cycle-compare bench-docs soak chaos partition fuzz

## test: the CI test command: setup (installs redis-server when missing), lint, then race
## tests of every module but bench (root, integration, redistest, the otel, gocron and asynq
## modules, examples/otel). One command on a fresh clone; setup is quick and silent but for
## one line when redis-server is there. scripts/test.sh runs `go test -json` in each module
## through scripts/testsum, which prints the output of what failed and closes with one line
## for all modules: "N passed, N failed, N skipped" (non-zero exit when anything failed).
test: setup lint
	@GO='$(GO)' bash scripts/test.sh . integration integration/redistest holdfastotel examples/otel holdfastgocron holdfastasynq -- $(GOTESTFLAGS)

## lint: gofmt check and go vet for every module.
lint: fmt-check vet

fmt-check:
	@out="$$(gofmt -l $(GOFILES))"; \
	if [ -n "$$out" ]; then echo "gofmt: these files need formatting (run gofmt -w):"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	cd integration && $(GO) vet ./...
	cd integration/redistest && $(GO) vet ./...
	cd holdfastotel && $(GO) vet ./...
	cd holdfastgocron && $(GO) vet ./...
	cd holdfastasynq && $(GO) vet ./...
	cd examples/otel && $(GO) vet ./...

## vet-containers: go vet in integration/redistest/containers, the testcontainers-go fallback of
## the Redis test harness, and its build test (build tag containers). Not part of `make test`:
## it downloads the Docker client (~40 modules), which the tests themselves only build when
## there is no redis-server binary.
vet-containers:
	cd integration/redistest/containers && $(GO) vet ./...
	cd integration/redistest && $(GO) test -tags containers -count=1 -run TestContainerFallbackBuild .

## test-bench: vet the bench module and run its unit tests (the shared harness, the link's
## proxy, the report writer; about 30 s, most of it building the peer libraries). In .ci/run.
test-bench:
	cd bench && $(GO) vet ./... && $(GO) test -count=1 ./...

## test-root, test-integration: the tests of one module, summarised the same way.
test-root:
	@GO='$(GO)' bash scripts/test.sh . -- $(GOTESTFLAGS)

test-integration:
	@GO='$(GO)' bash scripts/test.sh integration integration/redistest -- $(GOTESTFLAGS)

## test-otel: the OpenTelemetry modules only: holdfastotel and examples/otel.
test-otel:
	@GO='$(GO)' bash scripts/test.sh holdfastotel examples/otel -- $(GOTESTFLAGS)

## test-fips: holdfast under GODEBUG=fips140=only (Go's FIPS 140-only mode, where crypto/sha1
## panics): `holdfast version`, `holdfast demo`, and the integration tests that cover locks,
## semaphores, latches, election, the NOSCRIPT fallback and the CLI, each program started with
## the setting (scripts/test-fips.sh; about 40 s on 2 cores). CI runs it after `make test`.
test-fips: setup
	@GO='$(GO)' bash scripts/test-fips.sh

## setup: install what the tests need (redis-server) on a Debian machine; idempotent.
setup:
	@bash scripts/setup.sh

## servers: build the servers of the matrix (Redis 6.2.16, 7.4.1, Valkey 7.2.7, 8.0.1) from
## the tarballs in $$HOLDFAST_SERVER_SOURCES (default ../shared/servers) into .cache/servers,
## about a minute each, once; list them with Debian's redis-server.
servers: setup
	@bash scripts/servers.sh

## test-servers: the integration tests on each of the five servers, two at a time, one
## line of counts per server, then every skip with its reason (scripts/test-servers.sh;
## about 21 minutes on 2 cores, plus the builds the first time).
test-servers: setup
	@GO='$(GO)' bash scripts/test-servers.sh

## release-check: what a user runs against the published modules (go get, go mod tidy, build,
## vet, go install …/cmd/holdfast@VERSION), in a new module, with the modules served at
## v0.99.0 from a local file-system proxy after scripts/release.sh (scripts/release-check.sh;
## about a minute).
release-check:
	@GO='$(GO)' bash scripts/release-check.sh

## bench: run the benchmark tool (about 4 minutes), then bench-semaphore, writing to $(BENCH_OUT),
## leaving the tracked docs/performance.md alone. LINK=slow (or proxy, slower) runs them, like
## bench-loss and bench-scale, over a slower link (see LINK above).
bench:
	cd bench && $(GO) run ./cmd/holdfast-bench -out $(abspath $(BENCH_OUT)) $(LINKFLAG) $(BENCHARGS)
	@echo "bench: report in $(abspath $(BENCH_OUT))/performance.md; \`make bench-docs\` updates docs/performance.md and docs/img/"
	$(MAKE) bench-semaphore BENCH_OUT=$(abspath $(BENCH_OUT))

## bench-semaphore: the semaphores against the Mutex, PING and two polling Redis semaphores (about
## 1.5 minutes; arguments in SEMBENCHARGS): writes $(BENCH_OUT)/semaphore.md, then runs the Go
## benchmarks of the uncontended cycles (integration/bench_test.go).
SEMBENCHARGS ?=
bench-semaphore:
	cd bench && $(GO) run ./cmd/semaphore-bench -out $(abspath $(BENCH_OUT)) $(LINKFLAG) $(SEMBENCHARGS)
	cd integration && $(GO) test -run '^$$' -bench 'Semaphore' -benchtime 2000x .

## bench-loss: how soon a holder learns its lock was deleted, holdfast against rueidislock, and what
## client tracking costs the server (about 1.5 minutes; arguments in LOSSBENCHARGS): writes
## $(BENCH_OUT)/loss.md.
LOSSBENCHARGS ?=
bench-loss:
	cd bench && $(GO) run ./cmd/loss-bench -out $(abspath $(BENCH_OUT)) $(LINKFLAG) $(LOSSBENCHARGS)

## bench-scale: how cost grows, holdfast beside the peers (about 8 minutes; arguments in
## SCALEBENCHARGS): processes on one lock (1–32 × 4 goroutines), names (1–10,000, 64
## goroutines), the watchdog's renewal rounds (1–100,000 holds) and memory per hold and per
## waiter. Writes $(BENCH_OUT)/scale.md and img/scale-*.png, and puts the same section
## ("How cost grows") into $(BENCH_OUT)/performance.md when that file is there.
SCALEBENCHARGS ?=
bench-scale:
	cd bench && $(GO) run ./cmd/scale-bench -out $(abspath $(BENCH_OUT)) $(LINKFLAG) $(SCALEBENCHARGS)

## cycle-compare: the uncontended Lock+Unlock cycle of the working tree against git revision REF
## (default HEAD~1), in one process, interleaved op by op (about 30 s): before and after in one run.
REF ?= HEAD~1
cycle-compare:
	@GO='$(GO)' bash scripts/cycle-compare.sh $(REF)

## bench-docs: the same run, rewriting docs/performance.md and docs/img/ (commit them).
bench-docs:
	$(MAKE) bench BENCH_OUT=$(CURDIR)/docs
	$(MAKE) bench-loss BENCH_OUT=$(CURDIR)/docs
	$(MAKE) bench-scale BENCH_OUT=$(CURDIR)/docs

## soak: the long fault-injection run (build tag soak); length: SOAK_DURATION (default 2m).
SOAK_DURATION ?= 2m
soak:
	cd integration && HOLDFAST_SOAK_DURATION=$(SOAK_DURATION) $(GO) test -tags soak -race -count=1 -run Soak -v -timeout 60m $(TESTFLAGS) .

## chaos: the fault matrix's full tier (integration/chaos: worker processes under every fault,
## one CHAOS {json} line per scenario), then every fuzz target for FUZZTIME each (`make fuzz`,
## 7 targets). How long each takes: docs/safety.md, "Fault matrix" (stated there only). The
## short tier and the fuzz corpora run in `make test`.
chaos:
	cd integration && HOLDFAST_CHAOS=full $(GO) test -race -count=1 -run 'TestChaos$$' -v -timeout 60m $(TESTFLAGS) ./chaos/
	$(MAKE) fuzz

## partition: the partition tier of the fault matrix (integration/chaos, HOLDFAST_CHAOS=partition):
## servers, Sentinels, Cluster nodes and worker processes each in a network namespace of its own
## (needs root, ip and nft: `make setup` installs them), cut apart with nft rules; one CHAOS {json}
## line per scenario. How long it takes: docs/safety.md, "Partitions".
partition: setup
	cd integration && HOLDFAST_CHAOS=partition $(GO) test -race -count=1 -run 'TestChaos$$' -v -timeout 60m $(TESTFLAGS) ./chaos/

## fuzz: run each Go fuzz target for FUZZTIME (default 30s; e.g. `make fuzz FUZZTIME=5m`), one
## after the other: lua's (names, slots, script replies), rlock's (option and argument
## validation) and integration's (lock step sequences against a real redis-server). Their
## committed corpora (testdata/fuzz/) run as ordinary tests in `make test`; a failing input is
## written to testdata/fuzz/<Target>/, new interesting ones stay in Go's fuzz cache.
FUZZTIME ?= 30s
fuzz:
	@set -e; for p in lua rlock integration; do \
		dir=.; pkg=./$$p; if [ $$p = integration ]; then dir=integration; pkg=.; fi; \
		for t in $$(cd $$dir && $(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "fuzz: $$p $$t for $(FUZZTIME)"; \
			(cd $$dir && $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$pkg); \
		done; \
	done
