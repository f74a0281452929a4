package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/units"
)

func statsCmd() *cobra.Command {
	var window, interval time.Duration
	var output *outputFormat
	c := &cobra.Command{
		Use:               "stats NAME|FILE",
		ValidArgsFunction: completeInfras,
		Short:             "Transmit and receive rates per VM vNIC, uplink and pool, averaged over a window",
		Long: "Rates averaged over --window. With --server (or VNET_SERVER) the server's samples answer at once, for any window up to\n" +
			"the history it keeps. Without one, vnet samples for the window itself, but for at most " + service.LiveWindow.String() + ".",
		Args: exactArgs(1, "an infrastructure name or spec file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, err := backend(where{server: true})
			if err != nil {
				return err
			}
			defer svc.Close()
			name, err := infraName(svc, args[0])
			if err != nil {
				return err
			}
			if window <= 0 || interval <= 0 {
				return usageError{fmt.Errorf("--window and --interval must be positive")}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			avg, err := svc.Stats(ctx, name, service.StatsOptions{Window: window, Interval: interval})
			if err != nil {
				return err
			}
			if output.structured() {
				return output.print(cmd.OutOrStdout(), avg)
			}
			printAverages(cmd.OutOrStdout(), avg, window)
			return nil
		},
	}
	c.Flags().DurationVar(&window, "window", 5*time.Minute, "average over this long (at most "+service.LiveWindow.String()+" without --server)")
	c.Flags().DurationVarP(&interval, "interval", "i", time.Second, "time between samples")
	output = addOutputFlag(c, "", outText, outJSON, outYAML)
	return c
}

func printAverages(out io.Writer, a *service.Averages, asked time.Duration) {
	fmt.Fprintf(out, "%s: rates averaged over %.1f s (%d samples", a.Infra, a.Seconds, a.Samples)
	if a.Seconds+1 < asked.Seconds() {
		fmt.Fprintf(out, "; %s asked", asked)
	}
	fmt.Fprintln(out, ")")
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "\nVM\tVNIC\tHOST\tPORT GROUP\tTX\tRX\tSTATE")
	for _, p := range a.Ports {
		vm := p.VM
		if vm == "" {
			vm = "(host port)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", vm, p.VNIC, p.Host, p.PortGroup, mbit(p.Tx), mbit(p.Rx), upDown(p.Up))
	}
	if len(a.Uplinks) > 0 {
		fmt.Fprintln(w, "\nHOST\tSWITCH\tUPLINK\tNIC\tLINE\tTX\tRX\tSTATE")
		for _, u := range a.Uplinks {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", u.Host, u.Switch, u.Uplink, u.NIC, units.Rate(u.Line), mbit(u.Tx), mbit(u.Rx), upDown(u.Up))
		}
	}
	if len(a.Pools) > 0 {
		fmt.Fprintln(w, "\nHOST\tUPLINK\tPOOL\tSHARES\tRESERVATION\tLIMIT\tASSURED\tTX\tDROPS\tBACKLOG")
		for _, p := range a.Pools {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%dB\n", p.Host, p.Uplink, p.Pool, p.Shares, rateOrDash(p.Reservation), rateOrDash(p.Limit),
				mbit(float64(p.Assured)), mbit(p.Tx), p.Drops, p.Backlog)
		}
	}
	w.Flush()
	fmt.Fprintln(out)
}

func upDown(up bool) string {
	if up {
		return "up"
	}
	return "down"
}

func rateOrDash(bps uint64) string {
	if bps == 0 {
		return "-"
	}
	return units.Rate(bps).String()
}
