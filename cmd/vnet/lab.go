package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/lab"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/service"
)

func labCmd() *cobra.Command {
	c := &cobra.Command{Use: "lab", Short: "Rebuild the seed studies' testbeds, run their experiments, report against the published results"}
	c.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "The catalogue of experiments",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			for _, e := range lab.Catalog {
				fmt.Fprintf(w, "%s\t%s\t%s\n", e.Name, e.Study, e.Title)
			}
			return w.Flush()
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "machine",
		Short: "Measure what this machine can emulate: each line rate the lab uses, an unshaped veth, wake latency across cores, idle cores (about 15 s)",
		Long: "Builds a small testbed (a pair of native hosts per line rate the catalogue uses, and two VMs on a private switch), " +
			"measures each line with vnet netperf for 2 s, and destroys it. Without root only the wake probe runs. " +
			"lab run takes the same calibration at its start, for the rates its experiments use.",
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if err := service.CheckKernel(); err != nil {
				fmt.Fprintln(out, lab.DescribeMachine(exe))
				fmt.Fprintf(out, "line rates not measured: %v\n", err)
				return nil
			}
			if _, err := plan.WireCeiling(); err != nil {
				return usageError{err}
			}
			state, err := os.MkdirTemp("", "vnet-lab-state")
			if err != nil {
				return err
			}
			defer os.RemoveAll(state)
			cal, err := lab.Calibrate(exe, state, lab.RunSuffix(), lab.CatalogRates(), &lab.Progress{Out: os.Stderr, Terminal: isTerminal(os.Stderr)})
			if cal != nil {
				fmt.Fprintln(out, lab.MachineLine())
				fmt.Fprint(out, cal.Table())
			}
			return err
		},
	})
	var all, quick bool
	var out string
	var repeat int
	run := &cobra.Command{
		Use:               "run NAME... | --all",
		ValidArgsFunction: completeExperiments,
		Short:             "Run experiments and write results.db, report.html and summary.md",
		RunE: func(cmd *cobra.Command, args []string) error {
			exps, err := selectExperiments(args, all)
			if err != nil {
				return err
			}
			if err := service.CheckKernel(); err != nil { // say "needs root" before anything starts
				return err
			}
			if _, err := plan.WireCeiling(); err != nil {
				return usageError{err}
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			stdout := cmd.OutOrStdout()
			info, outcomes, err := lab.RunExperiments(exps, lab.Options{
				Exe: exe, OutDir: out, Quick: quick, Repeat: repeat,
				Command:  "vnet " + strings.Join(os.Args[1:], " "),
				Progress: &lab.Progress{Out: os.Stderr, Terminal: isTerminal(os.Stderr)},
				Log:      stdout,
			})
			if err != nil {
				return err
			}
			if err := lab.WriteReport(out, info, outcomes); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "\n%s\nreport: %s\n", lab.Summary(info, outcomes), filepath.Join(out, "report.html"))
			for _, o := range outcomes {
				if o.Error != "" {
					return exitError{code: exitFailure, msg: "some experiments failed with errors (see above); a shape not reproduced, or a verdict the machine left inconclusive, is a finding, not an error"}
				}
			}
			return nil
		},
	}
	run.Flags().BoolVar(&all, "all", false, "run every experiment")
	run.Flags().BoolVar(&quick, "quick", false, "short measurements (2 s instead of 10 s)")
	run.Flags().StringVar(&out, "out", "lab-out", "output directory")
	run.Flags().IntVar(&repeat, "repeat", 1, "run each experiment N times; verdicts use each figure's median, and the report shows the spread and verdicts that flip")
	c.AddCommand(run)
	c.AddCommand(&cobra.Command{
		Use:   "report DIR",
		Short: "Rebuild report.html and summary.md from DIR's results.db",
		Args:  exactArgs(1, "an output directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := os.Stat(filepath.Join(args[0], lab.DBFile)); err != nil {
				return usageError{fmt.Errorf("lab report: %s has no %s", args[0], lab.DBFile)}
			}
			info, outcomes, err := lab.Rebuild(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\nreport: %s\n", lab.Summary(info, outcomes), filepath.Join(args[0], "report.html"))
			return nil
		},
	})
	return c
}

func selectExperiments(names []string, all bool) ([]*lab.Experiment, error) {
	switch {
	case all && len(names) > 0:
		return nil, usageError{fmt.Errorf("lab run: give names or --all, not both")}
	case all:
		return lab.Catalog, nil
	case len(names) == 0:
		return nil, usageError{fmt.Errorf("lab run: name experiments (see vnet lab list) or give --all")}
	}
	var out []*lab.Experiment
	for _, n := range names {
		e, ok := lab.Find(n)
		if !ok {
			return nil, usageError{fmt.Errorf("lab run: no experiment %q (see vnet lab list)", n)}
		}
		out = append(out, e)
	}
	return out, nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
