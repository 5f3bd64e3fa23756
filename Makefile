# kernelbox: `make help` lists the targets.
GO      ?= go
BIN     := bin/kernelbox
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# Lazy binding: the NVML library is bound only when first called, so the
# binary starts on hosts without the NVIDIA driver.
LDFLAGS := -X kernelbox/appliance.Version=$(VERSION) -extldflags=-Wl,-z,lazy
# seccomp in libcontainer needs cgo, libseccomp-dev and this tag.
export CGO_ENABLED := 1
export GOFLAGS := -tags=seccomp
# go-nvml's cgo wrappers call NVML functions the 13.0 header marks
# deprecated; the warnings say nothing about our code.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: help setup build demo test test/race test/short lint tidy

help: ## list the targets
	@grep -hE '^[a-zA-Z/_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

setup: ## install the system packages the build and the CPU backend need (idempotent)
	@./packaging/setup.sh

build: ## build bin/kernelbox
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/kernelbox

demo: setup build ## start the daemon on a temp dir, submit the bundled vectoradd solutions through the CLI, show the ranking, stop
	KB=./$(BIN) ./packaging/demo.sh

test: setup ## run every test: Go, the Python harness, every problem's fixtures, the sandbox red team (as root)
	$(GO) test -count=1 -timeout 40m ./...

test/short: ## the fast tests only (no Python, no fixtures)
	$(GO) test -short ./...

test/race: setup ## the tests under the race detector
	$(GO) test -race -count=1 -timeout 60m ./...

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

tidy: ## go mod tidy
	$(GO) mod tidy
