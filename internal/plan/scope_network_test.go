package plan

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

// networksBase is the tenants' spec with n more router-less networks of
// two VMs each, network i on hv1 and hv2.
func networksBase(n int) string {
	var nets, vms strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&nets, "  - {name: m%d, vni: %d, subnet: 10.200.%d.0/24}\n", i, 1000+i, i)
		for j := 0; j < 2; j++ {
			fmt.Fprintf(&vms, "  - {name: m%d-%d, host: hv%d, nics: [{network: m%d, ip: 10.200.%d.%d/24}]}\n", i, j, j+1, i, i, 10+j)
		}
	}
	s := strings.Replace(tenantsSpec, "vms:\n", nets.String()+"vms:\n", 1)
	return s + vms.String()
}

// withNetwork adds a network and its VMs (name@host) to a spec.
func withNetwork(src, network string, vms ...string) string {
	src = strings.Replace(src, "vms:\n", fmt.Sprintf("  - {name: %s, vni: 9999, subnet: 10.250.0.0/24}\nvms:\n", network), 1)
	for i, v := range vms {
		name, host, _ := strings.Cut(v, "@")
		src += fmt.Sprintf("  - {name: %s, host: %s, nics: [{network: %s, ip: 10.250.0.%d/24}]}\n", name, host, network, 10+i)
	}
	return src
}

// scopeView describes a scope by what it holds: whole namespaces by node
// name, and the host namespace's links by what they are (bridge, tunnel,
// router port of a network, or a VM's port).
func scopeView(s Scope, infra string, networks, vms []string) []string {
	what := map[string]string{}
	for _, n := range networks {
		what[NetBridgeName(infra, n)] = "bridge " + n
		what[NetVTEPName(infra, n)] = "tunnel " + n
		what[RouterPortName(infra, n)] = "router port " + n
	}
	for _, v := range vms {
		what[VNICPortName(infra, v, 0)] = "port " + v
		what["t"+v] = "port " + v // its TAP (onTaps)
	}
	var out []string
	for ns, links := range s {
		if ns != CurrentNS {
			_, node, ok := SplitNSName(ns)
			if !ok {
				node = "(attached) " + ns
			}
			if links == nil {
				out = append(out, "ns "+node)
			} else {
				for l := range links {
					out = append(out, "ns "+node+" link "+l)
				}
			}
			continue
		}
		for l := range links {
			if w, ok := what[l]; ok {
				out = append(out, w)
			} else {
				out = append(out, "other link "+l)
			}
		}
		if links == nil {
			out = append(out, "the whole host namespace")
		}
	}
	sort.Strings(out)
	return out
}

// scopeCase is a change of a spec and what its scope holds on one host.
type scopeCase struct {
	name       string
	last, next string
	host       string
	want       []string // scopeView; nil: an empty scope
	fullWhy    string
}

func checkScope(t *testing.T, tt scopeCase) {
	t.Helper()
	last, next := load(t, tt.last), load(t, tt.next)
	opt := Options{Host: tt.host, NumCPU: 2}
	got, why := ChangeScope(last, next, Model(last, opt), Model(next, opt))
	if tt.fullWhy != "" {
		if !got.Full() || !strings.Contains(why, tt.fullWhy) {
			t.Fatalf("got scope %v (%q), want full because of %q", got, why, tt.fullWhy)
		}
		return
	}
	if got.Full() {
		t.Fatalf("full scope: %s", why)
	}
	var networks, vms []string
	for _, n := range append(append([]spec.Network(nil), next.Networks...), last.Networks...) {
		networks = append(networks, n.Name)
	}
	for _, v := range append(append([]spec.VM(nil), next.VMs...), last.VMs...) {
		vms = append(vms, v.Name)
	}
	if view := scopeView(got, "dc", networks, vms); !reflect.DeepEqual(view, tt.want) {
		t.Errorf("scope holds %q, want %q", view, tt.want)
	}
}

