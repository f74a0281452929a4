package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/netperf"
)

func netperfCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "netperf [global options] -- [test options]",
		Short:              "Measure throughput, transaction rate, latency and CPU cost against a netserver (netperf's options)",
		DisableFlagParsing: true, // netperf's own syntax: -l10, -H a,6, -- -m 8K
		RunE: func(cmd *cobra.Command, args []string) error {
			args = dropStateDir(args)
			cfg, err := netperf.ParseArgs(args)
			if netperf.IsHelp(err) {
				fmt.Fprintln(cmd.OutOrStdout(), netperf.Usage)
				return nil
			}
			if err != nil {
				return usageError{fmt.Errorf("netperf: %w", err)}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			var events func(netperf.Interim)
			enc := json.NewEncoder(out)
			switch {
			case cfg.JSONStream:
				events = func(e netperf.Interim) { enc.Encode(netperf.StreamEvent{Event: "interim", Interim: &e}) }
			case !cfg.JSON:
				events = func(e netperf.Interim) {
					fmt.Fprintf(out, "Interim result: %10.2f %s over %.3f seconds ending at %.3f (%s #%d)\n",
						scaleInterim(e), interimUnit(e), e.Interval, e.At, e.Target, e.Instance)
				}
			}
			rep, err := netperf.Execute(ctx, cfg, events)
			if err != nil {
				return err
			}
			rep.Command = append([]string{"vnet", "netperf"}, args...)
			switch {
			case cfg.JSONStream:
				return enc.Encode(netperf.StreamEvent{Event: "result", Report: rep})
			case cfg.JSON:
				return netperf.WriteJSON(out, rep)
			}
			netperf.WriteText(out, rep)
			return nil
		},
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

func scaleInterim(e netperf.Interim) float64 {
	if e.Unit == "bit/s" {
		return e.Rate / 1e6
	}
	return e.Rate
}

func interimUnit(e netperf.Interim) string {
	if e.Unit == "bit/s" {
		return "10^6bits/s"
	}
	return "Trans/s"
}

// listenerFDEnv tells a daemonized netserver which inherited descriptor is
// its listener: the parent binds before it exits, so a client started
// right after `vnet netserver` returns finds the port open.
const listenerFDEnv = "VNET_NETSERVER_FD"

func netserverCmd() *cobra.Command {
	var port int
	var addr string
	var foreground, verbose bool
	c := &cobra.Command{
		Use:   "netserver [-p PORT] [-L ADDR] [-D]",
		Short: "Serve netperf tests (port 12865); runs in the background unless -D",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ln, err := netserverListener(addr, port)
			if err != nil {
				return err
			}
			if !foreground {
				return daemonize(ln)
			}
			logger := log.New(os.Stderr, "netserver: ", log.LstdFlags)
			if !verbose && os.Getenv(listenerFDEnv) != "" {
				logger.SetOutput(devNull())
			}
			logger.Printf("listening on %s", ln.Addr())
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return (&netperf.Server{Log: logger}).Serve(ctx, ln)
		},
	}
	c.Flags().IntVarP(&port, "port", "p", netperf.DefaultPort, "control port")
	c.Flags().StringVarP(&addr, "local", "L", "", "local address to listen on (default all)")
	c.Flags().BoolVarP(&foreground, "foreground", "D", false, "stay in the foreground, logging to stderr")
	c.Flags().BoolVarP(&verbose, "verbose", "v", false, "log each test")
	return c
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
func daemonize(ln net.Listener) error {
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, daemonArgs(ln.Addr())...)
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
