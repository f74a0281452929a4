package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/netperf"
	"github.com/vnet-project/vnet/internal/units"
)

func netperfCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "netperf [global options] -- [test options]",
		Short:              "Measure throughput, transaction rate, latency and CPU cost against a netserver (netperf's options)",
		DisableFlagParsing: true, // netperf's own syntax: -l10, -H a,6, -- -m 8K
		RunE: func(cmd *cobra.Command, args []string) error {
			args = dropStateDir(args)
			out := cmd.OutOrStdout()
			cfg, err := netperf.ParseArgs(args)
			switch {
			case netperf.IsHelp(err):
				fmt.Fprintln(out, netperf.Usage)
				return nil
			case err != nil:
				return usageError{fmt.Errorf("netperf: %w", err)}
			case cfg.Version:
				fmt.Fprintf(out, "Netperf version %s (%s)\n", netperf.NetperfVersion, versionLine())
				return nil
			case cfg.ListSelectors:
				// netperf lists them and exits 1; so do scripts' checks.
				netperf.WriteSelectorList(out, cfg.Output)
				return exitError{code: exitFailure, msg: "netperf: the output selectors are listed above (netperf exits 1 here too)"}
			}
			// -d's lines and TCP_INFO go to stderr, away from the results.
			cfg.Diag = cmd.ErrOrStderr()
			cfg.DumpTCPInfo = os.Getenv("DUMP_TCP_INFO") != ""
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := netperf.Execute(ctx, cfg, interimWriter(cfg, out))
			if err != nil {
				return err
			}
			rep.Command = append([]string{"netperf"}, args...)
			switch {
			case cfg.JSONStream:
				return json.NewEncoder(out).Encode(netperf.StreamEvent{Event: "result", Report: rep})
			case cfg.JSON:
				return netperf.WriteJSON(out, rep)
			}
			netperf.WriteText(out, rep)
			return nil
		},
	}
}

// interimWriter prints -D's interim results as netperf does in each
// output mode, or as JSON lines with --json-stream; --json prints none.
func interimWriter(cfg *netperf.Config, out io.Writer) func(netperf.Interim) {
	switch {
	case cfg.JSONStream:
		enc := json.NewEncoder(out)
		return func(e netperf.Interim) { enc.Encode(netperf.StreamEvent{Event: "interim", Interim: &e}) }
	case cfg.JSON:
		return nil
	}
	counts := map[string]int{}
	return func(e netperf.Interim) {
		fmt.Fprint(out, netperf.InterimLine(cfg, e, counts))
	}
}

// dropStateDir removes vnet's own --state-dir, which reaches a command
// that parses its own flags among its arguments. netperf does not use it.
func dropStateDir(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--":
			return append(out, args[i:]...)
		case args[i] == "--state-dir" && i+1 < len(args):
			i++
		case strings.HasPrefix(args[i], "--state-dir="):
		default:
			out = append(out, args[i])
		}
	}
	return out
}

// listenerFDEnv tells a daemonized netserver which inherited descriptor is
// its listener: the parent binds before it exits, so a client started
// right after `vnet netserver` returns finds the port open.
const listenerFDEnv = "VNET_NETSERVER_FD"

