package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/service"
)

func recoverCmd() *cobra.Command {
	var rebuild bool
	var adopt, storeGone []string
	c := &cobra.Command{
		Use:   "recover",
		Short: "Bring back a damaged state store, and list the infrastructures on this host by their marks",
		Long: `Checks the state store. A damaged one is moved aside (never deleted) and replaced by the
copy kept at its last good write, or, without one (or with --rebuild), by an empty store with
the same ID: the namespaces the old store made carry that ID, so destroy and apply still know
them as this store's. Then lists every vnet-looking namespace on the host by who made it.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := local().Recover(service.RecoverOptions{Rebuild: rebuild, Adopt: adopt, StoreGone: storeGone})
			if rep != nil {
				printRecover(cmd.OutOrStdout(), rep)
			}
			return err
		},
	}
	c.Flags().BoolVar(&rebuild, "rebuild", false, "start an empty store (keeping the ID) even if the file or its good copy is fine")
	c.Flags().StringSliceVar(&adopt, "adopt", nil, "mark the namespaces and cgroups of these infrastructures that have no mark (an older vnet made them) as this store's, unless another live store holds the infrastructure")
	c.Flags().StringSliceVar(&storeGone, "store-gone", nil, "with --adopt: the ID of a store gone for good, whose namespaces and cgroups are adopted too (repeat for more)")
	return c
}

// printRecover says what recover did to the store, what it adopted, and
// what is on the host.
func printRecover(out io.Writer, rep *service.RecoverReport) {
	if rep.Store != nil {
		printRecovered(out, rep.Dir, rep.Store)
	}
	if rep.NotRoot {
		fmt.Fprintln(out, "not root: the host's namespaces were not read")
		return
	}
	for _, a := range rep.Adopted {
		what := counted(a.N, "namespace", "namespaces")
		if a.Cgroups > 0 {
			what += " and " + counted(a.Cgroups, "cgroup", "cgroups")
		}
		fmt.Fprintf(out, "adopted %s of %s\n", what, a.Infra)
	}
	if rep.Host == nil {
		return
	}
	if len(rep.Host) == 0 {
		fmt.Fprintln(out, "no vnet namespaces on this host and no records")
		return
	}
	fmt.Fprintln(out, "on this host:")
	for _, g := range rep.Host {
		fmt.Fprintf(out, "  %s: %s %s\n", g.Infra, counted(len(g.Namespaces), "namespace", "namespaces"), g.How)
		if g.Strangers {
			fmt.Fprintf(out, "    %s\n", strings.Join(g.Namespaces, " "))
		}
	}
}

func printRecovered(out io.Writer, dir string, res *service.Recovered) {
	path := filepath.Join(dir, "state.db")
	switch {
	case res.Healthy:
		fmt.Fprintf(out, "state store %s is fine (ID %s): %s\n", path, res.ID, counted(len(res.Records), "infrastructure", "infrastructures"))
		return
	case res.Cause != nil:
		fmt.Fprintf(out, "state store %s was damaged: %v\n", path, res.Cause)
	}
	if res.Moved != "" {
		fmt.Fprintf(out, "moved it to %s\n", res.Moved)
	}
	if res.Restored {
		fmt.Fprintf(out, "restored the copy kept at its last good write (ID %s): %s\n", res.ID,
			counted(len(res.Records), "infrastructure", "infrastructures"))
		return
	}
	fmt.Fprintf(out, "started an empty store with ID %s\n", res.ID)
}
