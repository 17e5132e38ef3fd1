# Switchyard: the two commands that matter are `make dev` and `make test`.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
SDK_VERSION := v1.8.0
EVERYTHING := $(BIN)/everything-server
TASKS_SERVER := $(BIN)/tasks-server
EVERYTHING_HTTP_ADDR ?= 127.0.0.1:3001
CONFIG ?= examples/dev.yaml
MODULES := proto internal testutil edge router upstream-worker tenancy-svc bench switchyard
TEST_FLAGS ?= -race -count=1 -shuffle=on -timeout 25m
ROLES := edge router upstream-worker tenancy-svc

.PHONY: all build dev test chromium vet fmt-check lint fuzz chaos chaos-short bench bench-gate bench-hops bench-micro bench-bus bench-sessions loadtest loadtest-cluster loadtest-scale compose-bench tidy check-mods upstreams clean conformance conformance-direct conformance-install

all: build

## build: every executable into bin/, static (CGO_ENABLED=0) like the
## container images: no libc mapped into each process, ~3 MiB less idle RSS
## per process (docs/benchmarks.md), and the pure-Go DNS resolver.
## BUILD_TAGS: grpcnotrace builds gRPC (the OTLP/gRPC trace exporter's)
## without golang.org/x/net/trace, whose html/template import brings
## text/template's MethodByName, and with it the linker keeps every exported
## method of every type: 49 → 42 MB, ~3 MiB less idle RSS per process
## (docs/benchmarks.md). The Dockerfile builds with the same tags;
## switchyard/internal/composecheck checks both.
BUILD_ENV := CGO_ENABLED=0
BUILD_TAGS := grpcnotrace
GO_BUILD := $(GO) build -tags=$(BUILD_TAGS)
build: upstreams
	@mkdir -p $(BIN)
	cd switchyard && $(BUILD_ENV) $(GO_BUILD) -o $(BIN)/switchyard ./cmd/switchyard
	cd bench && $(BUILD_ENV) $(GO_BUILD) -o $(BIN)/bench ./cmd/bench
	@for r in $(ROLES); do (cd $$r && $(BUILD_ENV) $(GO_BUILD) -o $(BIN)/$$r ./cmd/$$r) || exit 1; done

## upstreams: the go-sdk conformance everything-server, from the pinned SDK module,
## and the tasks-extension fixture (testutil/cmd/tasks-server, rebuilt each time)
upstreams: $(EVERYTHING)
	@mkdir -p $(BIN)
	cd testutil && $(GO) build -o $(TASKS_SERVER) ./cmd/tasks-server
$(EVERYTHING):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) GOFLAGS=-mod=mod GOWORK=off $(GO) install github.com/modelcontextprotocol/go-sdk/conformance/everything-server@$(SDK_VERSION)

## dev: the embedded gateway on 127.0.0.1:8080 with real upstreams;
## DEV_NATS_LISTEN=127.0.0.1:4222 also opens its embedded NATS to other
## processes (the `switchyard tenancy` CLI, extra workers)
DEV_NATS_LISTEN ?=
dev: build
	@$(EVERYTHING) -http $(EVERYTHING_HTTP_ADDR) -stateless=false > /tmp/switchyard-everything-http.log 2>&1 & \
	  pid=$$!; trap "kill $$pid 2>/dev/null" EXIT INT TERM; \
	  echo "everything-server (HTTP) on http://$(EVERYTHING_HTTP_ADDR)/ (pid $$pid)"; \
	  $(BIN)/switchyard dev --config $(CONFIG) $(if $(DEV_NATS_LISTEN),--nats-listen $(DEV_NATS_LISTEN))

## chromium: the headless browser the browser tests drive (chromedp), the
## Debian package; installed once (needs root and the package mirror)
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium (Debian package)"; \
	  (apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 || \
	   (apt-get update >/dev/null && apt-get install -y --no-install-recommends chromium >/dev/null)); }
	@command -v chromium

## test: every module's tests, with the race detector
test: upstreams chromium
	@set -e; browser=$$(command -v chromium); for m in $(MODULES); do \
	  echo "== $$m"; \
	  (cd $$m && SWITCHYARD_EVERYTHING_SERVER=$(EVERYTHING) SWITCHYARD_BROWSER=$$browser $(GO) test $(TEST_FLAGS) ./...); \
	done

vet:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) vet ./...); done

fmt-check:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

lint: fmt-check vet

