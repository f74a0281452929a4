package dataplane

import (
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/plan"
)

// Observe reads what exists of an infrastructure: its namespaces, the links
// vnet made in them (by alias), their addresses, line rates and cgroups.
// Offloads are read only for the links named by the hints' offload
// resources: vnet leaves other links' offloads as the kernel has them.
func (l *Linux) Observe(infra string, hints []plan.Resource) ([]plan.Resource, error) {
	names, err := listNetns(plan.InfraNSPrefix(infra))
	if err != nil {
		return nil, err
	}
	shaperHints := map[string]plan.Resource{}
	for _, r := range hints {
		if r.Kind == plan.KindShaper {
			shaperHints[r.Key()] = r
		}
	}
	if l.OnlyStore != "" {
		names = l.markedBy(names, l.OnlyStore)
	}
	o := &observation{shaperHints: shaperHints, aEnds: map[string]*vethEnd{}}
	for _, ns := range names {
		sysctls, err := readSysctls(ns)
		if err != nil {
			return nil, err
		}
		h, err := l.handle(ns)
		if err != nil {
			return nil, err
		}
		links, err := h.LinkList()
		if err != nil {
			return nil, fmt.Errorf("ip -n %s link show: %w", ns, err)
		}
		o.out = append(o.out, plan.Resource{Kind: plan.KindNetns, Name: ns, Sysctls: sysctls, Mark: loopbackAlias(links)})
		if err := o.links(h, ns, links, nil); err != nil {
			return nil, err
		}
		fw, err := l.observeFirewall(ns)
		if err != nil {
			return nil, err
		}
		o.out = append(o.out, fw...)
	}
	if l.HostNS != "" {
		h, err := l.handle(l.HostNS)
		if err != nil {
			return nil, err
		}
		links, err := h.LinkList()
		if err != nil {
			return nil, fmt.Errorf("ip -n %s link show: %w", l.HostNS, err)
		}
		// The host's namespace is the machine's: only what names the
		// infrastructure is its.
		if err := o.links(h, l.HostNS, links, func(alias string) bool { return plan.OwnedBy(alias, infra) }); err != nil {
			return nil, err
		}
	}
	out, aEnds, bEnds := o.out, o.aEnds, o.bEnds
	joinVethEnds(aEnds, bEnds)
	keys := make([]string, 0, len(aEnds))
	for k := range aEnds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, *aEnds[k].r)
	}
	out = append(out, l.observeOffloads(hints)...)
	cgroups := l.observeCgroups(infra)
	if l.OnlyStore != "" {
		cgroups = ofNamespaces(cgroups, names)
	}
	return append(out, cgroups...), nil
}

// observation gathers the links of the namespaces Observe reads.
type observation struct {
	shaperHints map[string]plan.Resource
	out         []plan.Resource
	aEnds       map[string]*vethEnd
	bEnds       []vethEnd
}

// links reads the links vnet made in one namespace (by alias) and what sits
// on them; keep, when set, further picks the aliases to read.
func (o *observation) links(h *netlink.Handle, ns string, links []netlink.Link, keep func(alias string) bool) error {
	byIndex := map[int]string{}
	byName := map[string]int{}
	for _, link := range links {
		byIndex[link.Attrs().Index] = link.Attrs().Name
		byName[link.Attrs().Name] = link.Attrs().Index
	}
	for _, link := range links {
		attrs := link.Attrs()
		owner, mine := strings.CutPrefix(attrs.Alias, plan.AliasPrefix)
		if !mine || attrs.Name == "lo" { // lo's alias is the namespace's mark
			continue
		}
		if keep != nil && !keep(attrs.Alias) {
			continue
		}
		switch link.Type() {
		case "bridge":
			sysctls, err := readSysctlSet(ns, bridgeConf(attrs.Name), plan.BridgeSysctls)
			if err != nil {
				return err
			}
			o.out = append(o.out, plan.Resource{Kind: plan.KindBridge, NS: ns, Name: attrs.Name,
				MAC: attrs.HardwareAddr.String(), MTU: attrs.MTU, Sysctls: sysctls, Owner: owner})
		case "vxlan":
			rs, err := observeVxlan(h, link, ns, byIndex[attrs.MasterIndex], owner)
			if err != nil {
				return err
			}
			o.out = append(o.out, rs...)
		case "veth":
			end := plan.End{NS: ns, Name: attrs.Name, MAC: attrs.HardwareAddr.String(), MTU: attrs.MTU, Master: byIndex[attrs.MasterIndex],
				Down: attrs.Flags&net.FlagUp == 0}
			if end.Master != "" {
				if pi, err := h.LinkGetProtinfo(link); err == nil {
					end.Isolated = pi.Isolated
				}
			}
			v := vethEnd{end: end, index: attrs.Index, peerIndex: attrs.ParentIndex}
			if pns, pname, ok := parsePeerAlias(attrs.Alias); ok {
				v.peer = pns + "/" + pname
				o.bEnds = append(o.bEnds, v)
			} else {
				v.r = &plan.Resource{Kind: plan.KindVeth, A: end, Owner: owner}
				o.aEnds[ns+"/"+attrs.Name] = &v
			}
		}
		addrs, err := observeAddrs(h, link, ns)
		if err != nil {
			return err
		}
		o.out = append(o.out, addrs...)
		o.out = append(o.out, observeTC(h, link, ns, o.shaperHints)...)
		o.out = append(o.out, observeSteer(h, link, ns, byName)...)
	}
	return nil
}

