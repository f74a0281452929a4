package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/service"
)

func pauseCmd() *cobra.Command {
	return pausingCmd(true, "pause NAME|FILE [--vm VM | --network NET | --portgroup PG]",
		"Stop the traffic of a VM, network, port group or whole infrastructure at its switch ports, keeping everything configured",
		`Stop traffic at the switch: the paused ports' switch-side ends go down while they
stay ports of their bridges, so a paused VM sees no carrier and nothing reaches it,
and its counters, addresses, policies and forwarding entries stay. With no --vm,
--network or --portgroup every vNIC and host port of the infrastructure is paused.

What is paused is kept beside the applied spec (the state directory, or etcd where
each host's agent realizes it), not in it: it outlives the agents, and applying the
same spec again keeps it. vnet status shows paused ports as "paused"; vnet resume
undoes it. The generation does not change.`,
		`  vnet pause demo --vm web1         # web1's vNICs stop; the other VMs go on
  vnet pause demo --portgroup pg-vm # every vNIC and host port on pg-vm
  vnet pause demo                   # the whole infrastructure
  vnet pause tenants --network blue --etcd http://10.0.0.1:2379 --wait`)
}

func resumeCmd() *cobra.Command {
	return pausingCmd(false, "resume NAME|FILE [--vm VM | --network NET | --portgroup PG]",
		"Start again what vnet pause stopped",
		`Bring the paused ports' switch-side ends up again: traffic flows as soon as the
link is up, within 100 ms (over etcd, of the command returning: each host's agent
realizes it on etcd's watch; --wait returns once every host reports it). With --vm,
--network or --portgroup it resumes that pause alone (a VM also paused by its port
group stays paused); with none it resumes everything paused.`,
		`  vnet resume demo --vm web1
  vnet resume demo                   # everything paused
  vnet resume tenants --network blue --etcd http://10.0.0.1:2379 --wait=30s`)
}

func pausingCmd(pause bool, use, short, long, example string) *cobra.Command {
	var r service.PauseRequest
	var output *outputFormat
	c := &cobra.Command{
		Use: use, Short: short, Long: long, Example: example,
		Args:              exactArgs(1, "an infrastructure name or spec file"),
		ValidArgsFunction: completeInfras,
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, err := backend(infraCmds)
			if err != nil {
				return err
			}
			defer svc.Close()
			if r.Infra, err = infraName(svc, args[0]); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if !output.structured() {
				r.Log = out
				r.Progress = func(ev service.WaitEvent) {
					fmt.Fprintf(out, "%s realized it after %s\n", ev.Host, seconds(ev.After))
				}
			}
			do := svc.Resume
			if pause {
				do = svc.Pause
			}
			res, err := do(cmd.Context(), r)
			if err != nil {
				return err
			}
			if output.structured() {
				return output.print(out, res)
			}
			printPaused(out, res, pause)
			return nil
		},
	}
	c.Flags().StringVar(&r.VM, "vm", "", "the VM whose vNICs to "+pausingVerb(pause))
	c.Flags().StringVar(&r.Network, "network", "", "the virtual network whose vNICs to "+pausingVerb(pause))
	c.Flags().StringVar(&r.PortGroup, "portgroup", "", "the port group whose vNICs and host ports to "+pausingVerb(pause))
	c.MarkFlagsMutuallyExclusive("vm", "network", "portgroup")
	completeNames(c, "vm", specVMs)
	completeNames(c, "network", specNetworks)
	completeNames(c, "portgroup", specPortGroups)
	addWaitFlag(c, &r.Wait, "with --etcd, then wait up to this long (--wait=1m; alone: "+defaultWait.String()+") for every host to report it realized, "+
		"printing each. Exit 3 when time runs out, 1 when a host fails. Without --etcd it is done when it returns")
	output = addOutputFlag(c, "", outText, outJSON, outYAML)
	addEtcdFlag(c)
	return c
}

func pausingVerb(pause bool) string {
	if pause {
		return "pause"
	}
	return "resume"
}

// printPaused says what a pause or resume did, and what stays paused.
func printPaused(out io.Writer, res *service.PauseResult, pause bool) {
	verb := "resumed"
	if pause {
		verb = "paused"
	}
	switch {
	case !res.Changed && pause:
		fmt.Fprintf(out, "%s: %s was paused already\n", res.Infra, res.What)
	case !res.Changed:
		fmt.Fprintf(out, "%s: %s was not paused\n", res.Infra, res.What)
	case res.Executed > 0 || res.Seconds > 0:
		fmt.Fprintf(out, "%s: %s %s in %s (%s)\n", res.Infra, verb, res.What, millis(res.Seconds), counted(res.Executed, "change", "changes"))
	}
	if len(res.Paused) == 0 {
		fmt.Fprintf(out, "%s: nothing is paused\n", res.Infra)
		return
	}
	var what []string
	for _, sel := range res.Paused {
		what = append(what, plan.Describe(sel))
	}
	fmt.Fprintf(out, "%s: paused: %s\n", res.Infra, strings.Join(what, ", "))
}

// millis prints seconds as milliseconds: "12 ms".
func millis(s float64) string {
	return fmt.Sprintf("%d ms", time.Duration(s*float64(time.Second)).Milliseconds())
}
