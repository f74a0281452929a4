package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/agent"
	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/store"
)

func gcCmd() *cobra.Command {
	var dryRun bool
	c := &cobra.Command{
		Use:   "gc",
		Short: "Remove what vnet commands killed halfway left behind",
		Long: `Remove what no apply or destroy will: probe namespaces of processes that are
gone, unfinished namespace entries (a plain file in /run/netns where a
namespace should be mounted), namespaces whose mark names a state directory
that no longer exists (a killed lab run's, whose store was temporary),
cgroups of infrastructures that are neither in the state store nor have a
namespace left, and agents of this state
directory whose infrastructure is not in the store. Infrastructures in the
store are left alone: vnet apply or vnet destroy repairs those.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			dp, err := dataplane.New()
			if err != nil {
				return err
			}
			defer dp.Close()
			st, err := store.OpenBolt(stateDir)
			if err != nil {
				return err
			}
			defer st.Close()
			recs, err := st.List()
			if err != nil {
				return err
			}
			known := map[string]bool{}
			for _, r := range recs {
				known[r.Name] = true
			}
			isKnown := func(infra string) bool { return known[infra] }
			garbage, err := dp.Garbage(dataplane.GarbageOpts{Known: isKnown})
			if err != nil {
				return err
			}
			orphans := agent.Orphans(stateDir, isKnown)
			out := cmd.OutOrStdout()
			verb := "removed"
			if dryRun {
				verb = "would remove"
			}
			var errs []error
			for _, o := range orphans {
				if !dryRun {
					if err := agent.StopOrphan(stateDir, o); err != nil {
						errs = append(errs, err)
						continue
					}
				}
				fmt.Fprintf(out, "%s agent of %s (pid %v): the infrastructure is not in the store\n", verb, o.Infra, o.PIDs)
			}
			for _, g := range garbage {
				if !dryRun {
					if err := g.Remove(); err != nil {
						errs = append(errs, err)
						continue
					}
				}
				fmt.Fprintf(out, "%s %s\n", verb, g)
			}
			if len(orphans)+len(garbage) == 0 {
				fmt.Fprintln(out, "nothing to remove")
			}
			if len(errs) > 0 {
				return fmt.Errorf("gc: %w", errors.Join(errs...))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be removed and change nothing")
	return c
}
