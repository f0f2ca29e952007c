# fencegate. `make help` (the default) lists the targets; `make run` and
# `make test` are the two commands a newcomer needs.

GO       ?= go
BIN      := $(CURDIR)/bin

VERSITYGW_VERSION   := v1.8.0
FAKE_GCS_VERSION    := v1.56.1
STATICCHECK_VERSION := v0.8.2
PROMTOOL_VERSION    := v0.316.0

# How long `make test` may run, and how long `make fuzz` runs each target.
TEST_TIMEOUT ?= 30m
FUZZTIME     ?= 20s
# How many histories `make soak` runs (`make robustness` runs 24).
N ?= 200
# Extra flags for `fencegate dev`, e.g. make run ARGS='--listen 127.0.0.1:9090' or
# make run ARGS='--config fencegate.yaml' (partner routes and auth from a config file).
ARGS ?=
# Extra flags for fencebench, e.g. make bench BENCH_ARGS='--set full --json'.
BENCH_ARGS ?=
# Extra flags for fencebench abuse, e.g. make abuse ABUSE_ARGS='--duration 5s --attacks slow-readers'.
ABUSE_ARGS ?=
# Extra flags for fencebench footprint, e.g. make soak-footprint FOOTPRINT_ARGS='--duration 30m --quota 256MiB'.
FOOTPRINT_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help tools promtool deploy-test build run test check fuzz bench abuse soak-footprint postgres mariadb zookeeper redis awscli rclone s3cmd boto3 awsjs chromium clean distclean robustness soak

help: ## list the targets
	@echo 'Targets:'
	@awk 'BEGIN { FS = ":.*## " } /^[a-z][a-z0-9-]*:.*## / { printf "  %-15s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

tools: $(BIN)/versitygw $(BIN)/fake-gcs-server $(BIN)/staticcheck $(BIN)/promtool ## build the tools into bin/ if missing: versitygw (S3 server), fake-gcs-server (GCS emulator), staticcheck, promtool

$(BIN)/versitygw:
	GOBIN=$(BIN) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

$(BIN)/fake-gcs-server:
	GOBIN=$(BIN) $(GO) install github.com/fsouza/fake-gcs-server@$(FAKE_GCS_VERSION)

$(BIN)/staticcheck:
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# remove_all_sd leaves out Prometheus' service discovery plugins (AWS, Azure,
# Kubernetes, ...): promtool's rule checks and tests need none, and the build
# is half the size.
$(BIN)/promtool:
	GOBIN=$(BIN) $(GO) install -tags remove_all_sd github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION)

promtool: $(BIN)/promtool ## build promtool (Prometheus' rule checker and tester) into bin/ if missing

# deploy/ is a Go module of its own, so that Helm, Kubernetes and
# Prometheus stay out of the gateway's: the main module's ./... does not
# reach it.
deploy-test: $(BIN)/promtool ## check deploy/: promtool test rules on the alerts, the dashboard's queries, the Helm chart rendered and validated against the Kubernetes schemas
	cd deploy && FENCEGATE_PROMTOOL=$(BIN)/promtool $(GO) test -race -count=1 ./...

build: ## build bin/fencegate and bin/fencectl
	$(GO) build -o $(BIN)/fencegate ./cmd/fencegate
	$(GO) build -o $(BIN)/fencectl ./cmd/fencectl

run: build $(BIN)/versitygw $(if $(findstring gcs,$(ARGS)),$(BIN)/fake-gcs-server) ## run fencegate dev: local etcd + S3 + gateway on 127.0.0.1:8080, data in .fencegate/
	$(BIN)/fencegate dev $(ARGS)

# The second command runs the unit tests of the unsafe test hooks, which only a
# build with their tag has (cmd/fencegate/testhooks.go); the third, deploy/'s
# checks, which are a module of their own.
test: $(BIN)/versitygw $(BIN)/fake-gcs-server $(BIN)/promtool postgres mariadb zookeeper redis awscli rclone s3cmd boto3 awsjs chromium ## run every test with the race detector, against real etcd, versitygw, fake-gcs-server, PostgreSQL, MariaDB, ZooKeeper, Redis, aws-cli, rclone, s3cmd, boto3, the AWS SDK for JavaScript and headless Chromium, then deploy-test
	FENCEGATE_VERSITYGW=$(BIN)/versitygw FENCEGATE_FAKE_GCS=$(BIN)/fake-gcs-server $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(GO) test -race -count=1 -tags fencegate_unsafe_hooks -run 'UnsafeTestHooks|PauseAfterFence' ./cmd/fencegate
	@$(MAKE) --no-print-directory deploy-test

check: $(BIN)/staticcheck ## gofmt, go vet, staticcheck, then the tests
	@unformatted="$$(find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*' -print0 | xargs -0 gofmt -l)"; \
	if [ -n "$$unformatted" ]; then echo "gofmt -l lists files to format:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags fencegate_unsafe_hooks ./cmd/fencegate
	$(BIN)/staticcheck ./...
	$(BIN)/staticcheck -tags fencegate_unsafe_hooks ./cmd/fencegate
	cd deploy && $(GO) vet ./... && $(BIN)/staticcheck ./...
	$(MAKE) test

