package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/api"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
)

// apiFlags are the HTTP API's flags of vnet server.
type apiFlags struct {
	cfg       api.Config
	tokenFile string
}

func defaultTokenFile() string { return filepath.Join(stateDir, "api.token") }

// addAPIFlags adds the HTTP API's flags to the server command.
func addAPIFlags(c *cobra.Command, f *apiFlags) {
	fl := c.Flags()
	fl.StringVar(&f.cfg.Addr, "listen", api.DefaultAddr, "address to serve the API, metrics and dashboard on")
	fl.StringVar(&f.tokenFile, "token-file", "", "bearer tokens, NAME:TOKEN a line (default STATE_DIR/api.token, made with one random token if missing)")
	fl.BoolVar(&f.cfg.AuthReads, "auth-reads", false, "ask for a token on reads too (without it reads are open to clients on this machine)")
	fl.StringVar(&f.cfg.TLSCert, "tls-cert", "", "serve HTTPS with this certificate (PEM)")
	fl.StringVar(&f.cfg.TLSKey, "tls-key", "", "the certificate's private key (PEM)")
	fl.DurationVar(&f.cfg.SampleInterval, "sample-interval", api.DefaultSampleInterval, "how often to sample counters for /stats, /series and the dashboard")
	fl.DurationVar(&f.cfg.History, "history", api.DefaultHistory, "how much sampled history to keep per infrastructure (the longest stats window)")
}

// apiConfig is the API's configuration from its flags, with a token file
// made if none was named and the default one is missing.
func apiConfig(cmd *cobra.Command, f *apiFlags) (api.Config, error) {
	cfg := f.cfg
	cfg.TokenFile = f.tokenFile
	if cfg.TokenFile == "" {
		cfg.TokenFile = defaultTokenFile()
		made, err := api.EnsureTokenFile(cfg.TokenFile)
		if err != nil {
			return cfg, err
		}
		if made {
			fmt.Fprintf(cmd.ErrOrStderr(), "made a token for changes through the API: %s\n", cfg.TokenFile)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return cfg, err
	}
	cfg.Backend = &api.Local{StateDir: stateDir, Exe: exe}
	cfg.Log = cmd.ErrOrStderr()
	return cfg, nil
}

// serverURL is where --server (or VNET_SERVER) says the API is; empty: act
// on this machine directly.
var serverURL string

func addClientFlags(root *cobra.Command) {
	root.PersistentFlags().StringVar(&serverURL, "server", os.Getenv("VNET_SERVER"),
		"act through a vnet server at this URL (status, apply, destroy, stats); token from VNET_TOKEN or STATE_DIR/api.token")
}

// remote is the client of --server, or nil without it.
func remote() (*api.Client, error) {
	if serverURL == "" {
		return nil, nil
	}
	token := os.Getenv("VNET_TOKEN")
	if token == "" {
		token, _ = api.FirstToken(defaultTokenFile()) // reads may need none
	}
	c, err := api.NewClient(serverURL, token)
	if err != nil {
		return nil, usageError{err}
	}
	return c, nil
}

func applyRemote(cmd *cobra.Command, c *api.Client, file string, dryRun bool) error {
	doc, err := spec.LoadFile(file)
	if err != nil {
		return err
	}
	abs, _ := filepath.Abs(file)
	res, err := c.Apply(cmd.Context(), doc.Spec.Name, abs, doc.Source, dryRun)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if len(res.Plan) == 0 {
		fmt.Fprintln(out, "no changes: the host already matches the spec")
		return nil
	}
	for _, a := range res.Plan {
		fmt.Fprintln(out, a.Text)
	}
	if !dryRun {
		fmt.Fprintf(out, "applied %s: %s\n", doc.Spec.Name, counted(res.Executed, "change", "changes"))
	}
	return nil
}

func destroyRemote(cmd *cobra.Command, c *api.Client, name string) error {
	res, err := c.Destroy(cmd.Context(), name)
	if err != nil {
		if api.IsNotFound(err) {
			return fmt.Errorf("destroy %s: %w", name, store.ErrNotFound)
		}
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "destroyed %s: %s removed\n", name, counted(res.Removed, "object", "objects"))
	return nil
}

func statusRemote(cmd *cobra.Command, c *api.Client, args []string, output string) error {
	var names []string
	if len(args) == 0 {
		list, err := c.List(cmd.Context())
		if err != nil {
			return err
		}
		for _, i := range list {
			names = append(names, i.Name)
		}
	}
	for _, a := range args {
		name, err := infraName(a)
		if err != nil {
			return err
		}
		names = append(names, name)
	}
	var all []any
	for _, name := range names {
		st, err := c.Status(cmd.Context(), name)
		if err != nil {
			var ae *api.Error
			if errors.As(err, &ae) && ae.Status == 404 {
				return fmt.Errorf("%q: %w", name, store.ErrNotFound)
			}
			return err
		}
		if output == "json" {
			all = append(all, st)
			continue
		}
		if st.Cluster != nil {
			// Over etcd: each host's standing, as vnet status --etcd prints it.
			info, err := c.Get(cmd.Context(), name)
			if err != nil {
				return err
			}
			printClusterStatus(cmd.OutOrStdout(), clusterStatus{Name: name, SpecFile: st.SpecFile, Generation: st.Generation,
				AppliedAt: info.AppliedAt, Converged: st.Cluster.Converged, Hosts: st.Cluster.Hosts, Damaged: st.Cluster.Damaged}, time.Now())
			continue
		}
		printStatus(cmd.OutOrStdout(), st.Infra)
	}
	if output == "json" {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		if all == nil {
			all = []any{}
		}
		return enc.Encode(all)
	}
	if len(names) == 0 {
		fmt.Fprintln(cmd.OutOrStdout(), "no infrastructures")
	}
	return nil
}
