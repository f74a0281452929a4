package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/status"
)

func printStatus(out io.Writer, st *service.Status) {
	fmt.Fprintf(out, "infra %s (generation %d, from %s)\n", st.Name, st.Generation, st.SpecFile)
	printPausedLine(out, st.Paused)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "\nHOST\tNIC\tSPEED\tMAC\tIP\tUPLINK OF\tSTATE")
	for _, h := range st.Hosts {
		kind := h.Name
		if h.Native {
			kind += " (native)"
		}
		if len(h.NICs) == 0 {
			fmt.Fprintf(w, "%s\t-\t\t\t\t\t\n", kind)
		}
		for _, n := range h.NICs {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", kind, n.Name, n.Speed, n.MAC, dash(n.IP), dash(n.Uplink), n.State)
		}
	}
	fmt.Fprintln(w, "\nSWITCH\tTYPE\tHOSTS\tUPLINKS\tPORT GROUPS")
	for _, s := range st.Switches {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Type, strings.Join(s.Hosts, ","), dash(strings.Join(s.Uplinks, ",")), dash(strings.Join(s.PortGroups, ",")))
	}
	printNetworks(w, st.Networks)
	fmt.Fprintln(w, "\nVM\tHOST\tCPUS\tVNIC\tPORT GROUP\tMAC\tIP\tSTATE\tUPLINK")
	for _, vm := range st.VMs {
		cpus := cpusText(vm.CPUs)
		if len(vm.NICs) == 0 {
			fmt.Fprintf(w, "%s\t%s\t%s\t-\t\t\t\t\n", vm.Name, vm.Host, cpus)
		}
		for _, n := range vm.NICs {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", vm.Name, vm.Host, cpus, n.Name, portPlace(n), n.MAC, dash(n.IP), n.State, uplinkText(n))
		}
	}
	if len(st.HostPorts) > 0 {
		fmt.Fprintln(w, "\nHOST PORT\tHOST\tPORT GROUP\tMAC\tIP\tSTATE\tUPLINK")
		for _, p := range st.HostPorts {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.Host, p.PortGroup, p.MAC, dash(p.IP), p.State, uplinkText(p))
		}
	}
	w.Flush()
	printSecurity(out, st.Security)
	if st.PortPolicy != "" {
		fmt.Fprintf(out, "port policies enforced by %s\n", st.PortPolicy)
	}
	printBalancers(out, st.Balancers)
	switch a := st.Agent; {
	case a == nil:
	case a.Running:
		fmt.Fprintf(out, "\nagent: running (pid %d): failover, load-based teaming, notify; log %s\n", a.PID, a.Log)
	default:
		fmt.Fprintf(out, "\nagent: NOT running: uplink failover and load-based teaming are off until vnet apply starts it (log %s)\n", a.Log)
	}
	if len(st.Drift) > 0 {
		fmt.Fprintf(out, "\ndrift: the host differs from the spec; vnet apply would:\n  %s\n", strings.Join(st.Drift, "\n  "))
	}
	fmt.Fprintln(out)
}

