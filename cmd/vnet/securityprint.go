package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/vnet-project/vnet/internal/service"
)

// printSecurity shows each protected port's policy and what its rules
// counted: drops by reason, and for ACL rules the packets they matched.
func printSecurity(out io.Writer, ports []service.SecurityStatus) {
	if len(ports) == 0 {
		return
	}
	fmt.Fprintln(out)
	writeSecurity(out, "SECURITY PORT", ports)
}

// writeSecurity is printSecurity's table under a heading for its first
// column: the ports of one machine, or of one host of a cluster.
func writeSecurity(out io.Writer, heading string, ports []service.SecurityStatus) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "%s\tPORT GROUP\tPOLICY\tCOUNTED (packets)\n", heading)
	for _, p := range ports {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", p.Port, p.PortGroup, p.Policy, counterText(p.Counters))
	}
	w.Flush()
}

// printHostSecurity shows, per host of a cluster, what its agent reported
// its ports' firewall rules counted, as printSecurity does for one machine.
// An agent leaves out counters that counted nothing, and ports beyond its
// report's bound.
func printHostSecurity(out io.Writer, hosts []service.HostView) {
	for _, v := range hosts {
		if v.Report == nil || len(v.Report.Security) == 0 {
			continue
		}
		writeSecurity(out, "SECURITY PORT ON "+v.Host, v.Report.Security)
		if n := v.Report.SecurityOmitted; n > 0 {
			fmt.Fprintf(out, "(and %s with a policy, not reported)\n", counted(n, "port", "ports"))
		}
		fmt.Fprintln(out)
	}
}

func counterText(c map[string]uint64) string {
	if len(c) == 0 {
		return "-"
	}
	labels := make([]string, 0, len(c))
	for l := range c {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	parts := make([]string, len(labels))
	for i, l := range labels {
		parts[i] = fmt.Sprintf("%s %d", l, c[l])
	}
	return strings.Join(parts, ", ")
}
