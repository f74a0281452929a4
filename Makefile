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
# testlog prints what `go test -v` would, as it happens, and says which test is
# running whenever the output has rested 20 s; go test's own result lines pass
# through unchanged and its exit status is kept. The fuzz run counts inputs, not
# seconds: Go 1.26's fuzzer can fail a run whose time is up while a worker is
# mid-input ("context deadline exceeded", a race fixed in Go 1.27), more so on
# a busy machine. 400000 inputs take about 14 s here.
test:
	$(GO) vet ./...
	GO=$(GO) $(GO) run ./internal/nstest/testlog -count=1 -p 1 -timeout 14m ./...
	$(GO) test -run=^$$ -fuzz=FuzzReadMsg -fuzztime=400000x ./internal/netperf

unit:
	$(GO) test -short ./...

bench: build
	./bench/netperf_vs_iperf3.py --vnet $(BIN)
	./bench/ioc_accuracy.py --vnet $(BIN)
	./bench/teaming.py --vnet $(BIN)

clean:
	rm -rf bin lab-out
