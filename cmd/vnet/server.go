package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/api"
	"github.com/vnet-project/vnet/internal/etcdserver"
	"github.com/vnet-project/vnet/internal/service"
)

// etcdFlags are the embedded etcd's flags of vnet server.
type etcdFlags struct {
	off                                                bool
	dataDir, listenClient, advertiseClient, listenPeer string
	logLevel, cert, key, clientCA                      string
}

func addEtcdServerFlags(c *cobra.Command, f *etcdFlags) {
	fl := c.Flags()
	fl.BoolVar(&f.off, "no-etcd", false, "serve no etcd (the agents use an etcd cluster of their own)")
	fl.StringVar(&f.dataDir, "data-dir", "", "where etcd keeps its data (default <state-dir>/etcd)")
	fl.StringVar(&f.listenClient, "listen-client", "127.0.0.1:2379", "etcd's address for clients; port 0 picks one")
	fl.StringVar(&f.advertiseClient, "advertise-client", "", "etcd client URL to hand out, when --listen-client is 0.0.0.0")
	fl.StringVar(&f.listenPeer, "listen-peer", "127.0.0.1:2380", "etcd's peer address (unused by a single member; keep it on loopback)")
	fl.StringVar(&f.logLevel, "log-level", "warn", "etcd's log on stderr: debug, info, warn or error")
	fl.StringVar(&f.cert, "cert", "", "etcd's server certificate (PEM): clients connect over https")
	fl.StringVar(&f.key, "key", "", "its key (PEM)")
	fl.StringVar(&f.clientCA, "client-ca", "", "CA (PEM) whose client certificates alone reach etcd (with --cert and --key)")
}

func serverCmd() *cobra.Command {
	ef := &etcdFlags{}
	af := &apiFlags{}
	var noAPI bool
	c := &cobra.Command{
		Use:   "server",
		Short: "Serve the HTTP API, metrics and dashboard, and a single-member etcd for shared state",
		Long: `Serve vnet's HTTP API, Prometheus metrics and dashboard (--listen; --no-api
to skip), and a single-member etcd for setups without an etcd cluster of
their own (--listen-client; --no-etcd to skip). The API serves the
infrastructures in etcd (--etcd, else the embedded one), realized by each
host's agent; with --no-etcd and no --etcd, those of this machine.
It prints the endpoints to give commands and agents (VNET_SERVER, and
VNET_ETCD for --etcd) and runs until SIGINT or SIGTERM.

etcd without --cert and --key is plain HTTP, and without --client-ca anyone
who connects may change every infrastructure: keep it on loopback or a
trusted network. A setup that outgrows one member points --etcd at a real
etcd cluster and runs vnet server --no-etcd, or no server at all.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ef.off && noAPI {
				return usageError{errors.New("server: --no-etcd and --no-api leave nothing to serve")}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			errc := make(chan error, 2)
			endpoints := etcdEndpoints()
			tlsFiles, embedded := etcdTLSFiles(), false
			if !ef.off {
				srv, err := startEmbeddedEtcd(cmd, ef)
				if err != nil {
					return err
				}
				defer srv.Close()
				go func() {
					if err, ok := <-srv.Err(); ok && err != nil {
						errc <- fmt.Errorf("server: etcd: %w", err)
					}
				}()
				if len(endpoints) == 0 {
					endpoints, embedded = []string{srv.Endpoint()}, true
					if tlsFiles == (service.TLSFiles{}) && ef.cert != "" {
						// etcd's own gateway reaches it with the server's
						// pair; so does the API, trusting the clients' CA,
						// unless --etcd-ca and its kin say otherwise.
						tlsFiles = service.TLSFiles{CA: ef.clientCA, Cert: ef.cert, Key: ef.key}
					}
				}
			}
			if !noAPI {
				cfg, err := apiConfig(cmd, af)
				if err != nil {
					return err
				}
				if len(endpoints) > 0 {
					// The API serves what etcd holds; each host's agent
					// realizes it.
					// In memory: a server decodes the same specs over and over.
					cluster := service.OpenCluster(endpoints, tlsFiles, nil)
					defer cluster.Close()
					switch err := cluster.Connect(); {
					case err != nil && embedded:
						fmt.Fprintf(cmd.OutOrStdout(), "vnet server: the API serves this machine: it cannot reach the embedded etcd (%v); --etcd-ca, --etcd-cert and --etcd-key say how\n", err)
					case err != nil:
						return fmt.Errorf("server: %w", err)
					default:
						cfg.Backend = cluster
						fmt.Fprintf(cmd.OutOrStdout(), "vnet server: the API serves the infrastructures in etcd at %s\n", strings.Join(endpoints, ","))
					}
				}
				go func() { errc <- api.Run(ctx, cfg) }()
			}
			select {
			case <-ctx.Done():
			case err := <-errc:
				if err != nil {
					return err
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), "vnet server: stopped")
			return nil
		},
	}
	addEtcdServerFlags(c, ef)
	c.Flags().BoolVar(&noAPI, "no-api", false, "serve no HTTP API, metrics or dashboard")
	addAPIFlags(c, af)
	addEtcdFlag(c)
	return c
}

func startEmbeddedEtcd(cmd *cobra.Command, f *etcdFlags) (*etcdserver.Server, error) {
	dataDir := f.dataDir
	if dataDir == "" {
		dataDir = filepath.Join(stateDir, "etcd")
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	srv, err := etcdserver.Start(etcdserver.Config{
		DataDir:      dataDir,
		ClientURL:    f.listenClient,
		AdvertiseURL: f.advertiseClient,
		PeerURL:      f.listenPeer,
		LogLevel:     f.logLevel,
		CertFile:     f.cert,
		KeyFile:      f.key,
		ClientCAFile: f.clientCA,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "vnet server: etcd serving, data in %s\n", dataDir)
	if !loopbackOnly(f.listenClient) && f.clientCA == "" {
		fmt.Fprintln(out, "vnet server: warning: clients reach etcd beyond this host without authentication (see --client-ca)")
	}
	fmt.Fprintf(out, "VNET_ETCD=%s\n", srv.Endpoint())
	return srv, nil
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