## fuzz: a short run of every fuzz target. Budgets are exec counts, not
## durations: a -fuzztime duration can end mid-run on a loaded machine and
## fail with "context deadline exceeded".
FUZZ_EXECS ?= 200000x
fuzz:
	cd proto && $(GO) test -run '^$$' -fuzz '^FuzzUnmarshalRequest$$' -fuzztime $(FUZZ_EXECS) .
	cd proto && $(GO) test -run '^$$' -fuzz '^FuzzUnmarshalReply$$' -fuzztime $(FUZZ_EXECS) .
	cd proto && $(GO) test -run '^$$' -fuzz '^FuzzRouteTokens$$' -fuzztime $(FUZZ_EXECS) .
	cd internal && $(GO) test -run '^$$' -fuzz '^FuzzParseChunk$$' -fuzztime 50000x ./bus
	cd internal && $(GO) test -run '^$$' -fuzz '^FuzzMembers$$' -fuzztime $(FUZZ_EXECS) ./jsonscan
	cd internal && $(GO) test -run '^$$' -fuzz '^FuzzScan$$' -fuzztime $(FUZZ_EXECS) ./jsonscan
	cd internal && $(GO) test -run '^$$' -fuzz '^FuzzOpen$$' -fuzztime $(FUZZ_EXECS) ./taskid
	cd internal && $(GO) test -run '^$$' -fuzz '^FuzzPolicyGlob$$' -fuzztime 50000x ./policy
	cd internal && $(GO) test -run '^$$' -fuzz '^FuzzAuditDecode$$' -fuzztime 50000x ./audit
	cd internal && $(GO) test -run '^$$' -fuzz '^FuzzAuditRedact$$' -fuzztime 50000x ./audit
	cd internal && $(GO) test -run '^$$' -fuzz '^FuzzAPIKeyParse$$' -fuzztime $(FUZZ_EXECS) ./apikey
	cd internal && $(GO) test -run '^$$' -fuzz '^FuzzAPIKeyRoundTrip$$' -fuzztime 50000x ./apikey
	cd internal && $(GO) test -run '^$$' -fuzz '^FuzzTenantResolve$$' -fuzztime 50000x ./tenant
	cd internal && $(GO) test -run '^$$' -fuzz '^FuzzJWTVerify$$' -fuzztime 20000x ./jwtauth
	cd edge && $(GO) test -run '^$$' -fuzz '^FuzzParseBody$$' -fuzztime 50000x .
	cd edge && $(GO) test -run '^$$' -fuzz '^FuzzWithServerInfo$$' -fuzztime 50000x .
	cd upstream-worker && $(GO) test -run '^$$' -fuzz '^FuzzLineReader$$' -fuzztime 50000x ./internal/upstream
	cd upstream-worker && $(GO) test -run '^$$' -fuzz '^FuzzUpstreamRenamed$$' -fuzztime 50000x ./internal/upstream

## bench: the latency gate (tools/call direct, through a bare reverse proxy
## and through an embedded gateway, both protocol eras; exit 1 if added p50
## > 5 ms), then the Go benchmarks
bench: build
	@set -e; for p in 2025-11-25 2026-07-28; do \
	  $(BIN)/bench latency -start-embedded -switchyard $(BIN)/switchyard -protocol $$p -proxy -n 2000 -warmup 200 -hops=false -max-added-p50 5ms -out results; \
	done
	@$(MAKE) --no-print-directory bench-micro

## bench-gate: the latency gate alone (what CI runs)
bench-gate: build
	@set -e; for p in 2025-11-25 2026-07-28; do \
	  $(BIN)/bench latency -start-embedded -switchyard $(BIN)/switchyard -protocol $$p -n 2000 -warmup 200 -hops=false -max-added-p50 5ms -out results; \
	done

EDGES ?= 1
ROUTERS ?= 1
WORKERS ?= 1

## bench-hops: latency with per-hop attribution, embedded then multi-process (not a gate)
bench-hops: build
	$(BIN)/bench latency -start-embedded -switchyard $(BIN)/switchyard -n 2000 -warmup 200 -max-added-p50 0 -out results
	$(BIN)/bench latency -start-cluster -switchyard $(BIN)/switchyard -edges $(EDGES) -routers $(ROUTERS) -workers $(WORKERS) -n 2000 -warmup 200 -max-added-p50 0 -out results

## loadtest-cluster: the sweep through a multi-process gateway (EDGES, ROUTERS, WORKERS)
loadtest-cluster: build
	$(BIN)/bench sweep -start-cluster -switchyard $(BIN)/switchyard -edges $(EDGES) -routers $(ROUTERS) -workers $(WORKERS) -conns 8,64,256 -duration 10s -warmup 2s -rounds 5 -federation 1x1,5x20,20x50

## loadtest-scale: req/s behind 1, 2 and 4 upstream-workers (stdio fixture, 2 ms, serial)
loadtest-scale: build
	$(BIN)/bench scale -switchyard $(BIN)/switchyard -duration 10s -warmup 2s

## compose-bench: the latency gate against the compose deployment (needs a
## Docker engine with Compose v2.23.1+; reports only, -max-added-p50 0);
## the admin listeners' key is $SWITCHYARD_ADMIN_KEY, else a new one
compose-bench:
	mkdir -p results && chmod 0777 results
	docker compose build && \
	  { test -f nats-auth/auth.conf || docker run --rm -u "$$(id -u):$$(id -g)" -v "$$PWD:/work" -w /work switchyard:local /switchyard nats init nats-auth --host nats; } && \
	  export SWITCHYARD_ADMIN_KEY="$${SWITCHYARD_ADMIN_KEY:-$$(docker run --rm switchyard:local /switchyard keygen)}" && \
	  docker compose up -d --wait && docker compose --profile bench run --rm bench; \
	  rc=$$?; docker compose down; exit $$rc

