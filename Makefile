# fencegate. `make help` (the default) lists the targets; `make run` and
# `make test` are the two commands a newcomer needs.

GO       ?= go
BIN      := $(CURDIR)/bin

VERSITYGW_VERSION   := v1.8.0
STATICCHECK_VERSION := v0.8.2

# How long `make test` may run, and how long `make fuzz` runs each target.
TEST_TIMEOUT ?= 20m
FUZZTIME     ?= 20s
# Extra flags for `fencegate dev`, e.g. make run ARGS='--listen 127.0.0.1:9090'.
ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help tools build run test check fuzz clean distclean

help: ## list the targets
	@echo 'Targets:'
	@awk 'BEGIN { FS = ":.*## " } /^[a-z][a-z-]*:.*## / { printf "  %-10s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

tools: $(BIN)/versitygw $(BIN)/staticcheck ## build the tools into bin/ if missing: versitygw (S3 server), staticcheck

$(BIN)/versitygw:
	GOBIN=$(BIN) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

$(BIN)/staticcheck:
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

build: ## build bin/fencegate
	$(GO) build -o $(BIN)/fencegate ./cmd/fencegate

run: build $(BIN)/versitygw ## run fencegate dev: local etcd + S3 + gateway on 127.0.0.1:8080, data in .fencegate/
	$(BIN)/fencegate dev $(ARGS)

test: $(BIN)/versitygw ## run every test with the race detector, against real etcd and versitygw
	FENCEGATE_VERSITYGW=$(BIN)/versitygw $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

check: $(BIN)/staticcheck ## gofmt, go vet, staticcheck, then the tests
	@unformatted="$$(find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*' -print0 | xargs -0 gofmt -l)"; \
	if [ -n "$$unformatted" ]; then echo "gofmt -l lists files to format:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(BIN)/staticcheck ./...
	$(MAKE) test

fuzz: ## run every Fuzz target in *_test.go for FUZZTIME each (default 20s)
	@set -e; \
	files="$$(grep -rlE --include='*_test.go' --exclude-dir=.git --exclude-dir=bin '^func Fuzz[A-Za-z0-9_]*\(' . | sort)"; \
	if [ -z "$$files" ]; then echo "no Fuzz targets found"; exit 0; fi; \
	for file in $$files; do \
		dir="$$(dirname "$$file")"; \
		for target in $$(sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/p' "$$file"); do \
			echo "== $$dir $$target ($(FUZZTIME))"; \
			$(GO) test -run='^$$' -fuzz="^$$target\$$" -fuzztime=$(FUZZTIME) "$$dir"; \
		done; \
	done

clean: ## remove bin/fencegate, test binaries and profiles, and the test cache (keeps tools and .fencegate/)
	rm -f $(BIN)/fencegate
	find . -path ./.git -prune -o \( -name '*.test' -o -name '*.out' -o -name '*.prof' \) -type f -print -exec rm -f {} +
	$(GO) clean -testcache

distclean: clean ## clean, and remove the tools in bin/ and fencegate dev's data in .fencegate/
	rm -rf $(BIN) .fencegate
