package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/agent"
	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/reconcile"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/spec/speccache"
	"github.com/vnet-project/vnet/internal/status"
	"github.com/vnet-project/vnet/internal/store"
)

func validateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a spec; errors name the field path and line",
		Args:  exactArgs(1, "one spec file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Validated afresh, never from the cache: its verdict is the
			// one of this build's rules.
			doc, err := spec.LoadFile(args[0])
			if err != nil {
				return err
			}
			parts := []string{counted(len(doc.Spec.Hosts), "host", "hosts"), counted(len(doc.Spec.Switches), "switch", "switches")}
			if n := len(doc.Spec.Networks); n > 0 {
				parts = append(parts, counted(n, "network", "networks"))
			}
			parts = append(parts, counted(len(doc.Spec.VMs), "VM", "VMs"))
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid (%s)\n", args[0], strings.Join(parts, ", "))
			return nil
		},
	}
}

// openEngine opens the store and the dataplane; the caller closes both.
// The store holds no lock while open: the engine takes the infrastructure's
// lock for an apply or a destroy, and reads need none.
func openEngine(cmd *cobra.Command) (*reconcile.Engine, func(), error) {
	collectLessOften()
	dp, err := dataplane.New()
	if err != nil {
		return nil, nil, err
	}
	st, err := store.OpenBolt(stateDir)
	if err != nil {
		dp.Close()
		return nil, nil, err
	}
	eng := &reconcile.Engine{DP: dp, Store: st, Log: cmd.OutOrStdout(), Specs: specCache()}
	if os.Getenv("VNET_TRACE") != "" {
		eng.Trace = cmd.ErrOrStderr()
	}
	return eng, func() { dp.Close(); st.Close() }, nil
}

// collectLessOften trades memory for time in a command that runs once
// (apply, destroy, status), from its start: planning a large
// infrastructure allocates much that lives until the command ends, and
// collecting it as it goes costs a one-VM change at 1,000 VMs about a
// sixth of its CPU time (the whole command allocates under 100 MB there).
// The collector then runs only when the heap nears the limit, which keeps
// it bounded. GOGC and GOMEMLIMIT, when set, decide instead.
func collectLessOften() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(-1)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(512 << 20)
	}
}

