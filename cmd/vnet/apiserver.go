package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/api"
	"github.com/vnet-project/vnet/internal/service"
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
	fl.StringSliceVar(&f.cfg.Hosts, "allow-host", nil, "a name the server answers to (Host), beside localhost, the machine's name and its addresses; repeat for more")
	fl.StringVar(&f.cfg.TLSCert, "tls-cert", "", "serve HTTPS with this certificate (PEM)")
	fl.StringVar(&f.cfg.TLSKey, "tls-key", "", "the certificate's private key (PEM)")
	fl.DurationVar(&f.cfg.SampleInterval, "sample-interval", api.DefaultSampleInterval, "how often to sample counters for /stats, /series and the dashboard (stretched, and logged, when a round takes more than a fiftieth of it)")
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
	// A server answers reads from a copy of the records a second old at
	// most, and keeps the specs it decodes in memory.
	cfg.Backend = &service.Local{StateDir: stateDir, Exe: exe, ReadsFresh: time.Second, Trace: traceTo()}
	cfg.Log = cmd.ErrOrStderr()
	if traceTo() != nil {
		cfg.Trace = cfg.Log
	}
	info, _ := debug.ReadBuildInfo()
	cfg.Version = buildVersion(version, info)
	return cfg, nil
}
