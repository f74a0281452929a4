package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/etcdserver"
)

func serverCmd() *cobra.Command {
	var dataDir, listenClient, advertiseClient, listenPeer, logLevel, cert, key, clientCA string
	c := &cobra.Command{
		Use:   "server",
		Short: "Run a single-member etcd for vnet's shared state (small setups; prints the endpoint)",
		Long: `Run a single-member etcd inside vnet, for setups without an etcd cluster of
their own. It prints the endpoint to give commands and agents (--etcd or
VNET_ETCD) and runs until SIGINT or SIGTERM. Without --cert and --key it is
plain HTTP, and without --client-ca anyone who connects may change every
infrastructure: keep such a server on loopback or a trusted network. A setup
that outgrows one member points --etcd at a real etcd cluster instead.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				dataDir = filepath.Join(stateDir, "etcd")
			}
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				return fmt.Errorf("server: %w", err)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			srv, err := etcdserver.Start(etcdserver.Config{
				DataDir:      dataDir,
				ClientURL:    listenClient,
				AdvertiseURL: advertiseClient,
				PeerURL:      listenPeer,
				LogLevel:     logLevel,
				CertFile:     cert,
				KeyFile:      key,
				ClientCAFile: clientCA,
			})
			if err != nil {
				return fmt.Errorf("server: %w", err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "vnet server: etcd serving, data in %s\n", dataDir)
			if !loopbackOnly(listenClient) && clientCA == "" {
				fmt.Fprintln(out, "vnet server: warning: clients reach it beyond this host without authentication (see --client-ca)")
			}
			fmt.Fprintf(out, "VNET_ETCD=%s\n", srv.Endpoint())
			select {
			case <-ctx.Done():
			case err := <-srv.Err():
				srv.Close()
				return fmt.Errorf("server: %w", err)
			}
			srv.Close()
			fmt.Fprintln(out, "vnet server: stopped")
			return nil
		},
	}
	c.Flags().StringVar(&dataDir, "data-dir", "", "where etcd keeps its data (default <state-dir>/etcd)")
	c.Flags().StringVar(&listenClient, "listen-client", "127.0.0.1:2379", "address for clients; port 0 picks one")
	c.Flags().StringVar(&advertiseClient, "advertise-client", "", "client URL to hand out, when --listen-client is 0.0.0.0")
	c.Flags().StringVar(&listenPeer, "listen-peer", "127.0.0.1:2380", "etcd's peer address (unused by a single member; keep it on loopback)")
	c.Flags().StringVar(&logLevel, "log-level", "warn", "etcd's log on stderr: debug, info, warn or error")
	c.Flags().StringVar(&cert, "cert", "", "server certificate (PEM): clients connect over https")
	c.Flags().StringVar(&key, "key", "", "its key (PEM)")
	c.Flags().StringVar(&clientCA, "client-ca", "", "CA (PEM) whose client certificates alone get in (with --cert and --key)")
	return c
}

// loopbackOnly says whether a listen address accepts only this host's
// connections.
func loopbackOnly(listen string) bool {
	if !strings.Contains(listen, "://") {
		listen = "http://" + listen
	}
	u, err := url.Parse(listen)
	if err != nil {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}
