package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/units"
)

func iocCmd() *cobra.Command {
	c := &cobra.Command{Use: "ioc", Short: "Network I/O Control"}
	var output *outputFormat
	var watch bool
	var interval time.Duration
	stats := &cobra.Command{
		Use:               "stats [NAME]",
		ValidArgsFunction: completeInfras,
		Short:             "Per host, uplink and pool: rate, share of the uplink, drops, backlog; per port shaper counters",
		RunE: func(cmd *cobra.Command, args []string) error {
			// The server's kernel through --server; over etcd each
			// host's agent reads its own, which no server reads back.
			svc, err := backend(where{server: true})
			if err != nil {
				return err
			}
			defer svc.Close()
			names, err := infraNames(svc, args)
			if err != nil {
				return err
			}
			if len(names) == 0 {
				all, err := svc.List(cmd.Context())
				if err != nil {
					return err
				}
				for _, in := range all {
					names = append(names, in.Name)
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			for {
				for _, name := range names {
					s, err := svc.IOCStats(ctx, name, interval)
					if err != nil {
						return err
					}
					if output.value == outJSON {
						if err := json.NewEncoder(cmd.OutOrStdout()).Encode(s); err != nil {
							return err
						}
					} else if output.value == outYAML {
						if err := printYAML(cmd.OutOrStdout(), s); err != nil {
							return err
						}
					} else {
						printIOCStats(cmd.OutOrStdout(), s)
					}
				}
				if !watch || ctx.Err() != nil {
					return nil
				}
			}
		},
	}
	output = addOutputFlag(stats, " (json: one object a line per sample; yaml: one document per sample)", outText, outJSON, outYAML)
	stats.Flags().BoolVarP(&watch, "watch", "w", false, "sample again and again until interrupted")
	stats.Flags().DurationVarP(&interval, "interval", "i", time.Second, "sampling interval")
	c.AddCommand(stats)
	return c
}

func printIOCStats(out io.Writer, s *service.IOCStats) {
	fmt.Fprintf(out, "%s at %s, rates over %.1f s\n", s.Infra, s.At.Format(time.TimeOnly), s.Interval)
	if len(s.Uplinks) == 0 && len(s.Shapers) == 0 {
		fmt.Fprintln(out, "no switch runs Network I/O Control and no port group is shaped")
	}
	for _, u := range s.Uplinks {
		fmt.Fprintf(out, "\n%s/%s on %s: line %s, %s in use\n", u.Host, u.NIC, u.Switch, units.Rate(u.Line), mbit(u.Rate))
		w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "POOL\tCLASS\tASSURED\tCEIL\tRATE\tSHARE\tDROPS\tBACKLOG")
		for _, p := range u.Pools {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%.1f%%\t%d\t%dB\n", p.Pool, p.Class, mbit(float64(p.Assured)), mbit(float64(p.Ceil)), mbit(p.Rate), 100*p.Share, p.Counters.Drops, p.Counters.Backlog)
		}
		w.Flush()
	}
	if len(s.Shapers) > 0 {
		fmt.Fprintln(out)
		w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "SHAPED PORT\tLINK\tAVERAGE\tPEAK\tBURST\tRATE\tDROPS\tOVERLIMITS")
		for _, sh := range s.Shapers {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", strings.TrimSuffix(sh.Port, " shaping"), sh.Link, mbit(float64(sh.Average)), mbit(float64(sh.Peak)),
				units.Size(sh.Burst), mbit(sh.Rate), sh.Counters.Drops, sh.Counters.Overlimits)
		}
		w.Flush()
	}
	fmt.Fprintln(out)
}

func mbit(bps float64) string { return fmt.Sprintf("%.1fMbit", bps/1e6) }
