package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/hostagent"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/store/etcdstore"
)

// hostAgentCmd is `vnet agent host`: the agent of one hypervisor of a
// cluster, realizing what etcd places on it.
func hostAgentCmd() *cobra.Command {
	var host string
	var interval, ttl time.Duration
	c := &cobra.Command{
		Use:   "host --etcd URL --host NAME",
		Short: "Realize on this machine its host's part of every infrastructure stored in etcd, and report it",
		Long: `Realize on this machine its host's part of every infrastructure stored in etcd.

The agent watches etcd, applies each infrastructure that names this host (its
switches' bridges and VXLAN tunnels in this network namespace, its VMs as
namespaces), removes what etcd no longer places here, repairs drift every
--interval, and reports what it realized under a lease (vnet status --etcd).
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
				Interval: interval, TTL: ttl, Log: out}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			fmt.Fprintf(out, "vnet agent host: host %s, etcd %s, state in %s\n", host, strings.Join(endpoints, ","), dir)
			return a.Run(ctx)
		},
	}
	addEtcdFlag(c)
	c.Flags().StringVar(&host, "host", "", "the spec's name of this machine (default: the hostname up to its first dot)")
	c.Flags().DurationVar(&interval, "interval", hostagent.DefaultInterval, "how often to reconcile without a change in etcd (repairs drift)")
	c.Flags().DurationVar(&ttl, "ttl", etcdstore.DefaultReportTTL, "how long a report outlives a dead agent")
	return c
}