## bench-micro: Go benchmarks of the hot paths
bench-micro:
	@for m in proto router; do (cd $$m && $(GO) test -run '^$$' -bench . -benchmem ./...); done
	cd internal && $(GO) test -run '^$$' -bench . -benchmem ./taskid ./tenant ./policy ./apikey ./tenancy ./jwtauth ./limit ./fields
	cd edge && $(GO) test -run '^$$' -bench 'FastPathRead|StatelessCallOK' -benchmem .
	cd switchyard && $(GO) test -run '^$$' -bench BenchmarkCall -benchtime 2000x -benchmem ./integration/

## bench-bus: the floor of the one NATS request-reply a call makes,
## embedded (in-process server and connections) then multi-process
## (switchyard nats and a responder over TCP loopback); not a gate. Each
## mode twice: without headers (-stamps=false, as an untraced call: the
## floor docs/benchmarks.md quotes), then with one-way stamps (the hops)
bench-bus: build
	@set -e; for s in false true; do $(BIN)/bench bus -mode inproc -stamps=$$s -out results; done
	@set -e; for s in false true; do $(BIN)/bench bus -mode tcp -switchyard $(BIN)/switchyard -stamps=$$s -out results; done

## bench-sessions: the edge's resident memory holding 0 to 10,000 idle
## 2025-era sessions (multi-process: one edge, router, worker), then once
## they are evicted from its memory (edge.session_evict_after 30s here; 2m
## by default); the goal is under 150 MB at 10,000 (docs/benchmarks.md)
bench-sessions: build
	$(BIN)/bench sessions -switchyard $(BIN)/switchyard -n 10000 -evict-after 30s -out results

## chaos: the fault scenarios of docs/reliability.md under load: 3 NATS nodes,
## tenancy-svc, 2 routers, 2 workers and 2 edges as processes in network
## namespaces (needs root and the ip command), 64 official-SDK sessions
## behind a round-robin balancer; the table goes to results/chaos-<time>/
chaos: build
	$(BIN)/bench chaos -switchyard $(BIN)/switchyard

## chaos-short: the same scenarios with 16 sessions and shorter holds (CI)
chaos-short: build
	$(BIN)/bench chaos -switchyard $(BIN)/switchyard -short -sessions 16

## loadtest: concurrency and federation sweep into results/sweep-<timestamp>/,
## with the floor: the fixture through a bare reverse proxy (bench proxy)
loadtest: build
	$(BIN)/bench sweep -start-embedded -switchyard $(BIN)/switchyard -proxy -conns 8,64,256 -duration 10s -warmup 2s -rounds 5 -federation 1x1,5x20,20x50

## conformance: the official MCP conformance suite (pinned in conformance/)
## against the everything-server (r5: tasks-server in front of it, for the
## tasks extension) through the gateway's passthrough endpoint, in each
## gateway mode (embedded: `switchyard dev`; cluster: nats, tenancy-svc,
## router, upstream-worker and edge as separate processes over TCP NATS;
## ha: a 3-node NATS cluster, 2 of each role, 2 edges behind a balancer),
## each run also directly; exit 1 on any failure not in
## conformance/baselines/. Not part of `make test` (it needs npm); .ci/run
## runs it: see docs/conformance.md. CONFORMANCE_RUNS picks runs (r1 r2 r3 r4a r4b r5),
## CONFORMANCE_MODES modes (default all three: embedded cluster ha); results go to
## results/conformance-<stamp>/.
CONFORMANCE_RUNS ?=
CONFORMANCE_MODES ?= embedded cluster ha
CONFORMANCE_TIMEOUT_MS ?= 30000
CONFORMANCE_STAMP := conformance/node_modules/.installed
conformance: build conformance-install
	@BIN=$(BIN) CONFORMANCE_MODES="$(CONFORMANCE_MODES)" CONFORMANCE_TIMEOUT_MS=$(CONFORMANCE_TIMEOUT_MS) conformance/run.sh $(CONFORMANCE_RUNS)

## conformance-direct: the same runs against the upstream alone; checks the
## instrument (every baseline entry fails directly, nothing else does)
conformance-direct: upstreams conformance-install
	@BIN=$(BIN) CONFORMANCE_TIMEOUT_MS=$(CONFORMANCE_TIMEOUT_MS) conformance/run.sh --direct-only $(CONFORMANCE_RUNS)

## conformance-install: the pinned suites and Node 22 into conformance/node_modules (npm ci)
conformance-install: $(CONFORMANCE_STAMP)
$(CONFORMANCE_STAMP): conformance/package.json conformance/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "conformance: npm not found; install Node.js and npm (any version, e.g. apt-get install npm): it only fetches the pinned suites and Node 22" >&2; exit 1; }
	cd conformance && npm ci
	@touch $@

tidy:
	@for m in $(MODULES); do (cd $$m && GOWORK=off $(GO) mod tidy); done

## check-mods: every module builds and vets on its own (GOWORK=off)
check-mods:
	@set -e; for m in $(MODULES); do echo "== $$m"; (cd $$m && GOWORK=off $(GO) build ./... && GOWORK=off $(GO) vet ./...); done

clean:
	rm -rf $(BIN)
