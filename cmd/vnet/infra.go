package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnet-project/vnet/internal/oneshot"
	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/status"
)

func validateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE|-",
		Short: "Check a spec; errors name the field path and line",
		Args:  exactArgs(1, "one spec file, or - for standard input"),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := validateArg(cmd, args[0])
			if err != nil {
				return err
			}
			parts := []string{counted(len(doc.Spec.Hosts), "host", "hosts"), counted(len(doc.Spec.Switches), "switch", "switches")}
			if n := len(doc.Spec.Networks); n > 0 {
				parts = append(parts, counted(n, "network", "networks"))
			}
			parts = append(parts, counted(len(doc.Spec.VMs), "VM", "VMs"))
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid (%s)\n", doc.File, strings.Join(parts, ", "))
			printWarnings(cmd.ErrOrStderr(), service.Warnings(doc))
			return nil
		},
	}
}

// infraCmds is where apply, destroy and status find infrastructures.
var infraCmds = where{server: true, etcd: true}

func applyCmd() *cobra.Command {
	var dryRun, full, drop bool
	var wait time.Duration
	c := &cobra.Command{
		Use:   "apply FILE|-",
		Short: "Converge the host to the spec (prints the plan first)",
		Long: "Converge the host (with --etcd, the hosts) to the spec. The VMs runtimes attached (containers and pods " +
			"through the CNI plugin, libvirt guests through the hook) stay as they are now, whatever the file says of them: " +
			"their runtimes take them out. When the spec lacks the host, port group or network one of them is on " +
			"(or one of its own VMs has its name or address), the apply is refused, changing nothing, naming them " +
			"(exit status 2), unless --drop-attached takes them out.",
		Args: exactArgs(1, "one spec file, or - for standard input"),
		RunE: func(cmd *cobra.Command, args []string) error {
			oneshot.CollectLessOften()
			svc, err := backend(infraCmds)
			if err != nil {
				return err
			}
			defer svc.Close()
			out := cmd.OutOrStdout()
			src, err := sourceArg(cmd, svc, args[0])
			if err != nil {
				return err
			}
			res, err := svc.Apply(cmd.Context(), src, service.ApplyOptions{
				DryRun: dryRun, Full: full, Wait: wait, Log: out, Detail: dryRun, DropAttached: drop,
				Stored:   func(s service.Stored) { printStored(out, s, dryRun) },
				Progress: func(ev service.WaitEvent) { printCurrent(out, ev) },
			})
			if err != nil {
				return err
			}
			printWarnings(cmd.ErrOrStderr(), res.Warnings)
			printApplied(out, res, wait)
			printAttached(out, res.Attached, false)
			return nil
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	c.Flags().BoolVar(&drop, "drop-attached", false, "take out the VMs runtimes attached (containers, pods, libvirt guests) that the spec has no place for (their host, port group or network gone, or their name or address one of its own VMs has), instead of refusing")
	c.Flags().BoolVar(&full, "full", false, "read the whole infrastructure and repair any drift, not only what changed since the last apply")
	addWaitFlag(c, &wait, "with --etcd, then wait up to this long (--wait=1m; alone: "+defaultWait.String()+") for every host to report the generation current, "+
		"printing each; unchanged, wait for the generation in etcd (at once if current). Exit 3 when time runs out, 1 when a host fails. "+
		"Without --etcd, apply is done when it returns")
	addEtcdFlag(c)
	return c
}

// printWarnings shows, on stderr, what a valid spec may mean other than it
// seems; the spec is applied as written.
func printWarnings(w io.Writer, warnings []string) {
	for _, s := range warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
}

// printStored says, over etcd, what generation etcd holds now.
func printStored(out io.Writer, s service.Stored, dryRun bool) {
	switch {
	case s.Unchanged:
		fmt.Fprintf(out, "%s: unchanged, generation %d in etcd\n", s.Infra, s.Generation)
	case !dryRun:
		fmt.Fprintf(out, "stored %s generation %d in etcd for hosts %s\n", s.Infra, s.Generation, strings.Join(s.Hosts, ", "))
	}
}

// printCurrent says, over etcd, when a host reports the generation current
// or withdraws its report.
func printCurrent(out io.Writer, ev service.WaitEvent) {
	switch {
	case ev.State == service.HostCurrent:
		fmt.Fprintf(out, "%s current at generation %d after %s\n", ev.Host, ev.Report.Generation, seconds(ev.After))
	case ev.State == service.HostGone && ev.Report == nil && !ev.Listed:
		fmt.Fprintf(out, "%s, no longer in the spec, withdrew its report after %s\n", ev.Host, seconds(ev.After))
	}
}

// printApplied says what an apply did, or would do.
func printApplied(out io.Writer, res *service.ApplyResult, wait time.Duration) {
	switch s := res.Stored; {
	case s != nil && res.DryRun && !s.Unchanged:
		fmt.Fprintf(out, "would store %s generation %d in etcd for hosts %s\n", res.Infra, s.Generation, strings.Join(s.Hosts, ", "))
		printHostPlans(out, res.Hosts)
	case s != nil && wait > 0 && !res.DryRun:
		took := seconds(s.Current)
		if !s.Unchanged {
			took += fmt.Sprintf(" after the store (stored in %s)", seconds(s.Took))
		}
		fmt.Fprintf(out, "%s generation %d: %s current in %s\n", res.Infra, s.Generation, counted(len(s.Hosts), "host", "hosts"), took)
	case s != nil:
	case res.DryRun && len(res.Hosts) > 0: // through a server over etcd
		printHostPlans(out, res.Hosts)
	case res.DryRun:
		fmt.Fprint(out, service.PlanText(res.Plan))
	case len(res.Plan) > 0:
		fmt.Fprintf(out, "applied %s: %s\n", res.Infra, counted(res.Executed, "change", "changes"))
	}
	if res.AgentStarted != "" {
		fmt.Fprintf(out, "agent for %s started: failover and load-based teaming (log: %s)\n", res.Infra, res.AgentStarted)
	}
}

// defaultWait is how long a bare --wait waits.
const defaultWait = 2 * time.Minute

// addWaitFlag gives apply and destroy --wait, whose value is optional: a
// bare --wait waits defaultWait.
func addWaitFlag(c *cobra.Command, wait *time.Duration, usage string) {
	c.Flags().DurationVar(wait, "wait", 0, usage)
	c.Flags().Lookup("wait").NoOptDefVal = defaultWait.String()
}

// seconds prints a duration as the wait's lines do: "0.41 s".
func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// infraName reads NAME|FILE: a file's spec names the infra.
func infraName(svc service.Service, arg string) (string, error) {
	if _, err := os.Stat(arg); err == nil {
		doc, err := svc.LoadFile(arg)
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

func infraNames(svc service.Service, args []string) ([]string, error) {
	names := make([]string, 0, len(args))
	for _, a := range args {
		name, err := infraName(svc, a)
		if err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

func destroyCmd() *cobra.Command {
	var wait time.Duration
	c := &cobra.Command{
		Use:               "destroy NAME|FILE",
		Short:             "Remove everything of one infrastructure and nothing else",
		Args:              exactArgs(1, "an infrastructure name or spec file"),
		ValidArgsFunction: completeInfras,
		RunE: func(cmd *cobra.Command, args []string) error {
			oneshot.CollectLessOften()
			svc, err := backend(infraCmds)
			if err != nil {
				return err
			}
			defer svc.Close()
			name, err := infraName(svc, args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			res, err := svc.Destroy(cmd.Context(), name, service.DestroyOptions{Wait: wait, Log: out,
				Removed:  func(gen int) { fmt.Fprintf(out, "removed %s (generation %d) from etcd\n", name, gen) },
				Progress: func(ev service.WaitEvent) { printWithdrawn(out, ev) },
			})
			if err != nil {
				return err
			}
			switch {
			case res.Generation > 0 && wait > 0:
				fmt.Fprintf(out, "%s: no host reports it (%s withdrawn in %s)\n", name, counted(res.Withdrawn, "report", "reports"), seconds(res.Took))
			case res.Generation == 0:
				fmt.Fprintf(out, "destroyed %s: %s removed\n", name, counted(res.Removed, "object", "objects"))
			}
			return nil
		},
	}
	addWaitFlag(c, &wait, "with --etcd, then wait up to this long (--wait=1m; alone: "+defaultWait.String()+") until no host reports the infrastructure, "+
		"printing each as its report goes. Exit 1 when a host fails to remove its part (named, with its error), 3 when time runs out. Without --etcd, destroy is done when it returns")
	addEtcdFlag(c)
	return c
}

// printWithdrawn says, over etcd, when a host withdraws its report of a
// destroyed infrastructure, or reports that removing its part failed.
func printWithdrawn(out io.Writer, ev service.WaitEvent) {
	switch {
	case ev.State == service.HostGone && ev.Report == nil:
		fmt.Fprintf(out, "%s withdrew its report after %s\n", ev.Host, seconds(ev.After))
	case ev.State == service.HostFailed:
		fmt.Fprintf(out, "%s failed to remove its part after %s: %s\n", ev.Host, seconds(ev.After), strings.Join(ev.Report.Errors, "; "))
	}
}

// counted says "1 switch" and "2 switches", as a person would.
func counted(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func statusCmd() *cobra.Command {
	var output *outputFormat
	c := &cobra.Command{
		Use:               "status [NAME]",
		Short:             "Show hosts, switches, VMs and vNICs with MACs, addresses, state and line rates",
		ValidArgsFunction: completeInfras,
		RunE: func(cmd *cobra.Command, args []string) error {
			oneshot.CollectLessOften()
			svc, err := backend(infraCmds)
			if err != nil {
				return err
			}
			defer svc.Close()
			names, err := infraNames(svc, args)
			if err != nil {
				return err
			}
			all, err := svc.Status(cmd.Context(), names)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output.structured() {
				return output.print(out, statusViews(all))
			}
			if len(all) == 0 {
				fmt.Fprintln(out, "no infrastructures")
			}
			for _, st := range all {
				if st.Cluster != nil {
					printClusterStatus(out, clusterView(st), time.Now())
					continue
				}
				printStatus(out, st.Infra)
			}
			return nil
		},
	}
	output = addOutputFlag(c, "", outText, outJSON, outYAML)
	addEtcdFlag(c)
	return c
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// statusViews are what status -o json prints of each infrastructure: what
// exists on this machine, or over etcd each host's standing.
func statusViews(all []*service.InfraStatus) []any {
	out := make([]any, 0, len(all))
	for _, st := range all {
		if st.Cluster != nil {
			out = append(out, clusterView(st))
			continue
		}
		out = append(out, st.Infra)
	}
	return out
}

// clusterStatus is one infrastructure as etcd knows it, as status prints
// it.
type clusterStatus struct {
	Name       string             `json:"name"`
	SpecFile   string             `json:"spec_file"`
	Generation int                `json:"generation"`
	AppliedAt  time.Time          `json:"applied_at"`
	Converged  bool               `json:"converged"`
	Hosts      []service.HostView `json:"hosts"`
	// Balancers are the load balancers, with their backends' health and
	// connections as the hosts report them.
	Balancers []service.BalancerStatus `json:"load_balancers,omitempty"`
	// Removed says the record is gone (destroyed) while hosts still
	// report it: one whose removal failed is failed, with its errors.
	Removed bool `json:"removed,omitempty"`
	// Damaged says why the record in etcd does not read as its spec.
	Damaged string `json:"damaged,omitempty"`
	// Paused is what is paused (vnet pause), as etcd holds it.
	Paused []string `json:"paused,omitempty"`
	// Networks are the virtual networks with the VNIs they were given.
	Networks []status.Network `json:"networks,omitempty"`
	// VMs are the VMs as the spec places them, each port in its host's
	// standing (this process reads no host's kernel).
	VMs []status.VM `json:"vms,omitempty"`
}

func clusterView(st *service.InfraStatus) clusterStatus {
	c := st.Cluster
	var paused []string
	var networks []status.Network
	var vms []status.VM
	if st.Infra != nil {
		paused, networks, vms = st.Paused, st.Networks, st.VMs
	}
	return clusterStatus{Name: st.Name, SpecFile: st.SpecFile, Generation: st.Generation, AppliedAt: c.AppliedAt, Paused: paused, Networks: networks, VMs: vms,
		Converged: c.Converged, Hosts: c.Hosts, Removed: c.Removed, Damaged: c.Damaged, Balancers: st.Balancers}
}
