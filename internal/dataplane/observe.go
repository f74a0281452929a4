package dataplane

import (
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane/nft"
	"github.com/vnet-project/vnet/internal/dataplane/rtnl"
	"github.com/vnet-project/vnet/internal/plan"
)

// Observe reads what exists of an infrastructure: its namespaces, the links
// vnet made in them (by alias), their addresses, line rates and cgroups.
// Offloads are read only for the links named by the hints' offload
// resources: vnet leaves other links' offloads as the kernel has them.
//
// Each namespace is read with one dump per kind of object (links,
// addresses, qdiscs) rather than one per link, since the kernel answers a
// per-link query for addresses or qdiscs by walking every link of the
// namespace; and a few namespaces are read at once.
func (l *Linux) Observe(infra string, hints []plan.Resource) ([]plan.Resource, error) {
	return l.ObserveScope(infra, nil, hints)
}

// ObserveScope is Observe of only what is in scope (everything when it is
// nil): what a change can touch. Of a namespace the scope holds some links
// of, only those links are read, with what sits on them, and the
// namespace's mark. A veth end whose other end is outside the scope is
// read as a pair without its second end, and is not judged stranded.
func (l *Linux) ObserveScope(infra string, scope plan.Scope, hints []plan.Resource) ([]plan.Resource, error) {
	return l.observe(infra, scope, hints, nil)
}

// ObserveCounting is Observe that also returns, by namespace, the
// firewall counters it read on the way (as FirewallCounters reads them):
// status shows both, and the counters come with the dump of each
// firewall's rules that observation makes. A namespace it has none for is
// left out.
func (l *Linux) ObserveCounting(infra string, hints []plan.Resource) ([]plan.Resource, map[string]map[string]map[string]uint64, error) {
	counters := nft.NewCounts()
	rs, err := l.observe(infra, nil, hints, counters)
	return rs, counters.ByNS(), err
}

func (l *Linux) observe(infra string, scope plan.Scope, hints []plan.Resource, counters *nft.Counts) ([]plan.Resource, error) {
	l.fw.ForgetReads()
	l.forgetReplaced()
	names, err := listNetnsIn(plan.InfraNSPrefix(infra), scope)
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
	views := make([]nsObservation, len(names))
	err = forEachParallel(len(names), observeWorkers, func(i int) error {
		links, _ := scope.Links(names[i])
		v, err := l.observeNS(names[i], shaperHints, nil, links)
		if err != nil {
			views[i] = v
			return err
		}
		if links == nil && !v.bridged {
			// A bridge family table filters nothing without a bridge:
			// a VM's namespace has none to read.
			views[i] = v
			return nil
		}
		fw, err := l.fw.Observe(names[i], links, "", counters)
		v.resources = append(v.resources, fw...)
		views[i] = v
		return err
	})
	if err != nil {
		return nil, err
	}
	hostLinks, readHostNS := scope.Links(l.HostNS)
	readHostNS = readHostNS && l.HostNS != ""
	if readHostNS {
		// The host's namespace is the machine's: only what names the
		// infrastructure is its.
		peers := hostPeerAliases(infra, hints)
		v, err := l.observeNS(l.HostNS, shaperHints, func(alias string) bool { return plan.OwnedBy(alias, infra) || peers[alias] }, hostLinks)
		if err != nil {
			return nil, err
		}
		// Its firewall is the infrastructure's own tables there.
		fw, err := l.fw.Observe(l.HostNS, hostLinks, plan.FirewallTable(infra), counters)
		if err != nil {
			return nil, err
		}
		v.resources = append(v.resources, fw...)
		views = append(views, v)
	}
	attachedNS := attachedNamespaces(infra, hints)
	for _, ns := range scope.Names() {
		// A container's namespace the change reaches (one a vNIC leaves)
		// is read too, for the ends of this infrastructure's ports.
		if _, _, ours := plan.SplitNSName(ns); !ours && ns != plan.CurrentNS && ns != l.HostNS && attachedNS[ns] == nil && netnsExists(ns) {
			attachedNS[ns] = map[string]bool{}
		}
	}
	labPeer := plan.AliasPrefix + "peer=" + plan.InfraNSPrefix(infra)
	for _, ns := range sortedKeys(attachedNS) {
		// A container's namespace: only the vNIC ends of this
		// infrastructure's switch ports are its: those the hints name
		// and, on one machine, every end whose port is in one of the
		// infrastructure's namespaces, so that a vNIC moving between
		// containers, or leaving one, is read whole.
		ends := attachedNS[ns]
		v, err := l.observeNS(ns, shaperHints, func(alias string) bool { return ends[alias] || strings.HasPrefix(alias, labPeer) }, nil)
		if err != nil {
			return nil, err
		}
		views = append(views, v)
		names = append(names, ns)
	}
	var out []plan.Resource
	aEnds := map[string]*vethEnd{}
	var bEnds []vethEnd
	for _, v := range views {
		out = append(out, v.resources...)
		for i := range v.aEnds {
			aEnds[v.aEnds[i].end.NS+"/"+v.aEnds[i].end.Name] = &v.aEnds[i]
		}
		bEnds = append(bEnds, v.bEnds...)
	}
	observedNS := map[string]bool{}
	for _, n := range names {
		observedNS[n] = true
	}
	if readHostNS {
		observedNS[l.HostNS] = true
	}
	for _, b := range joinVethEnds(aEnds, bEnds) {
		peerNS, peerName, _ := strings.Cut(b.peer, "/")
		if links, ok := scope.Links(peerNS); !ok || links != nil && !links[peerName] {
			continue // its first end was not read
		}
		if r, ok := strandedEnd(b, observedNS); ok {
			out = append(out, r)
		}
	}
	keys := make([]string, 0, len(aEnds))
	for k := range aEnds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, *aEnds[k].r)
	}
	out = append(out, l.observeOffloads(hints)...)
	out = deviceMTUs(out, hints)
	var cgroups []plan.Resource
	if scope.Full() {
		cgroups = l.observeCgroups(infra)
	} else {
		// A VM's cgroup can outlive its namespace (a kill between the two
		// deletions): read it for every namespace in scope.
		var whole []string
		for _, ns := range scope.Names() {
			if links, _ := scope.Links(ns); links == nil {
				whole = append(whole, ns)
			}
		}
		cgroups = l.observeCgroupsOf(infra, whole)
	}
	if l.OnlyStore != "" {
		cgroups = ofNamespaces(cgroups, names)
	}
	return append(out, cgroups...), nil
}

