# flashsale: one Makefile for the workspace. Every Go target loops over the
# modules (go test ./... at the root does not reach workspace modules), and
# the modules are listed once, in go.work's use block, which this reads.
# faults stops and restarts the servers, so it runs alone: make test runs it
# last, after every other module has finished (make faults runs it by itself).
MODULES      := $(shell awk '/^use \(/ {u=1; next} u && /^\)/ {u=0} u && NF && $$1 !~ /^\/\// {sub(/^\.\//, "", $$1); print $$1}' go.work)
TEST_MODULES := $(filter-out faults,$(MODULES))
BIN     := $(CURDIR)/bin
# sudo drops /usr/local/go/bin from PATH (the stack's scripts find it there too).
GO      ?= $(or $(shell command -v go),$(wildcard /usr/local/go/bin/go),go)
# confluent-kafka-go links librdkafka statically through cgo.
export CGO_ENABLED := 1
# CLUSTER=1 (make up CLUSTER=1) adds the scaled-out shape to the stack: a
# Redis Cluster (3 masters, 3 replicas) and a Kafka cluster (3 nodes,
# replication factor 3). make test always starts it: the cluster tests need
# it, and with FLASHSALE_CLUSTER=1 they fail instead of skipping.
FUZZTIME ?= 10s
export FUZZTIME
CLUSTER ?= $(or $(FLASHSALE_CLUSTER),$(FLASHSALE_REDIS_CLUSTER),0)
# MONITOR=1 (make up MONITOR=1) adds a Prometheus scraping the demo's
# services with deploy/monitoring's rules (deploy/prometheus.sh).
MONITOR ?= 0

.PHONY: help up down status build test check vet fmt demo bench faults fuzz contract clean modules

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

up: ## start the local stack (Redis, PostgreSQL, Apache Kafka; CLUSTER=1 adds a Redis Cluster and a 3-node Kafka cluster; MONITOR=1 a Prometheus), installing what is missing
	@FLASHSALE_CLUSTER=$(CLUSTER) bash deploy/stack.sh up
	@if [ "$(MONITOR)" = 1 ]; then FLASHSALE_CLUSTER=$(CLUSTER) bash deploy/prometheus.sh up; fi

down: ## stop the local stack (data kept under .stack/)
	@bash deploy/prometheus.sh down
	@bash deploy/stack.sh down

status: ## show the local stack
	@FLASHSALE_CLUSTER=$(CLUSTER) bash deploy/stack.sh status

build: ## build the binaries into bin/
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/gateway ./gateway
	$(GO) build -o $(BIN)/ordersvc ./ordersvc
	$(GO) build -o $(BIN)/loadtest ./loadtest

# SERIAL_MODULES run one package at a time: e2e's packages each start
# gateways and order services on the one PostgreSQL and Redis, and every
# gateway acts on every open sale it finds there (a gateway of package e2e,
# with its own FLASHSALE_QUEUE_GRACE, admitted a queue place e2e/contract
# meant to expire).
SERIAL_MODULES := e2e

test: ## run the whole suite against the local stack, Redis Cluster included, then the fault tests alone
	@FLASHSALE_CLUSTER=1 bash deploy/stack.sh up
	@set -e; for m in $(TEST_MODULES); do \
		echo "== $$m"; \
		p=; case " $(SERIAL_MODULES) " in *" $$m "*) p="-p 1";; esac; \
		(cd $$m && FLASHSALE_CLUSTER=1 $(GO) test -count=1 $$p -timeout 15m ./...); \
	done
	@echo "== faults (alone: it stops and restarts the servers)"
	@cd faults && FLASHSALE_CLUSTER=1 $(GO) test -count=1 -p 1 -timeout 20m ./...

vet: ## go vet every module
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) vet ./...); done

fmt: ## gofmt every module
	@gofmt -l -w $(MODULES)

check: fmt vet test ## what to run before committing

demo: up build ## run a flash sale end to end on the local stack and print the report (CLUSTER=1: Redis Cluster, 3 shards, 2 gateways, 2 order services)
	@FLASHSALE_CLUSTER=$(CLUSTER) bash deploy/demo.sh

faults: up ## fault injection and hostile input against the real servers, alone (it stops and restarts them; make test runs it too, last)
	@cd faults && $(GO) test -count=1 -p 1 -v -timeout 20m ./...

bench: up build ## our gateway against the baselines, side by side (about 3 minutes)
	@GO=$(GO) bash benchmarks/run.sh $(BENCH_ARGS)

contract: up ## schemathesis fuzzes both services' four listeners from the OpenAPI document (CONTRACT_EXAMPLES per operation, default 50)
	@GO=$(GO) bash deploy/contract.sh

fuzz: ## run every native fuzz target for FUZZTIME each (default 10s), one at a time; commit what it writes under testdata/fuzz/
	@GO=$(GO) bash deploy/fuzz.sh $(MODULES)

modules: ## print the workspace's modules (from go.work), one a line
	@printf '%s\n' $(MODULES)

clean: ## remove built binaries
	rm -rf $(BIN)
