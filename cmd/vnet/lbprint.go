package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/vnet-project/vnet/internal/service"
)

// printBalancers shows each load balancer's VIPs and listeners and, a line
// each, its backends: where they run, their health and the connections
// the clients' ports sent them (all of them, and those active in the
// last minute).
func printBalancers(out io.Writer, lbs []service.BalancerStatus) {
	if len(lbs) == 0 {
		return
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "\nLOAD BALANCER\tVIP\tLISTENERS\tBACKEND\tHOST\tADDRESS\tHEALTH\tCONNECTIONS\tACTIVE")
	for _, lb := range lbs {
		name := lb.Site + "/" + lb.Name
		vips, listeners := strings.Join(lb.VIPs, ","), strings.Join(lb.Listeners, ", ")
		for i, b := range lb.Backends {
			if i > 0 {
				name, vips, listeners = "", "", ""
			}
			health := b.Health
			if b.Error != "" {
				health += " (" + b.Error + ")"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", name, vips, listeners, fmt.Sprintf("%s eth%d", b.VM, b.NIC), b.Host,
				strings.Join(b.Addrs, ","), health, b.Connections, b.Active)
		}
	}
	w.Flush()
}
