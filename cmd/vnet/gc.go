package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/service"
)

func gcCmd() *cobra.Command {
	var o service.GCOptions
	c := &cobra.Command{
		Use:   "gc",
		Short: "Remove what vnet commands killed halfway left behind",
		Long: `Remove what no apply or destroy will: probe namespaces of processes that are
gone, unfinished namespace entries (a plain file in /run/netns where a
namespace should be mounted), cgroups this state directory's store made of
infrastructures that are neither in the store nor have a namespace left, and
agents of this state directory whose infrastructure is not in the store.
Infrastructures in the store are left alone: vnet apply or vnet destroy
repairs those. gc takes an infrastructure's lock before it removes what that
infrastructure left, and leaves it if an apply put the infrastructure in the
store meanwhile.

What another store made is its own, found by the ID in its mark wherever its
directory is now. What a store that cannot be found made (its directory was
deleted, or moved and not opened since), and cgroups without a mark, are left,
each with the reason; gc then exits 1. --store-gone ID removes what that store
made, once you know it is gone for good (a killed vnet lab run's, whose store
was a temporary directory); --unmarked INFRA removes that infrastructure's
cgroups without a mark (a vnet older than cgroup marks made them). Both kill
what runs there.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			o.Log = out
			found, err := local().GC(o)
			if !found && err == nil {
				fmt.Fprintln(out, "nothing to remove")
			}
			return err
		},
	}
	c.Flags().BoolVar(&o.DryRun, "dry-run", false, "list what would be removed and change nothing")
	c.Flags().StringSliceVar(&o.StoreGone, "store-gone", nil, "the ID of a store gone for good: remove what it made (repeat for more)")
	c.Flags().StringSliceVar(&o.Unmarked, "unmarked", nil, "an infrastructure whose cgroups without a mark vnet made: remove them (repeat for more)")
	return c
}