func netserverCmd() *cobra.Command {
	var port int
	var addr string
	var foreground, verbose bool
	srv := &netperf.Server{}
	maxMemory := sizeFlag(netperf.DefaultMaxMemory)
	c := &cobra.Command{
		Use:   "netserver [-p PORT] [-L ADDR] [-D]",
		Short: "Serve netperf tests (port 12865); runs in the background unless -D",
		Long: `Serve netperf tests (port 12865); runs in the background unless -D.

The limits keep one client from taking the netserver from the others. A client is
a source address (an IPv6 /64). A control connection that has not sent its request
after a second is idle, and is cut when its client, or all clients, keep too many.
A test holds a place from its request to its end; one that has moved no data for a
second gives it up to a request that finds none free. A request whose buffers
(message sizes) do not fit the memory left is refused with the reason.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkLimits(srv, maxMemory); err != nil {
				return usageError{err}
			}
			ln, err := netserverListener(addr, port)
			if err != nil {
				return err
			}
			if !foreground {
				return daemonize(ln, limitArgs(cmd))
			}
			logger := log.New(os.Stderr, "netserver: ", log.LstdFlags)
			if !verbose && os.Getenv(listenerFDEnv) != "" {
				logger.SetOutput(devNull())
			}
			logger.Printf("listening on %s", ln.Addr())
			srv.Log = logger
			srv.MaxMemory = int64(maxMemory)
			// The buffers are the heap: keep the collector from letting the
			// heap grow to twice what the tests hold.
			debug.SetMemoryLimit(srv.MaxMemory + 256<<20)
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return srv.Serve(ctx, ln)
		},
	}
	f := c.Flags()
	f.IntVarP(&port, "port", "p", netperf.DefaultPort, "control port")
	f.StringVarP(&addr, "local", "L", "", "local address to listen on (default all)")
	f.BoolVarP(&foreground, "foreground", "D", false, "stay in the foreground, logging to stderr")
	f.BoolVarP(&verbose, "verbose", "v", false, "log each test")
	f.IntVar(&srv.MaxTests, "max-tests", netperf.DefaultMaxTests, "tests at once; more are refused as busy")
	f.IntVar(&srv.MaxTestsPerClient, "max-tests-per-client", netperf.DefaultMaxTestsPerClient, "tests at once from one client")
	f.Var(&maxMemory, "max-memory", "buffer memory all tests may hold together (message sizes; KiB, MiB, GiB)")
	f.IntVar(&srv.MaxIdle, "max-idle", netperf.DefaultMaxIdle, "idle control connections kept, all clients together")
	f.IntVar(&srv.MaxIdlePerClient, "max-idle-per-client", netperf.DefaultMaxIdlePerClient, "idle control connections kept per client")
	f.DurationVar(&srv.RequestWait, "request-timeout", netperf.DefaultRequestWait, "a control connection that has not sent its request by then is cut")
	f.DurationVar(&srv.StartTimeout, "start-timeout", netperf.DefaultStartTimeout, "a test whose data connection has moved no data by then is cut")
	f.DurationVar(&srv.StallTimeout, "stall-timeout", netperf.DefaultStallTimeout, "a test whose data stopped moving for this long is cut")
	return c
}

// limitFlags are the netserver's limits, passed on to its background copy.
var limitFlags = []string{"max-tests", "max-tests-per-client", "max-memory", "max-idle", "max-idle-per-client",
	"request-timeout", "start-timeout", "stall-timeout"}

func limitArgs(cmd *cobra.Command) []string {
	var args []string
	for _, name := range limitFlags {
		if f := cmd.Flags().Lookup(name); f.Changed {
			args = append(args, "--"+name+"="+f.Value.String())
		}
	}
	return args
}

// sizeFlag is a flag holding a size in bytes, written as in a spec (512MiB).
type sizeFlag units.Size

func (f *sizeFlag) String() string { return units.Size(*f).String() }
func (f *sizeFlag) Type() string   { return "size" }
func (f *sizeFlag) Set(s string) error {
	v, err := units.ParseSize(s)
	*f = sizeFlag(v)
	return err
}

func checkLimits(s *netperf.Server, mem sizeFlag) error {
	for _, v := range []struct {
		name string
		n    int
	}{{"max-tests", s.MaxTests}, {"max-tests-per-client", s.MaxTestsPerClient}, {"max-idle", s.MaxIdle}, {"max-idle-per-client", s.MaxIdlePerClient}} {
		if v.n < 1 {
			return fmt.Errorf("netserver: --%s %d: want at least 1", v.name, v.n)
		}
	}
	for _, v := range []struct {
		name string
		d    time.Duration
	}{{"request-timeout", s.RequestWait}, {"start-timeout", s.StartTimeout}, {"stall-timeout", s.StallTimeout}} {
		if v.d <= 0 {
			return fmt.Errorf("netserver: --%s %v: want a positive duration", v.name, v.d)
		}
	}
	if mem < netperf.MaxMessage || mem > 1<<40 {
		return fmt.Errorf("netserver: --max-memory %v: want 16MiB (the largest message) to 1TiB", &mem)
	}
	return nil
}

func netserverListener(addr string, port int) (net.Listener, error) {
	if fd := os.Getenv(listenerFDEnv); fd != "" {
		n, err := strconv.Atoi(fd)
		if err != nil {
			return nil, fmt.Errorf("%s=%q", listenerFDEnv, fd)
		}
		f := os.NewFile(uintptr(n), "listener")
		defer f.Close()
		return net.FileListener(f)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("netserver: %w", err)
	}
	return ln, nil
}

// daemonize starts a detached copy of this netserver on the bound listener.
func daemonize(ln net.Listener, limits []string) error {
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append(daemonArgs(ln.Addr()), limits...)...)
	cmd.ExtraFiles = []*os.File{f}
	cmd.Env = append(os.Environ(), listenerFDEnv+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("netserver: start in background: %w", err)
	}
	fmt.Printf("netserver listening on %s (pid %d)\n", ln.Addr(), cmd.Process.Pid)
	return nil
}

// daemonArgs is the background copy's command line. It serves the
// inherited listener whatever its flags say; they are there so that ps
// tells two netservers apart.
func daemonArgs(a net.Addr) []string {
	host, port, _ := net.SplitHostPort(a.String())
	args := []string{"netserver", "-D", "-p", port}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		args = append(args, "-L", host)
	}
	return args
}

func devNull() *os.File {
	f, _ := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	return f
}
