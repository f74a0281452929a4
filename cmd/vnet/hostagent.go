package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/hostagent"
	"github.com/vnet-project/vnet/internal/metrics"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// hostAgentCmd is `vnet agent host`: the agent of one hypervisor of a
// cluster, realizing what etcd places on it.
func hostAgentCmd() *cobra.Command {
	var host, metricsAddr string
	var interval, counterInterval, ttl time.Duration
	c := &cobra.Command{
		Use:   "host --etcd URL --host NAME",
		Short: "Realize on this machine its host's part of every infrastructure stored in etcd, and report it",
		Long: `Realize on this machine its host's part of every infrastructure stored in etcd.

The agent watches etcd, applies each infrastructure that names this host (its
switches' bridges and VXLAN tunnels in this network namespace, its VMs as
namespaces), removes what etcd no longer places here, repairs drift every
--interval, and reports what it realized under a lease (vnet status --etcd),
with what its ports' port security and ACL rules counted, read again every
--counter-interval and reported when it changed.
Where a switch teams several real NICs of this host, it also runs the teaming
agent for it: failover when a NIC loses carrier, load-based teaming and
team-wide limits (docs/hosts.md).
Stopping or killing it changes nothing on the machine. Its own record of what
it realized is in <state-dir>/hostagent. See docs/cluster.md.`,
		Args: exactArgs(0, "no arguments (the host is --host)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			endpoints := etcdEndpoints()
			if len(endpoints) == 0 {
				return usageError{errors.New("vnet agent host needs --etcd (or VNET_ETCD)")}
			}
			if host == "" {
				h, err := os.Hostname()
				if err != nil {
					return err
				}
				host, _, _ = strings.Cut(h, ".")
			}
			dir := filepath.Join(stateDir, "hostagent")
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
			cluster, err := openCluster(endpoints)
			if err != nil {
				return err
			}
			defer cluster.Close()
			out := cmd.OutOrStdout()
			a := &hostagent.Agent{Cluster: cluster, Local: local, DP: dp, Host: host,
				UnderlayMTU: func(addr string) (int, error) {
					_, mtu, err := dataplane.UnderlayLink(addr)
					return mtu, err
				},
				Interval: interval, CounterInterval: counterInterval, TTL: ttl, Log: out, TeamDP: dp}
			if os.Getenv("VNET_TRACE") != "" {
				a.Trace = out
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			fmt.Fprintf(out, "vnet agent host: host %s, etcd %s, state in %s\n", host, strings.Join(endpoints, ","), dir)
			if metricsAddr != "" {
				addr, err := serveHostMetrics(ctx, metricsAddr, local, host, out)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "vnet agent host: metrics at http://%s/metrics\n", addr)
			}
			return a.Run(ctx)
		},
	}
	addEtcdFlag(c)
	c.Flags().StringVar(&host, "host", "", "the spec's name of this machine (default: the hostname up to its first dot)")
	c.Flags().DurationVar(&interval, "interval", hostagent.DefaultInterval, "how often to reconcile without a change in etcd (repairs drift)")
	c.Flags().DurationVar(&counterInterval, "counter-interval", hostagent.DefaultCounterInterval,
		"how often to read the port security counters between passes, reporting them when they changed")
	c.Flags().DurationVar(&ttl, "ttl", etcdstore.DefaultReportTTL, "how long a report outlives a dead agent")
	c.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve this host's Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9471; default: none)")
	return c
}

// serveHostMetrics serves, until ctx ends, the metrics of what this host
// realized: each infrastructure in the agent's local records, read with a
// dataplane opened per scrape. It returns the address it listens on.
func serveHostMetrics(ctx context.Context, addr string, local store.Store, host string, log io.Writer) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("--metrics-addr: %w", err)
	}
	cache := specCache()
	infras := func() []*spec.Spec {
		recs, err := local.List()
		if err != nil {
			return nil
		}
		var out []*spec.Spec
		for _, r := range recs {
			if doc, err := storedDoc(cache, r); err == nil {
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
