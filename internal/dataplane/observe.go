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
	var out []plan.Resource
	aEnds := map[string]*plan.Resource{}
	var bEnds []struct {
		peer string
		end  plan.End
	}
	for _, ns := range names {
		sysctls, err := readSysctls(ns)
		if err != nil {
			return nil, err
		}
		out = append(out, plan.Resource{Kind: plan.KindNetns, Name: ns, Sysctls: sysctls})
		h, err := l.handle(ns)
		if err != nil {
			return nil, err
		}
		links, err := h.LinkList()
		if err != nil {
			return nil, fmt.Errorf("ip -n %s link show: %w", ns, err)
		}
		byIndex := map[int]string{}
		byName := map[string]int{}
		for _, link := range links {
			byIndex[link.Attrs().Index] = link.Attrs().Name
			byName[link.Attrs().Name] = link.Attrs().Index
		}
		for _, link := range links {
			attrs := link.Attrs()
			owner, mine := strings.CutPrefix(attrs.Alias, plan.AliasPrefix)
			if !mine {
				continue
			}
			switch link.Type() {
			case "bridge":
				sysctls, err := readSysctlSet(ns, bridgeConf(attrs.Name), plan.BridgeSysctls)
				if err != nil {
					return nil, err
				}
				out = append(out, plan.Resource{Kind: plan.KindBridge, NS: ns, Name: attrs.Name,
					MAC: attrs.HardwareAddr.String(), MTU: attrs.MTU, Sysctls: sysctls, Owner: owner})
			case "veth":
				end := plan.End{NS: ns, Name: attrs.Name, MAC: attrs.HardwareAddr.String(), MTU: attrs.MTU, Master: byIndex[attrs.MasterIndex],
					Down: attrs.Flags&net.FlagUp == 0}
				if end.Master != "" {
					if pi, err := h.LinkGetProtinfo(link); err == nil {
						end.Isolated = pi.Isolated
					}
				}
				if pns, pname, ok := parsePeerAlias(attrs.Alias); ok {
					bEnds = append(bEnds, struct {
						peer string
						end  plan.End
					}{pns + "/" + pname, end})
				} else {
					aEnds[ns+"/"+attrs.Name] = &plan.Resource{Kind: plan.KindVeth, A: end, Owner: owner}
				}
			}
			addrs, err := observeAddrs(h, link, ns)
			if err != nil {
				return nil, err
			}
			out = append(out, addrs...)
			out = append(out, observeTC(h, link, ns, shaperHints)...)
			out = append(out, observeSteer(h, link, ns, byName)...)
		}
		fw, err := l.observeFirewall(ns)
		if err != nil {
			return nil, err
		}
		out = append(out, fw...)
	}
	for _, b := range bEnds {
		if a, ok := aEnds[b.peer]; ok {
			a.B = b.end
		}
	}
	keys := make([]string, 0, len(aEnds))
	for k := range aEnds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, *aEnds[k])
	}
	out = append(out, l.observeOffloads(hints)...)
	out = append(out, l.observeCgroups(infra)...)
	return out, nil
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