// A change to one network scopes its own objects on the host: its bridge,
// tunnel and the ports and namespaces of its VMs there, and nothing of the
// other networks, however many there are.
func TestChangeScopeOfNetworks(t *testing.T) {
	base := networksBase(20)
	tests := []scopeCase{
		{name: "add a network on two hosts", last: base, next: withNetwork(base, "new", "x1@hv1", "x2@hv2"), host: "hv1",
			want: []string{"bridge new", "ns x1", "port x1", "tunnel new"}},
		{name: "add a network, seen from its other host", last: base, next: withNetwork(base, "new", "x1@hv1", "x2@hv2"), host: "hv2",
			want: []string{"bridge new", "ns x2", "port x2", "tunnel new"}},
		{name: "add a network, seen from a host without it", last: base, next: withNetwork(base, "new", "x1@hv1", "x2@hv2"), host: "hv3"},
		{name: "add a network on one host", last: base, next: withNetwork(base, "new", "x1@hv1", "x2@hv1"), host: "hv1",
			want: []string{"bridge new", "ns x1", "ns x2", "port x1", "port x2"}},
		{name: "remove a network", last: withNetwork(base, "new", "x1@hv1", "x2@hv2"), next: base, host: "hv1",
			want: []string{"bridge new", "ns x1", "port x1", "tunnel new"}},
		{name: "a network's second VM on another host", last: withNetwork(base, "new", "x1@hv1"),
			next: withNetwork(base, "new", "x1@hv1", "x2@hv3"), host: "hv1",
			// the tunnel comes, with the new VM's entries in the tunnel and
			// the bridge; its neighbour entry is on the bridge
			want: []string{"bridge new", "tunnel new"}},
		{name: "change a network's MTU", last: base, next: strings.Replace(base, "{name: m3, vni: 1003,", "{name: m3, vni: 1003, mtu: 1400,", 1), host: "hv2",
			want: []string{"bridge m3", "ns m3-1 link eth0", "port m3-1", "tunnel m3"}},
		{name: "add a network to a router", last: base,
			next: strings.Replace(base, "  - {name: lonely", "  - {name: a-app, vni: 103, subnet: 10.3.0.0/24, gateway: 10.3.0.1, router: ta}\n  - {name: lonely", 1) +
				"  - {name: a5, host: hv1, nics: [{network: a-app, ip: 10.3.0.15/24}]}\n",
			host: "hv1",
			want: []string{"bridge a-app", "ns _r.ta.hv1 link " + RouterLegName("a-app"), "ns a5", "port a5", "router port a-app", "tunnel a-app"}},
		{name: "change a host", last: base, next: strings.Replace(base, "underlay: 10.0.0.13", "underlay: 10.0.0.23", 1), host: "hv1",
			fullWhy: "host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkScope(t, tt) })
	}
}

// On what the scope of a network change holds, a scoped apply plans what a
// full apply of the change plans.
func TestScopedDiffOfNetworkChanges(t *testing.T) {
	base := networksBase(5)
	routed := strings.Replace(base, "  - {name: lonely", "  - {name: a-app, vni: 103, subnet: 10.3.0.0/24, gateway: 10.3.0.1, router: ta}\n  - {name: lonely", 1) +
		"  - {name: a5, host: hv1, nics: [{network: a-app, ip: 10.3.0.15/24}]}\n"
	changes := map[string][2]string{
		"add":                  {base, withNetwork(base, "new", "x1@hv1", "x2@hv2")},
		"remove":               {withNetwork(base, "new", "x1@hv1", "x2@hv2"), base},
		"span another host":    {withNetwork(base, "new", "x1@hv1"), withNetwork(base, "new", "x1@hv1", "x2@hv3")},
		"add to a router":      {base, routed},
		"remove from a router": {routed, base},
	}
	addTapVariants(changes)
	tapped := onTaps(base)
	changes["a VM moves to another TAP"] = [2]string{tapped, strings.Replace(tapped, "attach: {tap: tm3-1}", "attach: {tap: tm3-1b}", 1)}
	changes["a VM on a TAP gets its MAC"] = [2]string{tapped, strings.Replace(tapped, "attach: {tap: tm3-1}", "attach: {tap: tm3-1}, mac: \"02:00:00:00:03:01\"", 1)}
	changes["a TAP's network's MTU"] = [2]string{tapped, strings.Replace(tapped, "{name: m3, vni: 1003,", "{name: m3, vni: 1003, mtu: 1400,", 1)}
	contained := base + "  - {name: c1, host: hv1, nics: [{network: m1, ip: 10.200.1.21/24, attach: {netns: c1, ifname: net1}}]}\n"
	changes["a container's vNIC comes"] = [2]string{base, contained}
	changes["a container's vNIC goes"] = [2]string{contained, base}
	for name, c := range changes {
		for _, host := range []string{"hv1", "hv2", "hv3"} {
			t.Run(name+" on "+host, func(t *testing.T) {
				opt := Options{Host: host, NumCPU: 2}
				last, next := load(t, c[0]), load(t, c[1])
				before, want := Model(last, opt), Model(next, opt)
				scope, why := ChangeScope(last, next, before, want)
				if scope.Full() {
					t.Fatalf("full scope: %s", why)
				}
				full := Diff(want, before).String()
				var read []Resource
				for _, r := range before {
					if r.Kind == KindVeth && scope.Holds(Resource{Kind: KindVeth, A: r.A}) && !scope.Holds(Resource{Kind: KindVeth, A: r.B}) {
						r.B = End{}
					}
					if scope.Holds(r) {
						read = append(read, r)
					}
				}
				desired := scope.Desired(want)
				if scoped := Diff(desired, scope.Observed(read, desired, want)).String(); scoped != full {
					t.Errorf("scoped plan:\n%s\nfull plan:\n%s", scoped, full)
				}
			})
		}
	}
}

// onTaps makes every VM of a spec a guest whose vNIC is the TAP "t" and
// its name (attach: {tap: ...}), as a hypervisor's VMs are.
// addTapVariants adds to changes each change again with the VMs on TAPs.
func addTapVariants(changes map[string][2]string) {
	for name, c := range maps.Clone(changes) {
		changes[name+", VMs on TAPs"] = [2]string{onTaps(c[0]), onTaps(c[1])}
	}
}

func onTaps(src string) string {
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		m := vmLine.FindStringSubmatch(l)
		if m == nil || strings.Contains(l, "attach:") {
			continue
		}
		lines[i] = strings.Replace(l, m[2], m[2]+", attach: {tap: t"+m[1]+"}", 1)
	}
	return strings.Join(lines, "\n")
}

