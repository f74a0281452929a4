package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/service"
)

func agentCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "agent",
		Short: "The per-infrastructure agent: uplink failover, load-based teaming, notify",
	}
	var tick time.Duration
	run := &cobra.Command{
		Use:               "run NAME",
		Short:             "Run the agent in the foreground (vnet apply starts it in the background)",
		Args:              exactArgs(1, "an infrastructure name"),
		ValidArgsFunction: completeInfras,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			// Handled before the agent claims its pid file: apply signals
			// the agent whose pid it finds there.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			reload := make(chan struct{}, 1)
			go func() {
				for range hup {
					select {
					case reload <- struct{}{}:
					default:
					}
				}
			}()
			return service.RunTeamAgent(ctx, service.TeamAgentOptions{StateDir: stateDir, Infra: args[0], Tick: tick,
				Log: cmd.OutOrStdout(), Reload: reload})
		},
	}
	run.Flags().DurationVar(&tick, "tick", time.Second, "how often to sample uplink load and poll link state")
	stop := &cobra.Command{
		Use:               "stop NAME",
		Short:             "Stop the infrastructure's agent, wherever it was started (vnet destroy does this too)",
		Args:              exactArgs(1, "an infrastructure name"),
		ValidArgsFunction: completeInfras,
		RunE: func(_ *cobra.Command, args []string) error {
			return service.StopTeamAgent(stateDir, args[0])
		},
	}
	c.AddCommand(run, stop, hostAgentCmd())
	return c
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
// it) and whether connected. On this machine, through a server or over
// etcd, it is the service's one Link.
func vnicCmd(use, short string, args cobra.PositionalArgs, target func([]string) (string, bool)) *cobra.Command {
	var infra string
	var wait time.Duration
	var output *outputFormat
	c := &cobra.Command{
		Use: use, Short: short, Args: args,
		ValidArgsFunction: completeVNIC,
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, err := backend(infraCmds)
			if err != nil {
				return err
			}
			defer svc.Close()
			pg, connected := target(args)
			out := cmd.OutOrStdout()
			r := service.LinkRequest{Infra: infra, VM: args[0], NIC: args[1], PortGroup: pg, Connected: connected, Wait: wait}
			if !output.structured() {
				r.Log = out
				r.Progress = func(ev service.WaitEvent) { printCurrent(out, ev) }
				r.Stored = func(s service.Stored) { printStored(out, s, false) }
			}
			res, err := svc.Link(cmd.Context(), r)
			if err != nil {
				return err
			}
			if output.structured() {
				return output.print(out, res)
			}
			printLinked(out, res, wait)
			return nil
		},
	}
	addWaitFlag(c, &wait, "with --etcd, then wait up to this long (--wait=1m; alone: "+defaultWait.String()+") for every host to report the new generation current, "+
		"printing each. Exit 3 when time runs out, 1 when a host fails. Without --etcd it is done when it returns")
	output = addOutputFlag(c, "", outText, outJSON, outYAML)
	addEtcdFlag(c)
	c.Flags().StringVar(&infra, "infra", "", "the infrastructure (needed when several have a VM of that name)")
	_ = c.RegisterFlagCompletionFunc("infra", func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return withPrefix(infraNamesApplied(), toComplete), cobra.ShellCompDirectiveNoFileComp
	})
	return c
}

// printLinked says what a link or unlink changed: on this machine the
// kernel's changes; over etcd (the generation stored was told already)
// after a wait, when the hosts realized it.
func printLinked(out io.Writer, res *service.LinkResult, wait time.Duration) {
	changed := res.Infra + ": " + counted(res.Executed, "change", "changes") + "; "
	if s := res.Stored; s != nil {
		if wait > 0 {
			fmt.Fprintf(out, "%s generation %d: %s current in %s\n", res.Infra, s.Generation, counted(len(s.Hosts), "host", "hosts"), seconds(s.Current))
		}
		changed = res.Infra + ": "
	}
	fmt.Fprintf(out, "%sthe spec file %s no longer matches until you edit it (vnet get %s prints the applied spec)\n", changed, res.SpecFile, res.Infra)
	if res.AgentStarted != "" {
		fmt.Fprintf(out, "agent for %s started: failover and load-based teaming (log: %s)\n", res.Infra, res.AgentStarted)
	}
}