// observeWorkers is how many namespaces are read at once: enough to keep
// a small machine's cores busy while the others wait on the kernel.
const observeWorkers = 3

// forEachParallel runs fn for 0..n-1 on up to workers goroutines and
// returns the error of the lowest index that failed.
func forEachParallel(n, workers int, fn func(i int) error) error {
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// nsObservation is what one namespace holds: its resources, and the veth
// ends to join across namespaces.
type nsObservation struct {
	resources []plan.Resource
	aEnds     []vethEnd
	bEnds     []vethEnd
	bridged   bool // it holds a bridge, vnet's or not
}

// observeNS reads one namespace. keep, when set, picks the links to read
// by their alias: the namespace is not vnet's own (a host agent's), so it
// has no netns resource either. only, when set, picks them by name: then
// the namespace's settings are not read, only its mark.
func (l *Linux) observeNS(ns string, shaperHints map[string]plan.Resource, keep func(alias string) bool, only map[string]bool) (nsObservation, error) {
	var v nsObservation
	// The namespace's own settings are read where the whole namespace is,
	// in the entry into it that opens its handle, and only of a namespace
	// of vnet's own (keep nil), whose netns resource holds them: a
	// container's are its runtime's. Not reading them matters beyond this
	// read: the first look at a namespace's /proc/sys/net leaves the kernel
	// one more entry of that name to compare every later lookup with
	// (procSysNet), so reading every container's made each ADD slower as
	// containers piled up, and every other process's lookups too.
	var sysctls string
	ownSysctls := keep == nil
	nsSysctlsRead := ownSysctls && only == nil
	if nsSysctlsRead {
		if err := l.inNSOpening(ns, func() (err error) {
			sysctls, err = readSysctlsHere(ns, "", plan.NamespaceSysctlSet(ns))
			return err
		}); err != nil {
			return v, err
		}
	}
	h, err := l.handle(ns)
	if err != nil {
		return v, err
	}
	var links []netlink.Link
	var ports map[int]rtnl.PortFlags
	var addrsOf map[int][]netlink.Addr
	byIndex := map[int]string{}
	if only != nil && len(only) <= fewLinks {
		// A few links of a namespace that may hold thousands (a host's,
		// with its virtual networks): each asked for by name.
		var masters map[int]string
		if links, masters, ports, err = l.linksNamed(ns, only); err != nil {
			return v, fmt.Errorf("ip -n %s link show: %w", ns, err)
		}
		for i, name := range masters {
			byIndex[i] = name
		}
		if addrsOf, err = l.addrsOfLinks(ns, links); err != nil {
			return v, fmt.Errorf("ip -n %s addr show: %w", ns, err)
		}
	} else {
		if links, ports, err = l.linkList(ns); err != nil {
			return v, fmt.Errorf("ip -n %s link show: %w", ns, err)
		}
		addrs, err := rtnl.RetryDump(func() ([]netlink.Addr, error) { return h.AddrList(nil, netlink.FAMILY_ALL) })
		if err != nil {
			return v, fmt.Errorf("ip -n %s addr show: %w", ns, err)
		}
		addrsOf = map[int][]netlink.Addr{}
		for _, a := range addrs {
			addrsOf[a.LinkIndex] = append(addrsOf[a.LinkIndex], a)
		}
	}
	qdiscsOf, err := l.qdiscsOfNS(ns, links, keep, only)
	if err != nil {
		return v, err
	}
	byName := map[string]int{}
	var bridges []string
	networkBridges := map[string]bool{}
	for _, link := range links {
		v.bridged = v.bridged || link.Type() == "bridge"
		byIndex[link.Attrs().Index] = link.Attrs().Name
		byName[link.Attrs().Name] = link.Attrs().Index
		if _, mine := strings.CutPrefix(link.Attrs().Alias, plan.AliasPrefix); mine && link.Type() == "bridge" && (only == nil || only[link.Attrs().Name]) {
			bridges = append(bridges, link.Attrs().Name)
			if isNetworkOwner(strings.TrimPrefix(link.Attrs().Alias, plan.AliasPrefix)) {
				networkBridges[link.Attrs().Name] = true
			}
		}
	}
	bridgeSysctls := map[string]string{}
	if len(bridges) > 0 {
		var text string
		if text, bridgeSysctls, err = readNamespaceSysctls(ns, bridges, networkBridges, ownSysctls && !nsSysctlsRead); err != nil {
			return v, err
		}
		if !nsSysctlsRead {
			sysctls = text
		}
	}
	if keep == nil {
		mark := loopbackAlias(links)
		l.noteHandleMark(ns, mark)
		v.resources = append(v.resources, plan.Resource{Kind: plan.KindNetns, Name: ns, Sysctls: sysctls, Mark: mark})
	}
	entries := &neighDumps{h: h}
	if only != nil && len(only) <= fewLinks {
		if entries.perLink, err = l.routeSocket(ns); err != nil {
			return v, err
		}
	}
	foreign := map[string]bool{} // ns/name of others' links, where keep tells them apart
	for _, link := range links {
		attrs := link.Attrs()
		owner, mine := strings.CutPrefix(attrs.Alias, plan.AliasPrefix)
		if !mine || attrs.Name == "lo" { // lo's alias is the namespace's mark
			continue
		}
		if keep != nil && !keep(attrs.Alias) {
			foreign[ns+"/"+attrs.Name] = true
			continue
		}
		if only != nil && !only[attrs.Name] {
			continue
		}
		switch {
		case plan.IsDeviceAlias(attrs.Alias):
			v.resources = append(v.resources, observeDevice(link, ns, byIndex[attrs.MasterIndex], owner, ports[attrs.Index].Isolated))
		case link.Type() == "vxlan":
			rs, err := observeVxlan(entries, link, ns, byIndex[attrs.MasterIndex], owner, ports[attrs.Index])
			if err != nil {
				return v, err
			}
			v.resources = append(v.resources, rs...)
		case link.Type() == "bridge":
			r := plan.Resource{Kind: plan.KindBridge, NS: ns, Name: attrs.Name,
				MAC: attrs.HardwareAddr.String(), MTU: attrs.MTU, Sysctls: bridgeSysctls[attrs.Name], Owner: owner}
			if isNetworkOwner(owner) {
				r.Isolate = !hasIPv6(addrsOf[attrs.Index])
				neighs, err := observeNeighs(entries, link, ns)
				if err != nil {
					return v, err
				}
				v.resources = append(v.resources, neighs...)
			}
			v.resources = append(v.resources, r)
		case link.Type() == "veth":
			end := plan.End{NS: ns, Name: attrs.Name, MAC: attrs.HardwareAddr.String(), MTU: attrs.MTU, Master: byIndex[attrs.MasterIndex],
				Down: attrs.Flags&net.FlagUp == 0}
			if end.Master != "" {
				end.Isolated = ports[attrs.Index].Isolated
			}
			e := vethEnd{end: end, index: attrs.Index, peerIndex: attrs.ParentIndex}
			if pns, pname, ok := parsePeerAlias(attrs.Alias); ok {
				e.peer = pns + "/" + pname
				v.bEnds = append(v.bEnds, e)
			} else {
				e.r = &plan.Resource{Kind: plan.KindVeth, A: end, Owner: owner}
				v.aEnds = append(v.aEnds, e)
			}
		}
		if !plan.IsDeviceAlias(attrs.Alias) { // a real device's addresses are the machine's
			v.resources = append(v.resources, linkAddrs(addrsOf[attrs.Index], ns, attrs.Name)...)
		}
		qs := qdiscsOf[attrs.Index]
		v.resources = append(v.resources, observeTC(h, link, ns, qs, shaperHints)...)
		if hasIngress(qs) {
			v.resources = append(v.resources, observeSteer(h, link, ns, byName)...)
			v.resources = append(v.resources, observePortProg(h, link, ns)...)
			v.resources = append(v.resources, observeLB(h, link, ns)...)
		}
	}
	v.bEnds = withoutPeersOf(v.bEnds, foreign)
	return v, nil
}

// withoutPeersOf leaves out the second ends whose first end is one of the
// foreign links. In a namespace shared with other infrastructures, a
// second end's alias names only its first end's namespace and name, which
// another infrastructure's pair may share with one this infrastructure
// wants: that pair is the other's, whose first end says so, and taking
// its second end for a stranded one of ours would delete it.
func withoutPeersOf(bEnds []vethEnd, foreign map[string]bool) []vethEnd {
	if len(foreign) == 0 {
		return bEnds
	}
	out := bEnds[:0]
	for _, b := range bEnds {
		if !foreign[b.peer] {
			out = append(out, b)
		}
	}
	return out
}

// fewLinks is how many links of a namespace a scoped observation asks the
// kernel for one by one rather than in one dump of the namespace. A host
// that carries thousands of virtual networks holds three links per network
// in one namespace; a change to one network names a few of them, and a dump
// would read, and this process decode, every other one each time.
const fewLinks = 64

// linksNamed reads the named links of a namespace, and lo (which holds the
// namespace's mark), one request each (rtnl.LinksNamed).
func (l *Linux) linksNamed(ns string, names map[string]bool) ([]netlink.Link, map[int]string, map[int]rtnl.PortFlags, error) {
	sock, err := l.routeSocket(ns)
	if err != nil {
		return nil, nil, nil, err
	}
	wanted := sortedKeys(names)
	if !names["lo"] {
		wanted = append(wanted, "lo")
	}
	return rtnl.LinksNamed(sock, wanted)
}

// addrsOfLinks reads the addresses of some links of a namespace, each
// link's alone (rtnl.AddrsOfLinks).
func (l *Linux) addrsOfLinks(ns string, links []netlink.Link) (map[int][]netlink.Addr, error) {
	sock, err := l.routeSocket(ns)
	if err != nil {
		return nil, err
	}
	return rtnl.AddrsOfLinks(sock, links)
}

// linkList lists a namespace's links, with their bridge-port settings,
// from one dump (rtnl.Links).
func (l *Linux) linkList(ns string) ([]netlink.Link, map[int]rtnl.PortFlags, error) {
	sock, err := l.routeSocket(ns)
	if err != nil {
		return nil, nil, err
	}
	return rtnl.Links(sock)
}

// linkIsolated reports whether a bridge port is isolated.
// Equivalent to: bridge -n NS -d link show dev LINK
func (l *Linux) linkIsolated(ns string, index int) (bool, error) {
	sock, err := l.routeSocket(ns)
	if err != nil {
		return false, err
	}
	f, err := rtnl.PortFlagsOf(sock, index)
	if err != nil {
		return false, fmt.Errorf("in %s: %w", ns, err)
	}
	return f.Isolated, nil
}

// qdiscsOfLinks reads the root and ingress qdiscs of a few links of a
// namespace, each link's alone (rtnl.QdiscsOfLinks): false when the
// namespace's dump must be read instead.
func (l *Linux) qdiscsOfLinks(ns string, links []netlink.Link) (map[int][]netlink.Qdisc, bool, error) {
	sock, err := l.routeSocket(ns)
	if err != nil {
		return nil, false, err
	}
	return rtnl.QdiscsOfLinks(sock, links)
}

// qdiscsOfNS reads the qdiscs of a namespace's links that observeNS
// reports (keep and only pick them as there), by link index.
func (l *Linux) qdiscsOfNS(ns string, links []netlink.Link, keep func(alias string) bool, only map[string]bool) (map[int][]netlink.Qdisc, error) {
	if only == nil {
		return l.qdiscsOf(ns, nil)
	}
	read := []netlink.Link{}
	for _, link := range links {
		a := link.Attrs()
		if strings.HasPrefix(a.Alias, plan.AliasPrefix) && a.Name != "lo" && only[a.Name] && (keep == nil || keep(a.Alias)) {
			read = append(read, link)
		}
	}
	return l.qdiscsOf(ns, read)
}

// qdiscsOf reads the qdiscs of some links of a namespace (nil: all), by
// link index: those links' alone when they are few, else the whole
// namespace's in one dump (see qdiscsOfLinks).
func (l *Linux) qdiscsOf(ns string, links []netlink.Link) (map[int][]netlink.Qdisc, error) {
	if links != nil && len(links) <= fewLinks {
		qs, ok, err := l.qdiscsOfLinks(ns, links)
		if err != nil {
			return nil, fmt.Errorf("tc -n %s qdisc show: %w", ns, err)
		}
		if ok {
			return qs, nil
		}
	}
	h, err := l.handle(ns)
	if err != nil {
		return nil, err
	}
	qdiscs, err := rtnl.RetryDump(func() ([]netlink.Qdisc, error) { return h.QdiscList(nil) })
	if err != nil {
		return nil, fmt.Errorf("tc -n %s qdisc show: %w", ns, err)
	}
	out := map[int][]netlink.Qdisc{}
	for _, q := range qdiscs {
		out[q.Attrs().LinkIndex] = append(out[q.Attrs().LinkIndex], q)
	}
	return out, nil
}

// hasIngress reports whether a link has the qdisc that ingress filters,
// steering programs among them, hang from.
func hasIngress(qs []netlink.Qdisc) bool {
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_CLSACT {
			return true
		}
	}
	return false
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
// frees the switch port's name. It returns the second ends it found no
// first end for.
func joinVethEnds(aEnds map[string]*vethEnd, bEnds []vethEnd) (unjoined []vethEnd) {
	for _, b := range bEnds {
		if a, ok := aEnds[b.peer]; ok {
			a.r.B = b.end
			continue
		}
		ns, _, _ := strings.Cut(b.peer, "/")
		joined := false
		for _, a := range aEnds {
			if a.end.NS == ns && a.r.B.Name == "" && a.index == b.peerIndex && a.peerIndex == b.index {
				a.r.B = b.end
				joined = true
				break
			}
		}
		if !joined {
			unjoined = append(unjoined, b)
		}
	}
	return unjoined
}

// strandedEnd returns, as a pair of its own to delete, a second end whose
// first end is gone from the namespace the alias names: that namespace was
// read and lacks it (the end was moved out of vnet's namespaces), or it is
// no longer a named namespace at all. The kernel tears down an unmounted
// namespace, and the pairs with an end in it, some time after the unmount;
// until then the second end holds its port's name, and what the plan
// reads on that name (offloads, addresses) belongs to a device on its way
// out, not to the pair the plan will make. A first end in a namespace that
// exists but was not read is some other reader's (another host's agent).
func strandedEnd(b vethEnd, observedNS map[string]bool) (plan.Resource, bool) {
	ns, _, _ := strings.Cut(b.peer, "/")
	if !observedNS[ns] && netnsExists(ns) {
		return plan.Resource{}, false
	}
	return plan.Resource{Kind: plan.KindVeth, A: b.end, Owner: "stranded: its other end " + b.peer + " is gone"}, true
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

// linkAddrs are the addresses of a link as resources, without the
// kernel's own IPv6 link-local ones.
func linkAddrs(addrs []netlink.Addr, ns, link string) []plan.Resource {
	var out []plan.Resource
	for _, a := range addrs {
		if a.Scope == unix.RT_SCOPE_LINK || a.IP.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, plan.Resource{Kind: plan.KindAddr, NS: ns, Link: link, CIDR: (&net.IPNet{IP: a.IP, Mask: a.Mask}).String()})
	}
	return out
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
	for _, name := range l.cgroups().List("vnet/" + infra) {
		milli, cpus, ok := l.cgroups().Read(name)
		if ok {
			out = append(out, plan.Resource{Kind: plan.KindCgroup, Name: name, CPUMilli: milli, CPUs: cpus, Mark: l.cgroups().Mark(name)})
		}
	}
	return out
}

// observeCgroupsOf reads the cgroups of the VMs whose namespaces are
// named, where they have one.
func (l *Linux) observeCgroupsOf(infra string, namespaces []string) []plan.Resource {
	var out []plan.Resource
	for _, ns := range namespaces {
		in, node, ok := plan.SplitNSName(ns)
		if !ok || in != infra {
			continue
		}
		name := plan.CgroupName(infra, node)
		if milli, cpus, ok := l.cgroups().Read(name); ok {
			out = append(out, plan.Resource{Kind: plan.KindCgroup, Name: name, CPUMilli: milli, CPUs: cpus, Mark: l.cgroups().Mark(name)})
		}
	}
	return out
}

// Cgroups returns the cgroup driver, for exec.
func (l *Linux) Cgroups() *Cgroups { return l.cgroups() }

// readNamespaceSysctls reads vnet's settings of a namespace's bridges,
// and of the namespace when withNS, entering it once. Of the bridges of
// virtual networks (networkBridges) it reads whether IPv6 is off
// (plan.BridgeIPv6Off); on a kernel without IPv6 it is.
func readNamespaceSysctls(ns string, bridges []string, networkBridges map[string]bool, withNS bool) (string, map[string]string, error) {
	var text string
	byBridge := map[string]string{}
	err := inNS(ns, func() error {
		var err error
		if withNS {
			if text, err = readSysctlsHere(ns, "", plan.NamespaceSysctlSet(ns)); err != nil {
				return err
			}
		}
		dirs := procSysDirs{}
		defer dirs.close()
		for _, b := range bridges {
			if byBridge[b], err = readSysctlsHere(ns, bridgeConf(b), plan.BridgeSysctls); err != nil {
				return err
			}
			if !networkBridges[b] {
				continue
			}
			off, err := readBridgeIPv6Off(dirs, b)
			if err != nil {
				return fmt.Errorf("netns %s: read sysctl %s: %w", ns, strings.ReplaceAll(bridgeIPv6(b), "/", "."), err)
			}
			if off {
				byBridge[b] += " " + plan.BridgeIPv6Off
			}
		}
		return nil
	})
	return text, byBridge, err
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

// attachedNamespaces finds, among the hints, the vNICs that go into
// namespaces vnet does not own (attach: netns), and returns per namespace
// the aliases their ends carry.
func attachedNamespaces(infra string, hints []plan.Resource) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, r := range hints {
		if r.Kind != plan.KindVeth || strings.HasPrefix(r.B.NS, plan.InfraNSPrefix(infra)) || r.B.NS == r.A.NS ||
			!plan.OwnedBy(ownerAlias(r.Owner), infra) || !netnsExists(r.B.NS) {
			continue
		}
		if out[r.B.NS] == nil {
			out[r.B.NS] = map[string]bool{}
		}
		out[r.B.NS][peerAlias(r.A)] = true
	}
	return out
}

// deviceMTUs leaves out the MTU of observed devices whose resource leaves
// it as found: a device's MTU is the spec's to set only when it says so.
func deviceMTUs(observed, hints []plan.Resource) []plan.Resource {
	leave := map[string]bool{}
	for _, r := range hints {
		if r.Kind == plan.KindDevice && r.MTU == 0 {
			leave[r.Key()] = true
		}
	}
	for i, r := range observed {
		if r.Kind == plan.KindDevice && leave[r.Key()] {
			observed[i].MTU = 0
		}
	}
	return observed
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