// vmLine is a VM of one vNIC on a network, on one line: its name and its
// vNIC's network and address.
var vmLine = regexp.MustCompile(`^  - \{name: ([^,]+), host: [^,]+, nics: \[\{(network: [^,]+, ip: [^,}]+)`)

// A change to one network of VMs on TAPs scopes its own objects on the
// host and each VM's TAP by its name, and nothing of the other networks.
func TestChangeScopeOfNetworksOnTaps(t *testing.T) {
	base := onTaps(networksBase(20))
	tests := []scopeCase{
		{name: "add a network on two hosts", last: base, next: onTaps(withNetwork(base, "new", "x1@hv1", "x2@hv2")), host: "hv1",
			want: []string{"bridge new", "port x1", "tunnel new"}},
		{name: "add a network, seen from a host without it", last: base, next: onTaps(withNetwork(base, "new", "x1@hv1", "x2@hv2")), host: "hv3"},
		{name: "remove a network", last: onTaps(withNetwork(base, "new", "x1@hv1", "x2@hv2")), next: base, host: "hv2",
			want: []string{"bridge new", "port x2", "tunnel new"}},
		{name: "a VM moves to another TAP", last: base, next: strings.Replace(base, "attach: {tap: tm3-1}", "attach: {tap: tm3-1b}", 1), host: "hv2",
			want: []string{"other link tm3-1b", "port m3-1"}},
		{name: "change a network's MTU", last: base, next: strings.Replace(base, "{name: m3, vni: 1003,", "{name: m3, vni: 1003, mtu: 1400,", 1), host: "hv2",
			want: []string{"bridge m3", "port m3-1", "tunnel m3"}},
		{name: "a VM on a TAP and one in a namespace of its own", last: base,
			next: base + "  - {name: n1, host: hv1, nics: [{network: m1, ip: 10.200.1.20/24}]}\n", host: "hv1",
			// the new VM's neighbour entry is on the network's bridge
			want: []string{"bridge m1", "ns n1", "port n1"}},
		{name: "a vNIC into an existing namespace", last: base,
			next: base + "  - {name: c1, host: hv1, nics: [{network: m1, ip: 10.200.1.21/24, attach: {netns: c1}}]}\n", host: "hv1",
			// the new VM's neighbour entry is on the network's bridge
			want: []string{"bridge m1", "ns (attached) c1 link eth0", "port c1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkScope(t, tt) })
	}
}
