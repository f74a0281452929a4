package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/dataplane"
	"github.com/vnet-project/vnet/internal/events"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/store"
	"github.com/vnet-project/vnet/internal/teamagent"
)

// syncAgent runs the infrastructure's agent when it teams uplinks, and
// stops it when it no longer does. The agent reads the spec from the store
// with a read-only open, which the infrastructure's lock does not block.
func syncAgent(cmd *cobra.Command, s *spec.Spec) error {
	if len(plan.HostTeams(s)) == 0 {
		return teamagent.Stop(stateDir, s.Name)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start agent: %w", err)
	}
	started, err := teamagent.Ensure(stateDir, s.Name, exe)
	if err != nil {
		return err
	}
	if started {
		fmt.Fprintf(cmd.OutOrStdout(), "agent for %s started: failover and load-based teaming (log: %s)\n", s.Name, teamagent.LogFile(stateDir, s.Name))
	}
	return nil
}

// storedSpec reads an infrastructure's spec as last applied.
func storedSpec(name string) (*spec.Document, error) {
	st, err := store.OpenBolt(stateDir)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	rec, err := st.Get(name)
	if err != nil {
		return nil, err
	}
	return storedDoc(specCache(), rec)
}

func agentCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "agent",
		Short: "The per-infrastructure agent: uplink failover, load-based teaming, notify",
	}
	var tick time.Duration
	run := &cobra.Command{
		Use:   "run NAME",
		Short: "Run the agent in the foreground (vnet apply starts it in the background)",
		Args:  exactArgs(1, "an infrastructure name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dp, err := dataplane.New()
			if err != nil {
				return err
			}
			defer dp.Close()
			a := &teamagent.Agent{Infra: args[0], DP: dp, Log: cmd.OutOrStdout(), Tick: tick,
				Spec: func() (*spec.Spec, error) {
					doc, err := storedSpec(args[0])
					if err != nil {
						return nil, err
					}
					return doc.Spec, nil
				},
				Gone: func() bool {
					_, err := storedSpec(args[0])
					return errors.Is(err, store.ErrNotFound)
				},
				Event: func(ev events.Event) {
					if err := events.In(stateDir).Append(ev); err != nil {
						fmt.Fprintln(cmd.OutOrStdout(), err)
					}
				}}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			// Claimed only now that a reload cannot end it: apply signals
			// the agent that recorded its pid.
			claim, err := teamagent.Take(stateDir, args[0])
			if errors.Is(err, teamagent.ErrRunning) {
				fmt.Fprintf(cmd.OutOrStdout(), "%v; this one exits\n", err)
				return nil
			}
			if err != nil {
				return err
			}
			defer claim.Release()
			go func() {
				for range hup {
					a.Reload()
				}
			}()
			ctx, lost := context.WithCancel(ctx)
			defer lost()
			go keepClaim(ctx, claim, tick, cmd.OutOrStdout(), lost)
			return a.Run(ctx)
		},
	}
	run.Flags().DurationVar(&tick, "tick", time.Second, "how often to sample uplink load and poll link state")
	stop := &cobra.Command{
		Use:   "stop NAME",
		Short: "Stop the infrastructure's agent, wherever it was started (vnet destroy does this too)",
		Args:  exactArgs(1, "an infrastructure name"),
		RunE: func(_ *cobra.Command, args []string) error {
			return teamagent.Stop(stateDir, args[0])
		},
	}
	c.AddCommand(run, stop, hostAgentCmd())
	return c
}

// relink moves or cuts one vNIC in the stored spec and applies it: the VM
// and its namespace stay, its switch port changes under running traffic.
func relink(cmd *cobra.Command, vm, nic, portgroup string, connected bool, name string) error {
	eng, done, err := openEngine(cmd)
	if err != nil {
		return err
	}
	defer done()
	// Locked before the stored spec is read, so that two link commands
	// do not each change the spec as it was.
	unlock, err := eng.Store.Lock(name)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer unlock()
	doc, err := storedSpec(name)
	if err != nil {
		return err
	}
	changed, err := spec.SetVNIC(doc, vm, nic, portgroup, connected)
	if err != nil {
		return usageError{err}
	}
	res, err := eng.Apply(changed)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: %s; the spec file %s no longer matches until you edit it (vnet status shows the applied spec)\n",
		name, counted(res.Executed, "change", "changes"), doc.File)
	return syncAgent(cmd, changed.Spec)
}

func linkCmd() *cobra.Command {
	return vnicCmd("link VM NIC PORTGROUP", "Connect a VM's vNIC (eth0, eth1, ...) to a port group while it runs",
		exactArgs(3, "a VM, its vNIC and a port group"), func(args []string) (string, bool) { return args[2], true })
}

func unlinkCmd() *cobra.Command {
	return vnicCmd("unlink VM NIC", "Disconnect a VM's vNIC from its port group, like pulling its cable",
		exactArgs(2, "a VM and its vNIC"), func([]string) (string, bool) { return "", false })
}

// vnicCmd is link or unlink: target says which port group (none: keep
// it) and whether connected.
func vnicCmd(use, short string, args cobra.PositionalArgs, target func([]string) (string, bool)) *cobra.Command {
	var infra string
	c := &cobra.Command{
		Use: use, Short: short, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := vmInfra(infra, args[0])
			if err != nil {
				return err
			}
			pg, connected := target(args)
			return relink(cmd, args[0], args[1], pg, connected, name)
		},
	}
	c.Flags().StringVar(&infra, "infra", "", "the infrastructure (needed when several have a VM of that name)")
	return c
}

// vmInfra finds the one applied infrastructure with that VM.
func vmInfra(infra, vm string) (string, error) {
	if infra != "" {
		return infra, nil
	}
	st, err := store.OpenBolt(stateDir)
	if err != nil {
		return "", err
	}
	defer st.Close()
	recs, err := st.List()
	if err != nil {
		return "", err
	}
	var found []string
	cache := specCache()
	for _, r := range recs {
		if doc, err := storedDoc(cache, r); err == nil {
			if _, ok := doc.Spec.VM(vm); ok {
				found = append(found, r.Name)
			}
		}
	}
	switch len(found) {
	case 0:
		return "", usageError{fmt.Errorf("no applied infrastructure has a VM %q", vm)}
	case 1:
		return found[0], nil
	}
	return "", usageError{fmt.Errorf("VM %q is in %v: say which with --infra", vm, found)}
}

// keepClaim checks every tick that the agent still holds its pid file,
// claiming it anew should it have gone; an agent that finds another in its
// place ends.
func keepClaim(ctx context.Context, c *teamagent.Claim, tick time.Duration, log io.Writer, end func()) {
	t := time.NewTicker(max(tick, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.Keep(); err != nil {
				fmt.Fprintf(log, "%v; this one exits\n", err)
				end()
				return
			}
		}
	}
}