func applyCmd() *cobra.Command {
	var dryRun, full bool
	var wait time.Duration
	c := &cobra.Command{
		Use:   "apply FILE",
		Short: "Converge the host to the spec (prints the plan first)",
		Args:  exactArgs(1, "one spec file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			collectLessOften()
			if c, err := remote(); c != nil || err != nil {
				if err != nil {
					return err
				}
				if full {
					return errors.New("--full: only an apply on this host reads it; the server's applies read what they change")
				}
				if wait > 0 {
					return errWaitNeedsEtcd
				}
				return applyRemote(cmd, c, args[0], dryRun)
			}
			if eps := etcdEndpoints(); eps != nil {
				return applyCluster(cmd, eps, args[0], dryRun, full, wait)
			}
			doc, err := specCache().LoadFile(args[0])
			if err != nil {
				return err
			}
			eng, done, err := openEngine(cmd)
			if err != nil {
				return err
			}
			defer done()
			eng.Full = full
			if dryRun {
				p, err := eng.Plan(doc)
				if err == nil {
					fmt.Fprint(cmd.OutOrStdout(), p)
				}
				return err
			}
			// The agent is started or told to reload under the same lock.
			unlock, err := eng.Store.Lock(doc.Spec.Name)
			if err != nil {
				return fmt.Errorf("apply %s: %w", doc.Spec.Name, err)
			}
			defer unlock()
			res, err := eng.Apply(doc)
			if err != nil {
				return err
			}
			if !res.Plan.Empty() {
				fmt.Fprintf(cmd.OutOrStdout(), "applied %s: %s\n", doc.Spec.Name, counted(res.Executed, "change", "changes"))
			}
			return syncAgent(cmd, doc.Spec)
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	c.Flags().BoolVar(&full, "full", false, "read the whole infrastructure and repair any drift, not only what changed since the last apply")
	addWaitFlag(c, &wait, "with --etcd, then wait up to this long (--wait=1m; alone: "+defaultWait.String()+") for every host to report the generation current, "+
		"printing each; unchanged, wait for the generation in etcd (at once if current). Exit 3 when time runs out, 1 when a host fails. "+
		"Without --etcd, apply is done when it returns")
	addEtcdFlag(c)
	return c
}

// errWaitNeedsEtcd refuses --wait through --server, whose status is the
// way to follow the hosts there.
var errWaitNeedsEtcd = usageError{errors.New("--wait needs --etcd (through --server, follow the hosts with vnet status)")}

// infraName reads NAME|FILE: a file's spec names the infra.
func infraName(arg string) (string, error) {
	if _, err := os.Stat(arg); err == nil {
		doc, err := specCache().LoadFile(arg)
		if err != nil {
			return "", err
		}
		return doc.Spec.Name, nil
	}
	if strings.ContainsAny(arg, "/.") {
		return "", usageError{fmt.Errorf("%s: no such file, and not an infrastructure name", arg)}
	}
	return arg, nil
}

func destroyCmd() *cobra.Command {
	var wait time.Duration
	c := &cobra.Command{
		Use:   "destroy NAME|FILE",
		Short: "Remove everything of one infrastructure and nothing else",
		Args:  exactArgs(1, "an infrastructure name or spec file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			collectLessOften()
			name, err := infraName(args[0])
			if err != nil {
				return err
			}
			if c, err := remote(); c != nil || err != nil {
				if err != nil {
					return err
				}
				if wait > 0 {
					return errWaitNeedsEtcd
				}
				return destroyRemote(cmd, c, name)
			}
			if eps := etcdEndpoints(); eps != nil {
				return destroyCluster(cmd, eps, name, wait)
			}
			eng, done, err := openEngine(cmd)
			if err != nil {
				return err
			}
			defer done()
			unlock, err := eng.Store.Lock(name)
			if err != nil {
				return fmt.Errorf("destroy %s: %w", name, err)
			}
			defer unlock()
			_, known := eng.Store.Get(name)
			if err := agent.Stop(stateDir, name); err != nil {
				return err
			}
			_ = os.Remove(agent.LogFile(stateDir, name))
			swept, err := eng.Sweep(name)
			if err != nil {
				return fmt.Errorf("destroy %s: %w", name, err)
			}
			p, err := eng.Destroy(name)
			if err != nil {
				return err
			}
			if p.Empty() && len(swept) == 0 && errors.Is(known, store.ErrNotFound) {
				return fmt.Errorf("destroy %s: %w", name, store.ErrNotFound)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "destroyed %s: %s removed\n", name, counted(countKind(p, ""), "object", "objects"))
			return nil
		},
	}
	addWaitFlag(c, &wait, "with --etcd, then wait up to this long (--wait=1m; alone: "+defaultWait.String()+") until no host reports the infrastructure, "+
		"printing each as its report goes. Exit 1 when a host fails to remove its part (named, with its error), 3 when time runs out. Without --etcd, destroy is done when it returns")
	addEtcdFlag(c)
	return c
}

// counted says "1 switch" and "2 switches", as a person would.
func counted(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func countKind(p plan.Plan, k plan.Kind) int {
	n := 0
	for _, a := range p.Actions {
		if k == "" || a.Subject().Kind == k {
			n++
		}
	}
	return n
}

func statusCmd() *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show hosts, switches, VMs and vNICs with MACs, addresses, state and line rates",
		RunE: func(cmd *cobra.Command, args []string) error {
			collectLessOften()
			if c, err := remote(); c != nil || err != nil {
				if err != nil {
					return err
				}
				return statusRemote(cmd, c, args, output)
			}
			if eps := etcdEndpoints(); eps != nil {
				return statusCluster(cmd, eps, args, output)
			}
			eng, done, err := openEngine(cmd)
			if err != nil {
				return err
			}
			defer done()
			recs, err := selectRecords(eng.Store, args)
			if err != nil {
				return err
			}
			var all []*status.Infra
			cache := specCache()
			for _, rec := range recs {
				doc, err := storedDoc(cache, rec)
				if err != nil {
					return err
				}
				st, err := eng.Status(doc)
				if err != nil {
					return err
				}
				if len(plan.HostTeams(doc.Spec)) > 0 {
					pid, running := agent.Running(stateDir, rec.Name)
					st.Agent = &status.Agent{Running: running, PID: pid, Log: agent.LogFile(stateDir, rec.Name)}
				}
				all = append(all, st)
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(all)
			}
			if len(all) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no infrastructures")
			}
			for _, st := range all {
				printStatus(cmd.OutOrStdout(), st)
			}
			return nil
		},
	}
	c.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	addEtcdFlag(c)
	return c
}

// recordHead reads a record without what was realized where the store can:
// the commands that select records read only their specs.
func recordHead(st store.Store, name string) (*store.Record, error) {
	if h, ok := st.(store.HeadReader); ok {
		return h.Head(name)
	}
	return st.Get(name)
}

func selectRecords(st store.Store, args []string) ([]*store.Record, error) {
	if len(args) == 0 {
		return st.List()
	}
	var out []*store.Record
	for _, a := range args {
		name, err := infraName(a)
		if err != nil {
			return nil, err
		}
		r, err := recordHead(st, name)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// specCache keeps the specs that commands loaded, applied or read back in
// the state directory, so that the next command given the same bytes does
// not decode and validate a large spec's YAML again.
func specCache() *speccache.Cache { return speccache.New(filepath.Join(stateDir, "spec-cache")) }

// storedDoc is rec.Doc, from the encoding stored beside the YAML (an apply
// over etcd stores one) or through the cache.
func storedDoc(cache *speccache.Cache, rec *store.Record) (*spec.Document, error) {
	return rec.DocVia(cache)
}
