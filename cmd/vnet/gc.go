package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/service"
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
store are left alone: vnet apply or vnet destroy repairs those. gc takes an
infrastructure's lock before it removes what that infrastructure left, and
leaves it if an apply put the infrastructure in the store meanwhile.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			found, err := local().GC(service.GCOptions{DryRun: dryRun, Log: out})
			if !found && err == nil {
				fmt.Fprintln(out, "nothing to remove")
			}
			return err
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be removed and change nothing")
	return c
}
