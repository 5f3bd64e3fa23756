# kernelbox: `make help` lists the targets.
GO      ?= go
BIN     := bin/kernelbox
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# Lazy binding: the NVML library is bound only when first called, so the
# binary starts on hosts without the NVIDIA driver.
LDFLAGS := -X kernelbox/appliance/cli.Version=$(VERSION) -extldflags=-Wl,-z,lazy
# seccomp in libcontainer needs cgo, libseccomp-dev and this tag.
export CGO_ENABLED := 1
export GOFLAGS := -tags=seccomp
# go-nvml's cgo wrappers call NVML functions the 13.0 header marks
# deprecated; the warnings say nothing about our code.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: help setup build dist cross deb deb/check vagrant/check demo test test/race test/short test/gpu gpu/pack slurm/check bench lint tidy web web/check

help: ## list the targets
	@grep -hE '^[a-zA-Z/_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

setup: ## install the system packages the build and the CPU backend need (idempotent)
	@./packaging/setup.sh

build: ## build bin/kernelbox
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/kernelbox

# The contestant's client: no cgo, so none of the daemon's systems.
# Stripped (-s -w; panics still print their stacks) and -trimpath: the
# box hands them out over a hall's network, and this checkout's paths stay
# out of them.
CLIENTS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
dist: ## build the client-only CLI (CGO_ENABLED=0) for Linux, macOS and Windows into dist/clients/, with SHA256SUMS
	@rm -rf dist/clients && mkdir -p dist/clients
	@for t in $(CLIENTS); do \
	  os=$${t%/*}; arch=$${t#*/}; ext=; [ $$os = windows ] && ext=.exe; \
	  echo "dist $$t"; \
	  GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 GOFLAGS= $(GO) build -trimpath \
	    -ldflags '-s -w -X kernelbox/appliance/cli.Version=$(VERSION)' \
	    -o dist/clients/kernelbox-$$os-$$arch$$ext ./cmd/kernelbox || exit 1; \
	done
	cd dist/clients && sha256sum kernelbox-* > SHA256SUMS

cross: dist ## the old name of dist (CI runs it)

# The Debian package (packaging/nfpm.yaml), built by nfpm: a tool from the
# module proxy, not a dependency of the module. It is built once into
# bin/nfpm-VERSION/ (bin/ is git-ignored) and reused by every later make
# deb; a new NFPM_VERSION builds a new one. An offline site passes a
# binary of its own: make deb NFPM=/usr/local/bin/nfpm (docs/packaging.md).
NFPM_VERSION := v2.48.0
NFPM        ?= bin/nfpm-$(NFPM_VERSION)/nfpm
DEB_VERSION = $(shell ./packaging/deb-version.sh)
DEB_ARCH    = $(shell $(GO) env GOARCH)
bin/nfpm-$(NFPM_VERSION)/nfpm:
	GOBIN=$(CURDIR)/bin/nfpm-$(NFPM_VERSION) CGO_ENABLED=0 GOFLAGS= \
	  $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)

deb: build dist $(NFPM) ## build dist/kernelbox_VERSION_ARCH.deb: the daemon, its systemd unit and config, the clients
	@rm -f dist/kernelbox_*.deb
	DEB_VERSION=$(DEB_VERSION) DEB_ARCH=$(DEB_ARCH) \
	  $(NFPM) pkg --config packaging/nfpm.yaml --packager deb \
	    --target dist/kernelbox_$(DEB_VERSION)_$(DEB_ARCH).deb

deb/check: deb ## build the package and check its fields, files, unit and scripts (packaging/check-deb.sh)
	./packaging/check-deb.sh dist/kernelbox_$(DEB_VERSION)_$(DEB_ARCH).deb

vagrant/check: ## vagrant validate the Vagrantfile, offline (installs Debian's vagrant)
	./packaging/check-vagrant.sh

demo: setup build ## start the daemon on a temp dir, submit the bundled vectoradd solutions through the CLI, show the ranking, stop
	KB=./$(BIN) ./packaging/demo.sh

test: setup ## run every test: Go, the Python harness, every problem's fixtures, the sandbox red team, the web pages in Chromium (as root)
	@./packaging/setup.sh --browser
	$(GO) test -count=1 -timeout 40m ./...

slurm/check: setup ## the slurm executor end to end on a real one-node Slurm started here (root: installs and starts munge, slurmctld, slurmd)
	./.ci/slurm.sh start
	KERNELBOX_SLURM=1 $(GO) test -count=1 -timeout 15m -run 'TestSlurm' -bench 'Slurm_' -benchtime 5x -v ./appliance/ ; rc=$$?; ./.ci/slurm.sh stop; exit $$rc

# The tests that need the GPU machine: they skip unless KERNELBOX_TEST_GPU=1
# and a PyTorch that sees CUDA (internal/testutil.RequireGPU); their names
# end in OnGPU, or name CUDA or the real host's NVML.
GPU_TESTS := OnGPU|CUDA|RealHost
test/gpu: ## the GPU-gated tests, on a GPU machine with Go (as root: the daemon's need the sandbox)
	KERNELBOX_TEST_GPU=1 $(GO) test -count=1 -timeout 15m -parallel 4 -run '$(GPU_TESTS)' -v ./problems ./appliance ./gpu

# The GPU machine of the device tool has no Go: this builds the binary and
# the GPU tests' binaries here (lazy binding, as make build; stripped, so
# that all of .carry/ stays under the tool's 64 MiB) and packs them with
# libseccomp and the commit for bench/gpu-all.sh (docs/performance.md).
gpu/pack: ## build kernelbox and the GPU tests' binaries into .carry/ (xz) for bench/gpu-all.sh on a GPU machine without Go
	@rm -rf .carry && mkdir -p .carry/lib
	$(GO) build -ldflags '$(LDFLAGS) -s -w' -o .carry/kernelbox ./cmd/kernelbox
	for p in problems appliance gpu; do \
	  $(GO) test -c -ldflags '-s -w -extldflags=-Wl,-z,lazy' -o .carry/$$p.test ./$$p || exit 1; \
	done
	cp -L $$(ldconfig -p | awk '/libseccomp\.so\.2 /{print $$NF; exit}') .carry/lib/libseccomp.so.2
	echo "$(VERSION)" > .carry/commit
	xz -T0 -f .carry/kernelbox .carry/*.test
	@du -sh .carry

test/short: ## the fast tests only (no Python, no fixtures)
	$(GO) test -short ./...

test/race: setup ## the tests under the race detector
	$(GO) test -race -count=1 -timeout 60m ./...

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

bench: setup ## the benchmarks that compare against a baseline run beside them (as root: the daemon's need the sandbox)
	$(GO) test -run XXX -bench 'EndToEnd|Daemon_|Overhead|Web_' -benchtime 3x ./appliance ./sandbox
	$(GO) test -run XXX -bench . ./queue
	$(GO) test -run XXX -bench Scan -benchtime 10x ./policies

lint: ## gofmt, go vet and staticcheck (fetched from the module proxy on first use)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	GOOS=darwin CGO_ENABLED=0 GOFLAGS= $(GO) vet ./appliance/api ./appliance/cli ./cmd/kernelbox
	$(GO) run $(STATICCHECK) ./...

web: ## rebuild the submit form's editor (CodeMirror, from the npm registry) into appliance/web/static/editor.js
	cd appliance/web/editor && npm ci --no-audit --no-fund && npm run build

web/check: web ## fail when the committed editor bundle is not what its pinned sources build
	git diff --exit-code --stat -- appliance/web/static/editor.js

tidy: ## go mod tidy
	$(GO) mod tidy
