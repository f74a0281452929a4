package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/vnet-project/vnet/internal/reconcile"
)

// printSecurity shows each protected port's policy and what its rules
// counted: drops by reason, and for ACL rules the packets they matched.
func printSecurity(out io.Writer, ports []reconcile.SecurityStatus) {
	if len(ports) == 0 {
		return
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "\nSECURITY PORT\tPORT GROUP\tPOLICY\tCOUNTED (packets)")
	for _, p := range ports {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", p.Port, p.PortGroup, p.Policy, counterText(p.Counters))
	}
	w.Flush()
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
