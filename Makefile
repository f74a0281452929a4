# vnet: the two commands a newcomer needs are `make run` and `make test`.
GO ?= go
BIN := bin/vnet
CNIBIN := bin/vnet-cni
export GOFLAGS := -buildvcs=false

# The version vnet version and vnet --version print.
VERSION ?= $(shell git describe --always --dirty 2>/dev/null)
LDFLAGS := $(if $(VERSION),-X main.version=$(VERSION))

# make install [PREFIX=/usr/local] [DESTDIR=/tmp/stage]
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
DOCDIR ?= $(PREFIX)/share/doc/vnet
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
UNITDIR ?= $(PREFIX)/lib/systemd/system
# A directory podman and Debian's CNI set-up search for plugins by default.
CNIDIR ?= $(PREFIX)/lib/cni
UNITS := vnet-agent@.service vnet-hostagent.service

.PHONY: build run demo deps test unit bench install uninstall clean

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/vnet
	$(GO) build -o $(CNIBIN) ./cmd/vnet-cni

# The main job: every experiment of the five studies, quick, with a report
# (lab-out/report.html, lab-out/summary.md). Needs root (network namespaces).
run: build
	$(BIN) lab run --all --quick --out lab-out

# A short tour: apply examples/demo.yaml, show it, measure across it, destroy it.
demo: build
	./scripts/demo.sh $(BIN)

# What the tests use beyond Go (chromium, etcd, QEMU, flent, a C toolchain for
# netperf, ...), installed from Debian when missing and the user is root.
deps:
	./scripts/deps.sh

# Unit tests run anywhere; integration tests need root and skip loudly without it;
# the summary at the end names every test that skipped and why.
# testlog prints what `go test -v` would, as it happens, and says which test is
# running whenever the output has rested 20 s; go test's own result lines pass
# through unchanged and its exit status is kept; what the run left on the machine
# (namespaces, cgroups, the store registry, /run/vnet) fails it. The fuzz run counts inputs, not
# seconds: Go 1.26's fuzzer can fail a run whose time is up while a worker is
# mid-input ("context deadline exceeded", a race fixed in Go 1.27), more so on
# a busy machine. 400000 inputs take about 14 s here. A package may take up to
# 35 minutes: the kill suite alone takes about 21 on a 2-core machine, idle or
# loaded with two other builds' benchmarks.
test: deps
	$(GO) vet ./...
	GO=$(GO) $(GO) run ./internal/nstest/testlog -count=1 -p 1 -timeout 35m ./...
	# Port security the nftables way too, as on kernels without vnet's port programs.
	VNET_PORT_POLICY=nftables $(GO) test -count=1 -run 'Security|PortSecurity|ACL' ./internal/reconcile
	$(GO) test -run=^$$ -fuzz=FuzzReadMsg -fuzztime=400000x ./internal/netperf
	$(GO) test -run=^$$ -fuzz=^FuzzDecode$$ -fuzztime=200000x ./internal/netperf/wire
	$(GO) test -run=^$$ -fuzz=^FuzzLoad$$ -fuzztime=100000x ./internal/spec
	$(GO) test -run=^$$ -fuzz=^FuzzPutInfra$$ -fuzztime=20000x ./internal/api
	$(GO) test -run=^$$ -fuzz=^FuzzNetperfRequest$$ -fuzztime=20000x ./internal/api

unit:
	$(GO) test -short ./...

bench: build
	./bench/netperf_vs_iperf3.py --vnet $(BIN)
	./bench/ioc_accuracy.py --vnet $(BIN)
	./bench/teaming.py --vnet $(BIN)
	./bench/security.py --vnet $(BIN)

# The binary, the CNI plugin, shell completion for bash, zsh and fish, the
# agent's systemd unit and the docs. The completion scripts come from the
# binary just built.
install: build
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) \
		$(DESTDIR)$(FISHCOMPDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR) $(DESTDIR)$(CNIDIR)
	install -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/vnet
	install -m 0755 $(CNIBIN) $(DESTDIR)$(CNIDIR)/vnet-cni
	$(BIN) completion bash > $(DESTDIR)$(BASHCOMPDIR)/vnet
	$(BIN) completion zsh > $(DESTDIR)$(ZSHCOMPDIR)/_vnet
	$(BIN) completion fish > $(DESTDIR)$(FISHCOMPDIR)/vnet.fish
	for u in $(UNITS); do \
		sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' packaging/systemd/$$u > $(DESTDIR)$(UNITDIR)/$$u && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$$u || exit 1; \
	done
	install -m 0644 README.md docs/*.md $(DESTDIR)$(DOCDIR)/

# Removes what install put there; the state in /var/lib/vnet stays.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/vnet $(DESTDIR)$(CNIDIR)/vnet-cni $(DESTDIR)$(BASHCOMPDIR)/vnet $(DESTDIR)$(ZSHCOMPDIR)/_vnet \
		$(DESTDIR)$(FISHCOMPDIR)/vnet.fish $(addprefix $(DESTDIR)$(UNITDIR)/,$(UNITS))
	rm -rf $(DESTDIR)$(DOCDIR)

clean:
	rm -rf bin lab-out
