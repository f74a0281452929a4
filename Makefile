# vnet: the two commands a newcomer needs are `make run` and `make test`.
GO ?= go
BIN := bin/vnet
export GOFLAGS := -buildvcs=false

.PHONY: build run test unit fuzz bench clean

build:
	$(GO) build -o $(BIN) ./cmd/vnet

# The demo: build, apply the example infrastructure, show it, measure across
# it, and remove it. Needs root (network namespaces).
run: build
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

clean:
	rm -rf bin
