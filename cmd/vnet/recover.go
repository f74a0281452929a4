package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/store"
)

func recoverCmd() *cobra.Command {
	var rebuild bool
	var adopt []string
	c := &cobra.Command{
		Use:   "recover",
		Short: "Bring back a damaged state store, and list the infrastructures on this host by their marks",
		Long: `Checks the state store. A damaged one is moved aside (never deleted) and replaced by the
copy kept at its last good write, or, without one (or with --rebuild), by an empty store with
the same ID: the namespaces the old store made carry that ID, so destroy and apply still know
them as this store's. Then lists every vnet-looking namespace on the host by who made it.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			dir, err := filepath.Abs(stateDir)
			if err != nil {
				return err
			}
			dp, err := dataplane.New()
			if err != nil && !errors.Is(err, dataplane.ErrNotRoot) {
				return err
			}
			var found []dataplane.NamedNS
			if dp != nil {
				defer dp.Close()
				if found, err = dp.VnetNamespaces(); err != nil {
					return err
				}
			}
			res, err := store.Recover(dir, store.RecoverOptions{Rebuild: rebuild, ID: idFromMarks(found, dir)})
			if err != nil {
				return err
			}
			printRecovered(out, dir, res)
			st, err := store.OpenBolt(dir)
			if err != nil {
				return err
			}
			defer st.Close()
			if dp == nil {
				if len(adopt) > 0 {
					return dataplane.ErrNotRoot
				}
				fmt.Fprintln(out, "not root: the host's namespaces were not read")
				return nil
			}
			for _, infra := range adopt {
				if err := adoptNamespaces(out, dp, st, infra, found); err != nil {
					return err
				}
			}
			if len(adopt) > 0 {
				if found, err = dp.VnetNamespaces(); err != nil {
					return err
				}
			}
			return printHost(out, st, found)
		},
	}
	c.Flags().BoolVar(&rebuild, "rebuild", false, "start an empty store (keeping the ID) even if the file or its good copy is fine")
	c.Flags().StringSliceVar(&adopt, "adopt", nil, "mark the namespaces of these infrastructures that have no mark (an older vnet made them) or whose store is gone as this store's")
	return c
}

// idFromMarks is the store ID that namespaces on the host say belongs to
// the store in dir, if they agree on one: what an empty store takes when
// store.id is lost too.
func idFromMarks(found []dataplane.NamedNS, dir string) string {
	ids := map[string]bool{}
	for _, ns := range found {
		if m, ok := plan.ParseMark(ns.Mark); ok && m.Dir == dir {
			ids[m.Store] = true
		}
	}
	if len(ids) != 1 {
		return ""
	}
	for id := range ids {
		return id
	}
	return ""
}

func printRecovered(out io.Writer, dir string, res *store.Recovered) {
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

// adoptNamespaces marks an infrastructure's adoptable namespaces as this
// store's, so that destroy removes them and apply takes them over.
func adoptNamespaces(out io.Writer, dp *dataplane.Linux, st *store.Bolt, infra string, found []dataplane.NamedNS) error {
	unlock, err := st.Lock(infra)
	if err != nil {
		return fmt.Errorf("adopt %s: %w", infra, err)
	}
	defer unlock()
	mark := plan.Mark{Infra: infra, Store: st.ID(), Dir: st.Location()}.String()
	n := 0
	for _, ns := range found {
		if i, _, ok := plan.SplitNSName(ns.Name); !ok || i != infra || !adoptable(ns.Mark) {
			continue
		}
		if err := dp.SetMark(ns.Name, mark); err != nil {
			return fmt.Errorf("adopt %s: %w", infra, err)
		}
		n++
	}
	fmt.Fprintf(out, "adopted %s of %s\n", counted(n, "namespace", "namespaces"), infra)
	return nil
}

// adoptable reports whether a namespace may be taken over: it has no mark,
// or the store its mark names is gone from its directory.
func adoptable(mark string) bool {
	m, ok := plan.ParseMark(mark)
	if !ok {
		return mark == ""
	}
	return m.Dir != "" && store.IDAt(m.Dir) != m.Store
}

// printHost lists the vnet-looking namespaces on the host by
// infrastructure and by who made them, with what to do about each group.
func printHost(out io.Writer, st store.Store, found []dataplane.NamedNS) error {
	recs, err := st.List()
	if err != nil {
		return err
	}
	recorded := map[string]*store.Record{}
	for _, r := range recs {
		recorded[r.Name] = r
	}
	type group struct{ infra, how string }
	groups := map[group][]string{}
	for _, ns := range found {
		infra, _, ok := plan.SplitNSName(ns.Name)
		if !ok {
			infra = "?"
		}
		m, marked := plan.ParseMark(ns.Mark)
		rec := recorded[infra]
		var how string
		switch {
		case marked && m.Store == st.ID() && m.Infra == infra && rec != nil:
			how = "recorded"
		case marked && m.Store == st.ID() && m.Infra == infra:
			how = fmt.Sprintf("made by this store, not recorded: `vnet destroy %s` removes them, `vnet apply FILE` takes them back", infra)
		case marked && adoptable(ns.Mark):
			how = fmt.Sprintf("made by a store that is gone from %s: `vnet recover --adopt %s` takes them", m.Dir, infra)
		case marked && m.Dir != "":
			how = fmt.Sprintf("made by the store at %s (ID %s): left to it", m.Dir, m.Store)
		case marked:
			how = fmt.Sprintf("made by store %s: left to it", m.Store)
		case rec != nil && rec.Lists(ns.Name):
			how = "without a mark (an older vnet), recorded: the next apply marks them"
		default:
			how = fmt.Sprintf("without a mark, not recorded: `vnet recover --adopt %s` takes them if an older vnet made them; otherwise they are not vnet's", infra)
		}
		g := group{infra, how}
		groups[g] = append(groups[g], ns.Name)
	}
	onHost := map[string]bool{}
	for g := range groups {
		onHost[g.infra] = true
	}
	for _, r := range recs {
		if !onHost[r.Name] {
			groups[group{r.Name, "recorded, nothing of it on this host: `vnet apply` makes it again, `vnet destroy` forgets it"}] = nil
		}
	}
	if len(groups) == 0 {
		fmt.Fprintln(out, "no vnet namespaces on this host and no records")
		return nil
	}
	keys := make([]group, 0, len(groups))
	for g := range groups {
		keys = append(keys, g)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].infra != keys[j].infra {
			return keys[i].infra < keys[j].infra
		}
		return keys[i].how < keys[j].how
	})
	fmt.Fprintln(out, "on this host:")
	for _, g := range keys {
		names := groups[g]
		fmt.Fprintf(out, "  %s: %s %s\n", g.infra, counted(len(names), "namespace", "namespaces"), g.how)
		if strings.HasPrefix(g.how, "without a mark, not") {
			fmt.Fprintf(out, "    %s\n", strings.Join(names, " "))
		}
	}
	return nil
}