// markedBy keeps the namespaces whose mark names the store. One that
// vanishes meanwhile is another agent's, going.
func (l *Linux) markedBy(names []string, storeID string) []string {
	var out []string
	for _, ns := range names {
		h, err := handleFor(ns)
		if err != nil {
			continue
		}
		lo, err := h.LinkByName("lo")
		h.Close()
		if err != nil {
			continue
		}
		if m, ok := plan.ParseMark(lo.Attrs().Alias); ok && m.Store == storeID {
			out = append(out, ns)
		}
	}
	return out
}

// ofNamespaces keeps the cgroups of VMs whose namespace is in names.
func ofNamespaces(cgroups []plan.Resource, names []string) []plan.Resource {
	keep := map[string]bool{}
	for _, n := range names {
		keep[n] = true
	}
	var out []plan.Resource
	for _, c := range cgroups {
		if keep[c.Namespace()] {
			out = append(out, c)
		}
	}
	return out
}

// vethEnd is one end of a pair as observed, with what joins it to the
// other: the first end's resource, or the second end's peer alias.
type vethEnd struct {
	r                *plan.Resource // the pair, on its first end
	end              plan.End
	peer             string // on the second end: ns/name of the first, as made
	index, peerIndex int    // ifindex of the end and of its peer (IFLA_LINK)
}

// joinVethEnds completes each pair with its second end. The second end
// names the first as it was made; a first end renamed behind vnet's back
// (ip link set eth0 name foo) is found by the ifindexes the two ends hold
// of each other instead, in the namespace the alias names. Without its
// second end, the plan would not know that deleting the renamed pair
// frees the switch port's name.
func joinVethEnds(aEnds map[string]*vethEnd, bEnds []vethEnd) {
	for _, b := range bEnds {
		if a, ok := aEnds[b.peer]; ok {
			a.r.B = b.end
			continue
		}
		ns, _, _ := strings.Cut(b.peer, "/")
		for _, a := range aEnds {
			if a.end.NS == ns && a.r.B.Name == "" && a.index == b.peerIndex && a.peerIndex == b.index {
				a.r.B = b.end
				break
			}
		}
	}
}

// loopbackAlias is the alias of a namespace's lo: its mark, if vnet made it.
func loopbackAlias(links []netlink.Link) string {
	for _, link := range links {
		if link.Attrs().Name == "lo" {
			return link.Attrs().Alias
		}
	}
	return ""
}

func observeAddrs(h *netlink.Handle, link netlink.Link, ns string) ([]plan.Resource, error) {
	addrs, err := h.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("ip -n %s addr show %s: %w", ns, link.Attrs().Name, err)
	}
	var out []plan.Resource
	for _, a := range addrs {
		if a.Scope == unix.RT_SCOPE_LINK || a.IP.IsLinkLocalUnicast() {
			continue // the kernel's own IPv6 link-local addresses
		}
		out = append(out, plan.Resource{Kind: plan.KindAddr, NS: ns, Link: link.Attrs().Name, CIDR: (&net.IPNet{IP: a.IP, Mask: a.Mask}).String()})
	}
	return out, nil
}

func (l *Linux) observeOffloads(hints []plan.Resource) []plan.Resource {
	var out []plan.Resource
	for _, r := range hints {
		if r.Kind != plan.KindOffloads || !netnsExists(r.NS) {
			continue
		}
		gro, tso, err := readOffloads(r.NS, r.Link)
		if err != nil {
			continue // the link does not exist yet
		}
		got := plan.Resource{Kind: plan.KindOffloads, NS: r.NS, Link: r.Link, GRO: plan.Unset, TSO: plan.Unset}
		// Compare only what the spec sets: an unset offload is whatever the kernel has.
		if r.GRO != plan.Unset {
			got.GRO = gro
		}
		if r.TSO != plan.Unset {
			got.TSO = tso
		}
		out = append(out, got)
	}
	return out
}

func (l *Linux) observeCgroups(infra string) []plan.Resource {
	var out []plan.Resource
	for _, name := range l.cgroups.List("vnet/" + infra) {
		milli, cpus, ok := l.cgroups.Read(name)
		if ok {
			out = append(out, plan.Resource{Kind: plan.KindCgroup, Name: name, CPUMilli: milli, CPUs: cpus})
		}
	}
	return out
}

// Cgroups returns the cgroup driver, for exec.
func (l *Linux) Cgroups() *Cgroups { return l.cgroups }
