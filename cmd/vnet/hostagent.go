package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/service"
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
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			out := cmd.OutOrStdout()
			o := service.HostAgentOptions{StateDir: stateDir, Endpoints: endpoints, TLS: etcdTLSFiles(), Host: host,
				Interval: interval, CounterInterval: counterInterval, TTL: ttl, MetricsAddr: metricsAddr, Log: out}
			if os.Getenv("VNET_TRACE") != "" {
				o.Trace = out
			}
			return service.RunHostAgent(ctx, o)
		},
	}
	addEtcdFlag(c)
	c.Flags().StringVar(&host, "host", "", "the spec's name of this machine (default: the hostname up to its first dot)")
	c.Flags().DurationVar(&interval, "interval", service.DefaultHostInterval, "how often to reconcile without a change in etcd (repairs drift)")
	c.Flags().DurationVar(&counterInterval, "counter-interval", service.DefaultHostCounterInterval,
		"how often to read the port security counters between passes, reporting them when they changed")
	c.Flags().DurationVar(&ttl, "ttl", service.DefaultReportTTL, "how long a report outlives a dead agent")
	c.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve this host's Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9471; default: none)")
	return c
}
