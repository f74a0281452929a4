package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/lab"
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
		Short: "Describe this machine as lab reports do, with how fast it wakes an idle CPU (2 s)",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), lab.DescribeMachine(exe))
			return nil
		},
	})
	var all, quick bool
	var out string
	var repeat int
	run := &cobra.Command{
		Use:   "run NAME... | --all",
		Short: "Run experiments and write results.db, report.html and summary.md",
		RunE: func(cmd *cobra.Command, args []string) error {
			exps, err := selectExperiments(args, all)
			if err != nil {
				return err
			}
			if _, err := dataplane.New(); err != nil { // say "needs root" before anything starts
				return err
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
					return exitError{code: exitFailure, msg: "some experiments failed with errors (see above); a shape not reproduced is a finding, not an error"}
				}
			}
			return nil
		},
	}
	run.Flags().BoolVar(&all, "all", false, "run every experiment")
	run.Flags().BoolVar(&quick, "quick", false, "short measurements (2 s instead of 10 s)")
	run.Flags().StringVar(&out, "out", "lab-out", "output directory")
	run.Flags().IntVar(&repeat, "repeat", 1, "repeat each measurement and keep the best, as S0 did")
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