// uplinkText says which uplink of a team carries a port and why; "-" when
// its switch has one uplink on the host (or none).
func uplinkText(p service.PortStatus) string {
	if p.Uplink == "" {
		if p.Why != "" {
			return p.Why // e.g. no uplink up
		}
		return "-"
	}
	return p.Uplink + " (" + p.Why + ")"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printClusterStatus shows each host's standing over etcd, from its
// agent's report.
func printClusterStatus(out io.Writer, cs clusterStatus, now time.Time) {
	switch {
	case cs.Removed:
		fmt.Fprintf(out, "infra %s (destroyed: no longer in etcd, but hosts still report it)\n", cs.Name)
	case cs.Damaged != "":
		fmt.Fprintf(out, "infra %s (damaged: %s)\n", cs.Name, cs.Damaged)
	default:
		fmt.Fprintf(out, "infra %s (generation %d, from %s, applied %s)\n", cs.Name, cs.Generation, cs.SpecFile, cs.AppliedAt.Local().Format(time.DateTime))
	}
	printPausedLine(out, cs.Paused)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "\nHOST\tSTATE\tGENERATION\tRESOURCES\tREPORTED\tERRORS")
	count := map[service.HostState]int{}
	for _, v := range cs.Hosts {
		count[v.State]++
		if v.Report == nil {
			fmt.Fprintf(w, "%s\t%s\t-\t-\t-\t\n", v.Host, v.State)
			continue
		}
		r := v.Report
		age := now.Sub(r.At).Round(time.Second)
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s ago\t%s\n", v.Host, v.State, r.Generation, r.Resources, age, strings.Join(r.Errors, "; "))
	}
	printNetworks(w, cs.Networks)
	printHostVMs(w, cs.Hosts, cs.VMs)
	w.Flush()
	var parts []string
	for _, s := range []service.HostState{service.HostCurrent, service.HostLagging, service.HostFailed, service.HostGone, service.HostUnexpected} {
		if count[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[s], s))
		}
	}
	fmt.Fprintf(out, "\n%s: %s\n\n", counted(len(cs.Hosts), "host", "hosts"), strings.Join(parts, ", "))
	printHostSecurity(out, cs.Hosts)
	printBalancers(out, cs.Balancers)
}

// printHostVMs lists, host by host as the hosts are listed, the VMs on
// each with their vNICs, in the columns status on one machine has; a
// port's state is its host's standing as its agent reports it.
func printHostVMs(w io.Writer, hosts []service.HostView, vms []status.VM) {
	byHost := map[string][]status.VM{}
	for _, vm := range vms {
		byHost[vm.Host] = append(byHost[vm.Host], vm)
	}
	for _, h := range hosts {
		on := byHost[h.Host]
		if len(on) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nVMS ON %s (%s)\n", h.Host, h.State)
		fmt.Fprintln(w, "VM\tCPUS\tVNIC\tPORT GROUP\tMAC\tIP\tSTATE")
		for _, vm := range on {
			for _, n := range vm.NICs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", vm.Name, cpusText(vm.CPUs), n.Name, portPlace(n), dash(n.MAC), dash(n.IP), n.State)
			}
		}
	}
}

// cpusText is a VM's CPU limit as status prints it.
func cpusText(cpus float64) string {
	if cpus > 0 {
		return fmt.Sprintf("%g", cpus)
	}
	return "-"
}

// portPlace is what a vNIC is on: its port group, or its network.
func portPlace(n status.Port) string {
	if n.Network != "" {
		return "network " + n.Network
	}
	return n.PortGroup
}

// printPausedLine says what is paused, when something is.
func printPausedLine(out io.Writer, paused []string) {
	if len(paused) == 0 {
		return
	}
	what := make([]string, 0, len(paused))
	for _, sel := range paused {
		what = append(what, plan.Describe(sel))
	}
	fmt.Fprintf(out, "paused: %s (vnet resume starts it again)\n", strings.Join(what, ", "))
}

// printNetworks lists the virtual networks with the VNIs they were given.
func printNetworks(w io.Writer, networks []status.Network) {
	if len(networks) == 0 {
		return
	}
	fmt.Fprintln(w, "\nNETWORK\tVNI\tSUBNET\tROUTER\tOVER\tHOSTS\tVMS")
	for _, n := range networks {
		subnets := strings.Join(slices.DeleteFunc([]string{n.Subnet, n.Subnet6}, func(s string) bool { return s == "" }), ",")
		over := "-"
		if n.PortGroup != "" {
			over = "port group " + n.PortGroup
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%d\n", n.Name, n.VNI, dash(subnets), dash(n.Router), over, dash(strings.Join(n.Hosts, ",")), n.VMs)
	}
}
