package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/api"
	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec/speccache"
)

// Where a command's infrastructures are: a vnet server (--server), etcd
// (--etcd), or this machine. Each command asks backend once and calls the
// same use case whichever it gets.

// serverURL is where --server (or VNET_SERVER) says the API is; empty: act
// on this machine directly.
var serverURL string

func addClientFlags(root *cobra.Command) {
	root.PersistentFlags().StringVar(&serverURL, "server", os.Getenv("VNET_SERVER"),
		"act through a vnet server at this URL (status, apply, destroy, stats, ioc, link, unlink, pause, resume, graph); token from VNET_TOKEN or STATE_DIR/api.token")
}

// etcdFlag is --etcd of the commands that can keep their state in etcd;
// etcdTLS their --etcd-ca, --etcd-cert and --etcd-key.
var (
	etcdFlag string
	etcdTLS  service.TLSFiles
)

// addEtcdFlag gives a command --etcd and its TLS files; etcdEndpoints and
// etcdTLSFiles read them.
func addEtcdFlag(c *cobra.Command) {
	c.Flags().StringVar(&etcdFlag, "etcd", "", "etcd endpoints, comma-separated, to keep the state in etcd for several hosts (default $VNET_ETCD; none: this host only)")
	c.Flags().StringVar(&etcdTLS.CA, "etcd-ca", "", "CA of etcd's certificate, for https endpoints (default $VNET_ETCD_CA; none: the system's)")
	c.Flags().StringVar(&etcdTLS.Cert, "etcd-cert", "", "client certificate for an etcd that asks for one (default $VNET_ETCD_CERT)")
	c.Flags().StringVar(&etcdTLS.Key, "etcd-key", "", "its key (default $VNET_ETCD_KEY)")
}

// etcdTLSFiles is the TLS flags, each falling back to its variable.
func etcdTLSFiles() service.TLSFiles {
	or := func(flag, env string) string {
		if flag != "" {
			return flag
		}
		return os.Getenv(env)
	}
	return service.TLSFiles{CA: or(etcdTLS.CA, "VNET_ETCD_CA"), Cert: or(etcdTLS.Cert, "VNET_ETCD_CERT"), Key: or(etcdTLS.Key, "VNET_ETCD_KEY")}
}

// etcdEndpoints is where the shared state lives: --etcd, else VNET_ETCD,
// else nowhere (nil), and vnet works on this host alone.
func etcdEndpoints() []string {
	if etcdFlag != "" {
		return service.ParseEndpoints(etcdFlag)
	}
	return service.ParseEndpoints(os.Getenv("VNET_ETCD"))
}

// where says which back ends a command may use besides this machine.
type where struct{ server, etcd bool }

// backend is the service of the command's infrastructures: through the
// server when --server is given (and the command goes through servers),
// in etcd when --etcd is (and the command keeps state there), else this
// machine's. The caller closes it.
func backend(w where) (service.Service, error) {
	if w.server && serverURL != "" {
		return remote()
	}
	if eps := etcdEndpoints(); w.etcd && eps != nil {
		c := service.OpenCluster(eps, etcdTLSFiles(), specCache())
		c.Trace = traceTo()
		return c, nil
	}
	return local(), nil
}

// local is this machine's service, with the state directory's cache of
// specs and the vnet binary that runs agents.
func local() *service.Local {
	exe, _ := os.Executable()
	l := service.NewLocal(stateDir, exe)
	l.Trace = traceTo()
	return l
}

// traceTo is where VNET_TRACE sends where a command's time goes.
func traceTo() io.Writer {
	if os.Getenv("VNET_TRACE") != "" {
		return os.Stderr
	}
	return nil
}

// specCache keeps the specs that commands loaded, applied or read back in
// the state directory.
func specCache() *speccache.Cache { return service.SpecCache(stateDir) }

// remote is the service of the server --server names.
func remote() (service.Service, error) {
	token := os.Getenv("VNET_TOKEN")
	if token == "" {
		token, _ = api.FirstToken(defaultTokenFile()) // reads may need none
	}
	c, err := api.NewClient(serverURL, token)
	if err != nil {
		return nil, usageError{err}
	}
	return &api.Remote{C: c}, nil
}

// onThisMachineOnly are the commands that act on this machine's kernel or
// state alone: given --server, they refuse rather than quietly act here
// while the user meant the server's machine.
var onThisMachineOnly = map[string]bool{"exec": true, "gc": true, "recover": true}

// refuseServerFlag is the root's check, before any command runs, that an
// explicit --server is not given to a command that cannot go through it.
func refuseServerFlag(cmd *cobra.Command, _ []string) error {
	if f := cmd.Flags().Lookup("server"); f != nil && f.Changed && onThisMachineOnly[cmd.Name()] {
		return usageError{fmt.Errorf("--server: vnet %s acts on this machine only; run it on the host itself", cmd.Name())}
	}
	return nil
}
