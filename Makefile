# vnet: the two commands a newcomer needs are `make run` and `make test`.
GO ?= go
BIN := bin/vnet
export GOFLAGS := -buildvcs=false

.PHONY: build run demo test unit bench clean

build:
	$(GO) build -o $(BIN) ./cmd/vnet

# The main job: every experiment of the five studies, quick, with a report
# (lab-out/report.html, lab-out/summary.md). Needs root (network namespaces).
run: build
	$(BIN) lab run --all --quick --out lab-out

# A short tour: apply examples/demo.yaml, show it, measure across it, destroy it.
demo: build
	./scripts/demo.sh $(BIN)

# Unit tests run anywhere; integration tests need root and skip loudly without it.
test:
	$(GO) vet ./...
	$(GO) test -count=1 -p 1 ./...
	$(GO) test -run=^$$ -fuzz=FuzzReadMsg -fuzztime=20s ./internal/netperf

unit:
	$(GO) test -short ./...

bench: build
	./bench/netperf_vs_iperf3.py --vnet $(BIN)
	./bench/ioc_accuracy.py --vnet $(BIN)
	./bench/teaming.py --vnet $(BIN)

clean:
	rm -rf bin lab-out
