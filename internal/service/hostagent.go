package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/hostagent"
	"github.com/vnet-project/vnet/internal/metrics"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// HostAgentOptions say how the agent of one host of a cluster runs.
type HostAgentOptions struct {
	// StateDir holds the agent's own record of what it realized, in
	// StateDir/hostagent.
	StateDir  string
	Endpoints []string
	TLS       TLSFiles
	// Host is the spec's name of this machine.
	Host                           string
	Interval, CounterInterval, TTL time.Duration
	// MetricsAddr, when set, serves this host's Prometheus metrics.
	MetricsAddr string
	Log, Trace  io.Writer
}

// Host agent defaults, for the faces' flags.
const (
	DefaultHostInterval        = hostagent.DefaultInterval
	DefaultHostCounterInterval = hostagent.DefaultCounterInterval
	DefaultReportTTL           = etcdstore.DefaultReportTTL
)

// RunHostAgent realizes on this machine its host's part of every
// infrastructure stored in etcd, and reports it, until ctx ends
// (`vnet agent host`). One agent runs per state directory.
func RunHostAgent(ctx context.Context, o HostAgentOptions) error {
	dir := filepath.Join(o.StateDir, "hostagent")
	release, err := hostagent.Claim(dir)
	if err != nil {
		return err
	}
	defer release()
	dp, err := dataplane.New()
	if err != nil {
		return err
	}
	defer dp.Close()
	local, err := store.OpenBolt(dir)
	if err != nil {
		return err
	}
	defer local.Close()
	dp.HostNS, dp.OnlyStore = plan.CurrentNS, local.ID()
	dp.DeviceStateDir = filepath.Join(dir, "devices")
	tc, err := o.TLS.Config()
	if err != nil {
		return tagged{ErrInvalid, err.Error()}
	}
	cluster, err := etcdstore.Open(etcdstore.Options{Endpoints: o.Endpoints, TLS: tc})
	if err != nil {
		return err
	}
	defer cluster.Close()
	a := &hostagent.Agent{Cluster: cluster, Local: local, DP: dp, Host: o.Host,
		UnderlayMTU: func(addr string) (int, error) {
			_, mtu, err := dataplane.UnderlayLink(addr)
			return mtu, err
		},
		Interval: o.Interval, CounterInterval: o.CounterInterval, TTL: o.TTL, Log: o.Log, TeamDP: dp, Trace: o.Trace}
	fmt.Fprintf(o.Log, "vnet agent host: host %s, etcd %s, state in %s\n", o.Host, strings.Join(o.Endpoints, ","), dir)
	if o.MetricsAddr != "" {
		addr, err := serveHostMetrics(ctx, o.MetricsAddr, local, SpecCache(o.StateDir), o.Host, o.Log)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.Log, "vnet agent host: metrics at http://%s/metrics\n", addr)
	}
	return a.Run(ctx)
}

// serveHostMetrics serves, until ctx ends, the metrics of what this host
// realized: each infrastructure in the agent's local records, read with a
// dataplane opened per scrape. It returns the address it listens on.
func serveHostMetrics(ctx context.Context, addr string, local store.Store, cache *speccache.Cache, host string, log io.Writer) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("--metrics-addr: %w", err)
	}
	infras := func() []*spec.Spec {
		recs, err := local.List()
		if err != nil {
			return nil
		}
		var out []*spec.Spec
		for _, r := range recs {
			if doc, err := r.DocVia(cache); err == nil {
				out = append(out, doc.Spec)
			}
		}
		return out
	}
	open := func() (metrics.Counting, func(), error) {
		dp, err := dataplane.New()
		if err != nil {
			return nil, nil, err
		}
		return dp, dp.Close, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(&metrics.Collector{Infras: infras, Open: open, Host: host, HostNS: plan.CurrentNS})
	metrics.RegisterIdentity(reg, "")
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(log, "metrics: %v\n", err)
		}
	}()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	return ln.Addr().String(), nil
}

// CheckKernel says whether this process may change the kernel: ErrNotRoot
// when it may not.
func CheckKernel() error {
	dp, err := dataplane.New()
	if err != nil {
		return err
	}
	dp.Close()
	return nil
}
