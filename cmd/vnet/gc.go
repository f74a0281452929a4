package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/killpoint"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/teamagent"
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
			orphans := teamagent.Orphans(stateDir, isKnown)
			killpoint.At("gc: leftovers listed, none locked yet")
			out := cmd.OutOrStdout()
			verb := "removed"
			if dryRun {
				verb = "would remove"
			}
			var errs []error
			// Each infrastructure's leftovers go under its lock, and what was
			// found because the infrastructure is not in the store only if it
			// still is not: an apply may have begun meanwhile.
			locks := infraLocks{st: st}
			defer locks.release()
			for _, o := range orphans {
				if !dryRun {
					if err := locks.take(o.Infra, true); err != nil {
						errs = noteSkip(out, errs, err)
						continue
					}
					if err := teamagent.Stop(stateDir, o.Infra); err != nil {
						errs = append(errs, err)
						continue
					}
				}
				fmt.Fprintf(out, "%s agent of %s (pid %d): the infrastructure is not in the store\n", verb, o.Infra, o.PID)
			}
			for _, g := range garbage {
				if !dryRun {
					if err := locks.take(g.Infra, g.Unowned); err != nil {
						errs = noteSkip(out, errs, err)
						continue
					}
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

// infraLocks holds the locks gc took, one per infrastructure.
type infraLocks struct {
	st      *store.Bolt
	held    map[string]func()
	claimed map[string]bool // in the store once locked: left alone
}

// take locks infra ("" needs no lock) unless this gc holds it already.
// With unowned, it fails when the infrastructure is in the store now.
func (l *infraLocks) take(infra string, unowned bool) error {
	if infra == "" {
		return nil
	}
	if l.held == nil {
		l.held, l.claimed = map[string]func(){}, map[string]bool{}
	}
	if _, ok := l.held[infra]; !ok {
		unlock, err := l.st.Lock(infra)
		if err != nil {
			return fmt.Errorf("left what %s left: %w", infra, err)
		}
		l.held[infra] = unlock
		if _, err := l.st.Get(infra); err == nil {
			l.claimed[infra] = true
		} else if !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("left what %s left: %w", infra, err)
		}
	}
	if unowned && l.claimed[infra] {
		return fmt.Errorf("left what %s left: it was applied meanwhile, and its next apply or destroy repairs it: %w", infra, errClaimed)
	}
	return nil
}

// errClaimed says an infrastructure entered the store while gc ran.
var errClaimed = errors.New("claimed")

// noteSkip prints a leftover gc leaves to an apply that began meanwhile,
// and adds any other error to errs.
func noteSkip(out io.Writer, errs []error, err error) []error {
	if errors.Is(err, errClaimed) {
		fmt.Fprintln(out, strings.TrimSuffix(err.Error(), ": "+errClaimed.Error()))
		return errs
	}
	return append(errs, err)
}

func (l *infraLocks) release() {
	for _, unlock := range l.held {
		unlock()
	}
}