# With the unsafe test hooks' tag, so that their parser is fuzzed too (only
# cmd/fencegate has files with that tag).
fuzz: ## run every Fuzz target in *_test.go for FUZZTIME each (default 20s)
	@set -e; \
	files="$$(grep -rlE --include='*_test.go' --exclude-dir=.git --exclude-dir=bin '^func Fuzz[A-Za-z0-9_]*\(' . | sort)"; \
	if [ -z "$$files" ]; then echo "no Fuzz targets found"; exit 0; fi; \
	for file in $$files; do \
		dir="$$(dirname "$$file")"; \
		for target in $$(sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/p' "$$file"); do \
			echo "== $$dir $$target ($(FUZZTIME))"; \
			$(GO) test -tags fencegate_unsafe_hooks -run='^$$' -fuzz="^$$target\$$" -fuzztime=$(FUZZTIME) "$$dir"; \
		done; \
	done

bench: build $(BIN)/versitygw $(BIN)/fake-gcs-server ## measure the gateway against direct S3 and client-side fencing, writes on upload tickets against direct S3, and the gateway against direct GCS writes (short set, about 5 minutes; ends with a summary line)
	$(GO) build -o $(BIN)/fencebench ./cmd/fencebench
	$(BIN)/fencebench $(BENCH_ARGS)

abuse: build $(BIN)/versitygw ## eight bounded attacks on one gateway (auth on), 15s each, about 3 minutes: per attack RSS, goroutines, log bytes, a well-behaved client's p50/p99; fails if its p99 >= 1s or it got errors
	$(GO) build -o $(BIN)/fencebench ./cmd/fencebench
	$(BIN)/fencebench abuse $(ABUSE_ARGS)

soak-footprint: build $(BIN)/versitygw ## 10 minutes of writes, deletes and stale writes on 100,000 objects through one gateway, etcd quota 64 MiB, auto-compaction on; etcd's size every minute; fails on NOSPACE, a size that does not level off, or a wrong answer
	$(GO) build -o $(BIN)/fencebench ./cmd/fencebench
	$(BIN)/fencebench footprint $(FOOTPRINT_ARGS)

postgres: ## install PostgreSQL from Debian's packages if initdb is missing (the SQL lease-table tests run a real server)
	@if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		echo "PostgreSQL: $$(ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null || command -v initdb)"; \
	else \
		echo "PostgreSQL is missing: apt-get install -y postgresql"; \
		DEBIAN_FRONTEND=noninteractive apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql; \
	fi

awscli: ## install aws-cli from Debian's packages if /usr/bin/aws is missing (the S3 signature tests run the real client; FENCEGATE_AWSCLI picks another)
	@if [ -x /usr/bin/aws ]; then \
		echo "aws-cli: /usr/bin/aws ($$(/usr/bin/aws --version 2>&1))"; \
	else \
		echo "aws-cli is missing: apt-get install -y awscli"; \
		DEBIAN_FRONTEND=noninteractive apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y awscli; \
	fi

# The S3 front door's client tests (s3api/clients) run these unmodified S3
# clients from Debian's packages as child processes; each target installs its
# package when the program is missing (with sudo when not run as root).
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

rclone: ## install rclone from Debian's packages if /usr/bin/rclone is missing (the S3 front door's client tests run it; FENCEGATE_RCLONE picks another)
	@if [ -x /usr/bin/rclone ]; then \
		echo "rclone: /usr/bin/rclone ($$(/usr/bin/rclone --version 2>&1 | head -n 1))"; \
	else \
		echo "rclone is missing: apt-get install -y rclone"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y rclone; \
	fi

s3cmd: ## install s3cmd from Debian's packages if /usr/bin/s3cmd is missing (the S3 front door's client tests run it; FENCEGATE_S3CMD picks another)
	@if [ -x /usr/bin/s3cmd ]; then \
		echo "s3cmd: /usr/bin/s3cmd ($$(/usr/bin/s3cmd --version 2>&1))"; \
	else \
		echo "s3cmd is missing: apt-get install -y s3cmd"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y s3cmd; \
	fi

boto3: ## install boto3 from Debian's packages if /usr/bin/python3 cannot import it (the S3 front door's client tests run a boto3 script; FENCEGATE_PYTHON3 picks another python3)
	@if /usr/bin/python3 -c 'import boto3' >/dev/null 2>&1; then \
		echo "boto3: /usr/bin/python3 ($$(/usr/bin/python3 -c 'import boto3; print("boto3", boto3.__version__)'))"; \
	else \
		echo "boto3 is missing: apt-get install -y python3-boto3"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y python3-boto3; \
	fi

# The AWS SDK for JavaScript v3 at the versions package-lock.json pins,
# installed with npm ci beside the script that drives it; again only when
# the lock file is newer than the install. Its versions published after
# January 2027 need node 22 (it warns on each run under node 20).
AWSJS := s3api/clients/testdata/aws-sdk-js

awsjs: $(AWSJS)/node_modules/.package-lock.json ## install node and npm from Debian's packages if missing, then the pinned AWS SDK for JavaScript v3 (client-s3, lib-storage, s3-request-presigner) with npm ci (the S3 front door's client tests run it; FENCEGATE_NODE picks another node)
	@echo "aws-sdk-js: $(AWSJS)/node_modules ($$(node --version), @aws-sdk/client-s3 $$(node -p 'require("./$(AWSJS)/node_modules/@aws-sdk/client-s3/package.json").version'))"

$(AWSJS)/node_modules/.package-lock.json: $(AWSJS)/package.json $(AWSJS)/package-lock.json
	@if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
		echo "node or npm is missing: apt-get install -y nodejs npm"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm; \
	fi
	cd $(AWSJS) && npm ci --no-audit --no-fund
	@touch $@

chromium: ## install Chromium from Debian's packages if it is missing (the console tests drive the page in headless Chromium; FENCEGATE_CHROMIUM picks another)
	@if command -v chromium >/dev/null 2>&1; then \
		echo "Chromium: $$(command -v chromium)"; \
	else \
		echo "Chromium is missing: apt-get install -y chromium"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	fi

# The token-source tests run these servers from Debian's packages as child
# processes (docs/token-sources.md); each target installs its package when
# the program is missing.
mariadb: ## install MariaDB from Debian's packages if mariadbd is missing (the MySQL lease-table tests run a real server)
	@if command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; then \
		echo "MariaDB: $$(command -v mariadbd || echo /usr/sbin/mariadbd)"; \
	else \
		echo "MariaDB is missing: apt-get install -y mariadb-server"; \
		DEBIAN_FRONTEND=noninteractive apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y mariadb-server; \
	fi

zookeeper: ## install ZooKeeper (and a Java runtime) from Debian's packages if its jar is missing (the ZooKeeper lock tests run a real server)
	@if [ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null 2>&1; then \
		echo "ZooKeeper: /usr/share/java/zookeeper.jar, $$(command -v java)"; \
	else \
		echo "ZooKeeper is missing: apt-get install -y zookeeper"; \
		DEBIAN_FRONTEND=noninteractive apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y zookeeper; \
	fi

redis: ## install Redis from Debian's packages if redis-server is missing (the Redis counter-example tests run a real server)
	@if command -v redis-server >/dev/null 2>&1; then \
		echo "Redis: $$(command -v redis-server)"; \
	else \
		echo "Redis is missing: apt-get install -y redis-server"; \
		DEBIAN_FRONTEND=noninteractive apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server; \
	fi

robustness: $(BIN)/versitygw $(BIN)/fake-gcs-server ## fault-injection suite: 24 seeded histories, a third on GCS (etcd kills, partitions, pauses, store faults), porcupine-checked; ROBUSTNESS_SEED=n replays
	@$(MAKE) --no-print-directory robustness-run ROBUSTNESS_HISTORIES=24 ROBUSTNESS_TIMEOUT=15m

soak: $(BIN)/versitygw $(BIN)/fake-gcs-server ## the fault-injection suite for N histories (default 200, e.g. make soak N=500; about 6 s each)
	@$(MAKE) --no-print-directory robustness-run ROBUSTNESS_HISTORIES=$(N) ROBUSTNESS_TIMEOUT=$$(( $(N) * 60 + 600 ))s

# robustness-run streams the suite's own lines (one per history, then the
# figures) and keeps go test's full output in bin/robustness.log.
robustness-run:
	@{ FENCEGATE_VERSITYGW=$(BIN)/versitygw FENCEGATE_FAKE_GCS=$(BIN)/fake-gcs-server ROBUSTNESS_HISTORIES=$(ROBUSTNESS_HISTORIES) $(GO) test -count=1 -v \
		-timeout $(ROBUSTNESS_TIMEOUT) -run '^TestRobustness$$' ./internal/robustness; echo $$? > $(BIN)/robustness.status; } \
		| tee $(BIN)/robustness.log | grep --line-buffered -E '^(robustness: |--- FAIL|FAIL|panic)'; \
	status=$$(cat $(BIN)/robustness.status); rm -f $(BIN)/robustness.status; \
	if [ "$$status" != 0 ]; then echo "robustness: go test failed (exit $$status); full output in $(BIN)/robustness.log"; fi; \
	exit $$status

clean: ## remove bin/fencegate, test binaries and profiles, and the test cache (keeps tools and .fencegate/)
	rm -f $(BIN)/fencegate
	find . -path ./.git -prune -o \( -name '*.test' -o -name '*.out' -o -name '*.prof' \) -type f -print -exec rm -f {} +
	$(GO) clean -testcache

distclean: clean ## clean, and remove the tools in bin/ and fencegate dev's data in .fencegate/
	rm -rf $(BIN) .fencegate
