package nft

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vnet-project/vnet/internal/dataplane/feature"
	"github.com/vnet-project/vnet/internal/plan"
)

// The firewall of a host namespace (plan.KindFirewall) is nftables' table
// "bridge vnet" with two base chains, and for stateful ACLs the table
// "inet vnet":
//
//	table bridge vnet {
//	  map guard   { type ifname : verdict; elements = { PORT : jump PORT-guard, ... } }
//	  map egress  { type ifname : verdict; elements = { PORT : jump PORT-egress, ... } }
//	  map ingress { type ifname : verdict; elements = { PORT : jump PORT-ingress, ... } }
//	  chain prerouting { type filter hook prerouting priority -200; iifname vmap @guard }
//	  chain forward    { type filter hook forward priority -200; iifname vmap @egress; oifname vmap @ingress }
//	  chain PORT-guard { ... } ...
//	}
//	table inet vnet {
//	  chain conntrack { type filter hook prerouting priority -150; ct state established,related meta mark set mark | 0x10000000 }
//	}
//
// The bridge family cannot read conntrack state without nf_conntrack_bridge
// (not in every kernel, and nftables refuses "ct" in a bridge table
// without it). br_netfilter instead passes bridged IP packets through the
// namespace's IP hooks while the bridge's prerouting runs, so conntrack
// sees them there and the inet table marks known connections; the
// bridge's forward chain, which runs after, reads the mark.
//
// A frame finds its ports' chains by one map lookup per base chain rule,
// whatever the number of ports: the bridge runs the forward chain once for
// each port a flooded frame goes out of, and a list of a jump rule per
// port made each of those runs walk every port's rules. Port chains end in
// return or drop, never accept, so the egress chain of the port a frame
// came in on runs before the ingress chain of the port it goes out of, and
// a frame either chain drops is dropped.
//
// Each port's elements carry the comment "port PORT DIGEST rules=N
// jumps=J": the digest of its policy's text, how many rules its chains
// hold and how many elements it has, so that observation reads back what
// is realized and notices elements or rules deleted or added behind vnet's
// back. Equivalent to nft(8) commands throughout; nothing here runs nft.
const (
	fwTable        = "vnet"
	preChain       = "prerouting"
	fwdChain       = "forward"
	conntrackChain = "conntrack"
	portTag        = "port "
)

// portLookups are the base chains' rules: each looks the frame's port up
// in a map of one kind of port chain, in this order.
var portLookups = []struct {
	base string
	key  expr.MetaKey
	kind string
}{
	{preChain, expr.MetaKeyIIFNAME, guardChain},
	{fwdChain, expr.MetaKeyIIFNAME, egressChain},
	{fwdChain, expr.MetaKeyOIFNAME, ingressChain},
}

// lookupComment marks a base chain's lookup rule; it does not begin with
// portTag, which marked the jump rule of each port before the maps.
func lookupComment(kind string) string { return "to the ports' " + kind + " chains" }

// portMap is a table's map of ports to their chains of one kind, named by
// the kind.
func portMap(table *nftables.Table, kind string) *nftables.Set {
	return &nftables.Set{Table: table, Name: kind, IsMap: true, KeyType: nftables.TypeIFName, DataType: nftables.TypeVerdict}
}

// portElement is a port's element of a map of kind; comment only when it
// is added.
func portElement(port, kind, comment string) nftables.SetElement {
	e := nftables.SetElement{Key: ifname(port)}
	if comment != "" {
		e.VerdictData = &expr.Verdict{Kind: expr.VerdictJump, Chain: portChain(port, kind)}
		e.Comment = comment
	}
	return e
}

// TableName names a firewall's tables by its resource: "vnet" in a namespace of
// vnet's own, the infrastructure's (plan.FirewallTable) in a host's own
// namespace, which the machine and other infrastructures share.
func TableName(name string) string {
	if name == "" {
		return fwTable
	}
	return name
}

func bridgeTableOf(name string) *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyBridge, Name: TableName(name)}
}

func inetTableOf(name string) *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyINet, Name: TableName(name)}
}

// isVnetTable reports whether a table is one of vnet's firewalls, of any
// infrastructure.
func isVnetTable(name string) bool { return name == fwTable || strings.HasPrefix(name, fwTable+"-") }

// Firewalls realizes and reads back the firewalls of namespaces and their
// ports' policies. It keeps, for the life of a command (or of an agent),
// an nftables socket per namespace it changes and what the last
// observation read of the port maps. Its methods may be called from
// several goroutines.
type Firewalls struct {
	open    func(ns string) (netns.NsHandle, error)
	hostOff func(ns string) string

	jumps seenJumps // of the firewalls the last observation read

	mu    sync.Mutex
	socks map[string]*lastingConn
}

// lastingConn is a namespace's nftables socket for changes, kept open:
// closing a socket right after a commit waits for the kernel to free the
// commit's old objects (an RCU grace period, ~10 ms), once per port
// otherwise. mu makes each change one transaction.
type lastingConn struct {
	mu sync.Mutex
	c  *nftables.Conn
}

// New returns the firewalls of the namespaces open reaches by name (the
// caller closes the handle it returns). hostOff says of a host's own
// namespace how its br_netfilter settings differ from what a stateful
// firewall there needs, "" when they do not: observation then reports the
// firewall as not quite stateful, so that the next apply sets them.
func New(open func(ns string) (netns.NsHandle, error), hostOff func(ns string) string) *Firewalls {
	return &Firewalls{open: open, hostOff: hostOff, socks: map[string]*lastingConn{}}
}

// ForgetReads forgets what observations read: one begins.
func (f *Firewalls) ForgetReads() { f.jumps.reset() }

// Forget closes the namespace's socket and forgets what was read of its
// firewalls: the namespace is gone, or another one has its name.
func (f *Firewalls) Forget(ns string) {
	f.CloseSocket(ns)
	f.jumps.drop(ns, "")
}

// CloseSocket closes the namespace's socket, if one is open.
func (f *Firewalls) CloseSocket(ns string) {
	f.mu.Lock()
	lc, ok := f.socks[ns]
	delete(f.socks, ns)
	f.mu.Unlock()
	if ok {
		lc.mu.Lock()
		lc.close()
		lc.mu.Unlock()
	}
}

// Close closes every namespace's socket.
func (f *Firewalls) Close() {
	f.mu.Lock()
	names := slices.Collect(maps.Keys(f.socks))
	f.mu.Unlock()
	for _, ns := range names {
		f.CloseSocket(ns)
	}
}

func (lc *lastingConn) close() {
	if lc.c != nil {
		_ = lc.c.CloseLasting()
		lc.c = nil
	}
}

// nftIn runs fn with an nftables connection into the namespace.
func (f *Firewalls) nftIn(ns string, fn func(c *nftables.Conn) error) error {
	h, err := f.open(ns)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", ns, err)
	}
	defer h.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(h)), nftables.WithSockOptions(largeBuffers))
	if err != nil {
		return fmt.Errorf("nftables in %s: %w", ns, err)
	}
	return fn(c)
}

// nftChange runs fn, which queues one transaction and flushes it, on the
// namespace's lasting nftables socket. A failed change closes the socket,
// so that nothing of it is left to confuse the next.
func (f *Firewalls) nftChange(ns string, fn func(c *nftables.Conn) error) error {
	f.mu.Lock()
	lc, ok := f.socks[ns]
	if !ok {
		lc = &lastingConn{}
		f.socks[ns] = lc
	}
	f.mu.Unlock()
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.c == nil {
		h, err := f.open(ns)
		if err != nil {
			return fmt.Errorf("open netns %s: %w", ns, err)
		}
		defer h.Close()
		if lc.c, err = nftables.New(nftables.AsLasting(), nftables.WithNetNSFd(int(h)), nftables.WithSockOptions(largeBuffers)); err != nil {
			lc.c = nil
			return fmt.Errorf("nftables in %s: %w", ns, err)
		}
	}
	if err := fn(lc.c); err != nil {
		lc.close()
		return err
	}
	return nil
}

// nftLastingIn is nftIn with one socket for all of fn's requests.
func (f *Firewalls) nftLastingIn(ns string, fn func(c *nftables.Conn) error) error {
	h, err := f.open(ns)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", ns, err)
	}
	defer h.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(h)), nftables.AsLasting(), nftables.WithSockOptions(largeBuffers))
	if err != nil {
		return fmt.Errorf("nftables in %s: %w", ns, err)
	}
	defer c.CloseLasting()
	return fn(c)
}

// largeBuffers lets a port's transaction go in whole: it is sent as one
// message (a policy of a thousand ACL rules is over the default send
// buffer: EMSGSIZE), and the kernel acknowledges each of its rules, sets
// and elements, which overflow the default receive buffer (ENOBUFS) before
// the first acknowledgement is read. Memory is charged only as used.
func largeBuffers(c *netlink.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = errors.Join(unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20),
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 64<<20))
	}); err != nil {
		return err
	}
	return serr
}

// addBaseChains queues the bridge table and its base chains; adding what
// exists changes nothing.
func addBaseChains(c *nftables.Conn, bridgeTable *nftables.Table) (pre, fwd *nftables.Chain) {
	c.AddTable(bridgeTable)
	prio := nftables.ChainPriorityRef(-200) // the bridge family's filter priority
	pre = c.AddChain(&nftables.Chain{Name: preChain, Table: bridgeTable, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: prio})
	fwd = c.AddChain(&nftables.Chain{Name: fwdChain, Table: bridgeTable, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: prio})
	return pre, fwd
}

// addPortMaps queues the bridge table's port maps, by kind; adding what
// exists changes nothing and keeps its elements.
func addPortMaps(c *nftables.Conn, bridgeTable *nftables.Table) (map[string]*nftables.Set, error) {
	out := map[string]*nftables.Set{}
	for _, kind := range portChains {
		m := portMap(bridgeTable, kind)
		if err := c.AddSet(m, nil); err != nil {
			return nil, fmt.Errorf("nft add map bridge %s %s: %w", bridgeTable.Name, kind, err)
		}
		out[kind] = m
	}
	return out, nil
}

// EnsureFirewall makes the host's tables, with the conntrack table when
// the firewall is stateful and without it otherwise, and makes the base
// chains hold the port maps' lookups and nothing else.
// Equivalent to: nft add table bridge vnet; nft add map bridge vnet guard { type ifname : verdict; } ...;
// nft add chain bridge vnet prerouting { type filter hook prerouting priority -200; }; nft flush chain ...;
// nft add rule bridge vnet prerouting iifname vmap @guard ...
// A table an earlier vnet made holds a jump rule per port in its base
// chains instead: their ports go into the maps in the same transaction,
// so that no port is without its policy meanwhile.
// In a host's own namespace, a stateful firewall also needs br_netfilter's
// IP hooks on for bridged traffic: the caller sets them first.
func (f *Firewalls) EnsureFirewall(r plan.Resource) error {
	bridgeTable, inetTable := bridgeTableOf(r.Name), inetTableOf(r.Name)
	made := false
	defer func() {
		f.jumps.drop(r.NS, bridgeTable.Name)
		if made {
			f.jumps.fresh(r.NS, bridgeTable.Name)
		}
	}()
	return f.nftChange(r.NS, func(c *nftables.Conn) error {
		tables, err := c.ListTables()
		if err != nil {
			return fmt.Errorf("nft -n %s list tables: %w", r.NS, err)
		}
		_, hadBridge := findTable(tables, bridgeTable)
		_, hasInet := findTable(tables, inetTable)
		var carried map[string][]nftables.SetElement
		if hadBridge {
			if carried, err = f.jumpsAsElements(c, r.NS, bridgeTable); err != nil {
				return err
			}
		}
		pre, fwd := addBaseChains(c, bridgeTable)
		maps, err := addPortMaps(c, bridgeTable)
		if err != nil {
			return err
		}
		c.FlushChain(pre)
		c.FlushChain(fwd)
		for _, lk := range portLookups {
			base := pre
			if lk.base == fwdChain {
				base = fwd
			}
			m := maps[lk.kind]
			c.AddRule(&nftables.Rule{Table: bridgeTable, Chain: base, UserData: comment(lookupComment(lk.kind)), Exprs: []expr.Any{
				&expr.Meta{Key: lk.key, Register: 1},
				&expr.Lookup{SourceRegister: 1, DestRegister: 0, IsDestRegSet: true, SetName: m.Name, SetID: m.ID}}})
		}
		for _, kind := range portChains {
			if len(carried[kind]) > 0 {
				if err := c.SetAddElements(maps[kind], carried[kind]); err != nil {
					return fmt.Errorf("nft add element bridge %s %s: %w", bridgeTable.Name, kind, err)
				}
			}
		}
		switch {
		case r.Match == plan.FirewallStateful:
			c.AddTable(inetTable)
			ch := c.AddChain(&nftables.Chain{Name: conntrackChain, Table: inetTable, Type: nftables.ChainTypeFilter,
				Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRef(-150)})
			c.FlushChain(ch)
			c.AddRule(&nftables.Rule{Table: inetTable, Chain: ch, Exprs: markEstablished(), UserData: comment("established or related: the ACLs let it through")})
		case hasInet:
			c.DelTable(inetTable)
		}
		if err := c.Flush(); err != nil {
			return nftErr(r.NS, "add table bridge "+bridgeTable.Name, err)
		}
		made = !hadBridge
		return nil
	})
}

// jumpsAsElements reads the jump rules an earlier vnet put in the base
// chains, one per port and kind of chain, as the port maps' elements that
// take their place, by kind. Each element carries the comment of its
// port's first jump, which told the policy's digest and counts.
func (f *Firewalls) jumpsAsElements(c *nftables.Conn, ns string, bridgeTable *nftables.Table) (map[string][]nftables.SetElement, error) {
	type jump struct{ port, kind string }
	var jumps []jump
	comments := map[string]string{}
	for _, base := range []string{preChain, fwdChain} {
		// Notes first: they tell a missing chain apart, and a table of
		// maps needs no rule decoded.
		notes, err := f.chainNotes(ns, bridgeTable, base)
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("nft -n %s list chain bridge %s %s: %w", ns, bridgeTable.Name, base, err)
		}
		if !slices.ContainsFunc(notes, func(n ruleNote) bool { p, _, _ := parseJumpComment(n.comment); return p != "" }) {
			continue
		}
		rules, err := c.GetRules(bridgeTable, &nftables.Chain{Name: base, Table: bridgeTable})
		if err != nil {
			return nil, fmt.Errorf("nft -n %s list chain bridge %s %s: %w", ns, bridgeTable.Name, base, err)
		}
		for _, r := range rules {
			text := commentOf(r)
			port, digest, _ := parseJumpComment(text)
			if port == "" {
				continue
			}
			if digest != "" {
				comments[port] = text
			}
			for _, e := range r.Exprs {
				if v, ok := e.(*expr.Verdict); ok && v.Kind == expr.VerdictJump {
					if kind, ok := strings.CutPrefix(v.Chain, port+"-"); ok && slices.Contains(portChains, kind) {
						jumps = append(jumps, jump{port, kind})
					}
				}
			}
		}
	}
	if len(jumps) == 0 {
		return nil, nil
	}
	out := map[string][]nftables.SetElement{}
	for _, j := range jumps {
		text := comments[j.port]
		if text == "" {
			text = portTag + j.port // its digest lost: it reads as stale, and is made again
		}
		out[j.kind] = append(out[j.kind], portElement(j.port, j.kind, text))
	}
	return out, nil
}

// markEstablished: ct state established,related meta mark set meta mark | establishedMark
func markEstablished() []expr.Any {
	ne := binaryutil.NativeEndian.PutUint32
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: ne(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: ne(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ne(0)},
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: ne(^establishedMark), Xor: ne(establishedMark)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	}
}

// RemoveFirewall deletes the host's tables, and with them every port's chains.
// Equivalent to: nft delete table bridge vnet; nft delete table inet vnet
func (f *Firewalls) RemoveFirewall(r plan.Resource) error {
	bridgeTable, inetTable := bridgeTableOf(r.Name), inetTableOf(r.Name)
	defer f.jumps.drop(r.NS, bridgeTable.Name)
	return f.nftChange(r.NS, func(c *nftables.Conn) error {
		tables, err := c.ListTables()
		if err != nil {
			return fmt.Errorf("nft -n %s list tables: %w", r.NS, err)
		}
		for _, t := range []*nftables.Table{bridgeTable, inetTable} {
			if _, ok := findTable(tables, t); ok {
				c.DelTable(t)
			}
		}
		if err := c.Flush(); err != nil {
			return fmt.Errorf("nft -n %s delete table %s: %w", r.NS, bridgeTable.Name, err)
		}
		return nil
	})
}

func findTable(tables []*nftables.Table, want *nftables.Table) (*nftables.Table, bool) {
	for _, t := range tables {
		if t.Name == want.Name && t.Family == want.Family {
			return t, true
		}
	}
	return nil, false
}

// EnsurePortSec (re)writes a port's chains and map elements in one
// nftables transaction: the port is never without its policy, and a
// failure leaves the old one.
// Equivalent to: nft -f - <<< 'delete element bridge vnet guard { PORT }; flush chain bridge vnet PORT-guard;
// add rule bridge vnet PORT-guard ether saddr != MAC counter drop; ...; add element bridge vnet guard { PORT : jump PORT-guard }'
func (f *Firewalls) EnsurePortSec(r plan.Resource) error {
	rules, err := portSecRules(r)
	if err != nil {
		return err
	}
	bridgeTable := bridgeTableOf(r.Name)
	var made []string
	err = f.portChange(r.NS, bridgeTable, r.Link, func(c *nftables.Conn, have []string, existing map[string]bool) error {
		var err error
		if made, err = queuePortSec(c, bridgeTable, r, rules, have, existing); err != nil {
			return err
		}
		if err := c.Flush(); err != nil {
			return nftErr(r.NS, "port security on "+r.Link, err)
		}
		return nil
	})
	f.portChanged(r.NS, bridgeTable.Name, r.Link, made, err == nil)
	return err
}

// portChanged notes a port's elements and chains after a change: one of
// each kind made, or unknown when the change failed.
func (f *Firewalls) portChanged(ns, table, port string, kinds []string, ok bool) {
	var chains []string
	for _, kind := range kinds {
		chains = append(chains, portChain(port, kind))
	}
	f.jumps.changed(ns, table, port, kinds, ok)
	f.jumps.madeChains(ns, table, port, chains, ok)
}

// portSecRules compiles a port security resource's policy.
func portSecRules(r plan.Resource) (map[string][]nftRule, error) {
	if plan.IsDigest(r.Match) {
		return nil, fmt.Errorf("port security on %s in %s: only its digest is known (%s), not the policy: run vnet apply to make it from the spec", r.Link, r.NS, r.Match)
	}
	p, err := plan.ParsePortPolicy(r.Match)
	if err != nil {
		return nil, err
	}
	return compilePolicy(p)
}

// queuePortSec queues, on c, what makes a port's policy rules: its old
// elements (in the maps of the kinds in have) deleted, its chains made or
// emptied (those it no longer needs deleted) and filled, an element for
// each of its chains added. It returns the kinds of the chains it makes.
func queuePortSec(c *nftables.Conn, bridgeTable *nftables.Table, r plan.Resource, rules map[string][]nftRule,
	have []string, existing map[string]bool) ([]string, error) {
	addBaseChains(c, bridgeTable)
	maps, err := addPortMaps(c, bridgeTable)
	if err != nil {
		return nil, err
	}
	for _, kind := range have {
		if err := c.SetDeleteElements(maps[kind], []nftables.SetElement{portElement(r.Link, kind, "")}); err != nil {
			return nil, err
		}
	}
	total := 0
	var made []string
	for _, kind := range portChains {
		name := portChain(r.Link, kind)
		if len(rules[kind]) == 0 {
			if existing[name] {
				ch := &nftables.Chain{Name: name, Table: bridgeTable}
				c.FlushChain(ch)
				c.DelChain(ch)
			}
			continue
		}
		ch := c.AddChain(&nftables.Chain{Name: name, Table: bridgeTable})
		if existing[name] {
			c.FlushChain(ch)
		}
		for _, nr := range rules[kind] {
			if err := addRule(c, bridgeTable, ch, nr); err != nil {
				return nil, err
			}
		}
		total += len(rules[kind])
		made = append(made, kind)
	}
	text := fmt.Sprintf("%s%s %s rules=%d jumps=%d", portTag, r.Link, plan.SteerDigest(r.Match), total, len(made))
	for _, kind := range made {
		if err := c.SetAddElements(maps[kind], []nftables.SetElement{portElement(r.Link, kind, text)}); err != nil {
			return nil, err
		}
	}
	return made, nil
}

// EnsurePortSecs makes the policies of several ports of one firewall in
// one transaction, where each port's elements and chains are known without
// asking the kernel (a table this command made, ports not changed since):
// a first apply's thousand ports in a few commits rather than one each,
// and the kernel checks the whole table at each commit. It returns
// ErrNotBatched, having changed nothing, when some port's state is not
// known or the transaction failed: then each port is made on its own, whose
// error names the port.
func (f *Firewalls) EnsurePortSecs(rs []plan.Resource) error {
	ns, table := rs[0].NS, rs[0].Name
	bridgeTable := bridgeTableOf(table)
	type port struct {
		r        plan.Resource
		rules    map[string][]nftRule
		have     []string
		existing map[string]bool
		made     []string
	}
	ports := make([]port, 0, len(rs))
	for _, r := range rs {
		if r.NS != ns || r.Name != table {
			return ErrNotBatched
		}
		rules, err := portSecRules(r)
		if err != nil {
			return ErrNotBatched
		}
		have, ok := f.jumps.of(ns, table, r.Link)
		if !ok {
			return ErrNotBatched
		}
		existing, ok := f.jumps.chainsOf(ns, table, r.Link)
		if !ok {
			return ErrNotBatched
		}
		ports = append(ports, port{r: r, rules: rules, have: have, existing: existing})
	}
	err := f.nftChange(ns, func(c *nftables.Conn) error {
		for i := range ports {
			p := &ports[i]
			var err error
			if p.made, err = queuePortSec(c, bridgeTable, p.r, p.rules, p.have, p.existing); err != nil {
				return err
			}
		}
		return c.Flush()
	})
	if err != nil {
		return ErrNotBatched
	}
	for _, p := range ports {
		f.portChanged(ns, table, p.r.Link, p.made, true)
	}
	return nil
}

// ErrNotBatched says a batch was not made together and nothing of it was.
var ErrNotBatched = errors.New("not made together")

// addRule queues one compiled rule, with the anonymous sets it looks up.
func addRule(c *nftables.Conn, bridgeTable *nftables.Table, ch *nftables.Chain, nr nftRule) error {
	var exprs []expr.Any
	for _, m := range nr.matches {
		exprs = append(exprs, m.exprs...)
		if m.set == nil {
			continue
		}
		set := &nftables.Set{Table: bridgeTable, Anonymous: true, Constant: true, KeyType: m.key}
		elems := make([]nftables.SetElement, len(m.set))
		for i, k := range m.set {
			elems[i] = nftables.SetElement{Key: k}
		}
		if err := c.AddSet(set, elems); err != nil {
			return fmt.Errorf("nft add set: %w", err)
		}
		exprs = append(exprs, &expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID, Invert: m.invert})
	}
	if nr.label != "" {
		exprs = append(exprs, &expr.Counter{})
	}
	exprs = append(exprs, &expr.Verdict{Kind: nr.verdict})
	r := &nftables.Rule{Table: bridgeTable, Chain: ch, Exprs: exprs}
	if nr.label != "" {
		r.UserData = comment(nr.label)
	}
	c.AddRule(r)
	return nil
}

// RemovePortSec deletes a port's map elements and chains.
// Equivalent to: nft delete element bridge vnet guard { PORT } ...; nft delete chain bridge vnet PORT-guard ...
func (f *Firewalls) RemovePortSec(r plan.Resource) error {
	bridgeTable := bridgeTableOf(r.Name)
	err := f.portChange(r.NS, bridgeTable, r.Link, func(c *nftables.Conn, have []string, existing map[string]bool) error {
		if len(existing) == 0 && len(have) == 0 {
			return nil
		}
		for _, kind := range have {
			if err := c.SetDeleteElements(portMap(bridgeTable, kind), []nftables.SetElement{portElement(r.Link, kind, "")}); err != nil {
				return err
			}
		}
		for name := range existing {
			ch := &nftables.Chain{Name: name, Table: bridgeTable}
			c.FlushChain(ch)
			c.DelChain(ch)
		}
		if err := c.Flush(); err != nil {
			return fmt.Errorf("nft -n %s delete port security on %s: %w", r.NS, r.Link, err)
		}
		return nil
	})
	f.portChanged(r.NS, bridgeTable.Name, r.Link, nil, err == nil)
	return err
}

// portChange runs fn, one transaction on a port's policy, with the kinds
// of the maps that hold the port and the port's chains: as the observation
// before read them, or read now when it did not, or when the port changed
// since. Should the transaction fail with elements the observation read,
// it is tried once more with elements read now: the table may have
// changed behind vnet's back meanwhile.
func (f *Firewalls) portChange(ns string, bridgeTable *nftables.Table, port string, fn func(c *nftables.Conn, have []string, chains map[string]bool) error) error {
	if have, ok := f.jumps.of(ns, bridgeTable.Name, port); ok {
		err := f.nftChange(ns, func(c *nftables.Conn) error {
			chains, known := f.jumps.chainsOf(ns, bridgeTable.Name, port)
			if !known {
				var err error
				if chains, err = f.portChainsIn(ns, bridgeTable, port); err != nil {
					return err
				}
			}
			return fn(c, have, chains)
		})
		if err == nil {
			return nil
		}
	}
	return f.nftChange(ns, func(c *nftables.Conn) error {
		have, err := f.portElements(ns, bridgeTable, port)
		if err != nil {
			return err
		}
		chains, err := f.portChainsIn(ns, bridgeTable, port)
		if err != nil {
			return err
		}
		return fn(c, have, chains)
	})
}

// namedChains returns, of the chains a scoped read of a firewall looks at
// (the conntrack chain, the base chains and the wanted ports' chains),
// those that exist, without listing every port's.
func (f *Firewalls) namedChains(ns, table string, wanted map[string]bool) ([]*nftables.Chain, error) {
	var out []*nftables.Chain
	bridgeTable, inetTable := bridgeTableOf(table), inetTableOf(table)
	for _, t := range []struct {
		table *nftables.Table
		names []string
	}{
		{inetTable, []string{conntrackChain}},
		{bridgeTable, append([]string{preChain, fwdChain}, slices.Sorted(maps.Keys(wanted))...)},
	} {
		exist, err := f.chainsIn(ns, t.table, t.names)
		if err != nil {
			return nil, err
		}
		for _, name := range t.names {
			if exist[name] {
				out = append(out, &nftables.Chain{Name: name, Table: t.table})
			}
		}
	}
	return out, nil
}

// portChainsIn returns which of the port's chains exist; none when the
// table does not.
func (f *Firewalls) portChainsIn(ns string, bridgeTable *nftables.Table, port string) (map[string]bool, error) {
	var names []string
	for _, kind := range portChains {
		names = append(names, portChain(port, kind))
	}
	out, err := f.chainsIn(ns, bridgeTable, names)
	if err != nil {
		return nil, fmt.Errorf("nft -n %s list chains bridge: %w", ns, err)
	}
	return out, nil
}

// portElements returns the kinds of the port maps that hold the port; a
// map that does not exist holds none.
func (f *Firewalls) portElements(ns string, bridgeTable *nftables.Table, port string) ([]string, error) {
	conn, err := f.netfilterConn(ns)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	elems, err := mapElementsOf(conn, bridgeTable, map[string]bool{port: true})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, kind := range portChains {
		if slices.ContainsFunc(elems[kind], func(e elemNote) bool { return e.port == port }) {
			out = append(out, kind)
		}
	}
	return out, nil
}

// mapElementsOf reads the elements of the port maps of the bridge table,
// by kind: of every port (ports nil), or of the ports given alone. A map
// that does not exist is left out.
func mapElementsOf(conn *netlink.Conn, bridgeTable *nftables.Table, ports map[string]bool) (map[string][]elemNote, error) {
	out := map[string][]elemNote{}
	names := slices.Sorted(maps.Keys(ports))
	for _, kind := range portChains {
		var elems []elemNote
		var err error
		if ports == nil {
			elems, err = elementNotesOn(conn, bridgeTable, kind)
		} else {
			elems, err = elementNotesOf(conn, bridgeTable, kind, names)
		}
		switch {
		case isNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("nft -n list map bridge %s %s: %w", bridgeTable.Name, kind, err)
		}
		out[kind] = elems
	}
	return out, nil
}

// parseJumpComment reads "port PORT [DIGEST rules=N jumps=J]".
func parseJumpComment(s string) (port string, digest string, counts [2]int) {
	rest, ok := strings.CutPrefix(s, portTag)
	if !ok {
		return "", "", counts
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "", "", counts
	}
	counts = [2]int{-1, -1}
	if len(f) == 4 {
		digest = f[1]
		for i, kv := range f[2:] {
			if _, v, ok := strings.Cut(kv, "="); ok {
				if n, err := strconv.Atoi(v); err == nil {
					counts[i] = n
				}
			}
		}
	}
	return f[0], digest, counts
}

// Observe reads a namespace's firewall and port policies back: the
// firewall's text, and each port's policy as the digest its jump rule
// carries, "stale" before it when rules are missing or extra. only, when
// set, names the ports to read; the rules of the others are not listed.
// Rules are read as notes (chain, handle, comment), without decoding their
// expressions: without only, the whole bridge table in one dump, as a
// request per port chain costs a round trip for each of a thousand ports.
// What it read of the base chains' jumps serves the port policies' changes
// that follow (seenJumps).
//
// table names the firewall's tables (plan.FirewallTable, "" for vnet's
// own namespaces); in a host's own namespace a stateful firewall whose
// br_netfilter settings are off reads as not quite that, so that the next
// apply sets them.
//
// counters, when set, gets the rules' counters of a namespace whose whole
// firewall it read, as Counters reads them.
func (f *Firewalls) Observe(ns string, only map[string]bool, table string, counters *Counts) ([]plan.Resource, error) {
	var out []plan.Resource
	bridgeTable, inetTable := bridgeTableOf(table), inetTableOf(table)
	var wanted map[string]bool // the chains of the ports in only
	if only != nil {
		wanted = map[string]bool{}
		for port := range only {
			for _, kind := range portChains {
				wanted[portChain(port, kind)] = true
			}
		}
	}
	err := f.nftLastingIn(ns, func(c *nftables.Conn) error {
		tables, err := c.ListTables()
		if err != nil {
			if noNFTables(err) {
				return nil // a kernel without nftables has no firewall to read
			}
			return fmt.Errorf("nft -n %s list tables: %w", ns, err)
		}
		if _, ok := findTable(tables, bridgeTable); !ok {
			return nil
		}
		chains, err := f.namedChains(ns, table, wanted)
		if err != nil {
			return fmt.Errorf("nft -n %s list chains: %w", ns, err)
		}
		fw := plan.Resource{Kind: plan.KindFirewall, NS: ns, Name: table, Match: plan.FirewallBridge}
		bases := map[string]bool{}
		var portChainsRead []string
		for _, ch := range chains {
			switch {
			case ch.Table.Family == nftables.TableFamilyINet:
				if ch.Name == conntrackChain {
					if rules, err := c.GetRules(inetTable, ch); err == nil && len(rules) == 1 {
						fw.Match = plan.FirewallStateful
					}
				}
			case ch.Name == preChain || ch.Name == fwdChain:
				bases[ch.Name] = true
			default:
				portChainsRead = append(portChainsRead, ch.Name)
			}
		}
		if len(bases) != 2 {
			fw.Match += " (base chains missing)"
		}
		if table != "" && fw.Match == plan.FirewallStateful {
			if text := f.hostOff(ns); text != "" {
				fw.Match += " (br_netfilter off: " + text + ")"
			}
		}
		read, err := f.firewallNotes(ns, bridgeTable, only, bases, portChainsRead)
		if err != nil {
			return err
		}
		if len(bases) == 2 && !lookupsInPlace(read.bases, read.elems) {
			fw.Match += " (port maps not looked up)"
		}
		out = append(out, fw)
		if counters != nil && wanted == nil && onlyVnetTable(tables, bridgeTable) {
			counters.put(ns, portCounters(map[string]map[string]uint64{}, read.all))
		}
		if len(read.elems) == len(portChains) {
			f.jumps.note(ns, bridgeTable.Name, read.elems, maps.Clone(only))
		}
		out = append(out, portPolicies(ns, table, only, read.counts, read.elems)...)
		return nil
	})
	return out, err
}

// firewallRead is what an observation reads of a bridge table.
type firewallRead struct {
	counts map[string]int        // rules by port chain
	bases  map[string][]ruleNote // the base chains' rules
	all    []ruleNote            // every rule, of a whole read
	elems  map[string][]elemNote // the port maps' elements, by kind
}

// firewallNotes reads the rules of a bridge table as notes: how many each
// port chain holds, and the rules of the base chains that exist (a base
// chain that could not be read is left out: it reads as missing); and the
// port maps' elements. Of the whole table (only nil) it reads every chain
// in one dump, and keeps the notes of the whole table too; otherwise the
// base chains, the chains named, and the elements of the ports in only.
func (f *Firewalls) firewallNotes(ns string, bridgeTable *nftables.Table, only map[string]bool, exist map[string]bool, chains []string) (firewallRead, error) {
	conn, err := f.netfilterConn(ns)
	if err != nil {
		return firewallRead{}, err
	}
	defer conn.Close()
	read := firewallRead{counts: map[string]int{}, bases: map[string][]ruleNote{}}
	if read.elems, err = mapElementsOf(conn, bridgeTable, only); err != nil {
		return firewallRead{}, fmt.Errorf("nft -n %s list maps: %w", ns, err)
	}
	whole := only == nil
	if whole {
		notes, err := ruleNotesOn(conn, bridgeTable, "")
		if err != nil && !isNotFound(err) {
			return firewallRead{}, fmt.Errorf("nft -n %s list table bridge %s: %w", ns, bridgeTable.Name, err)
		}
		for name := range exist {
			read.bases[name] = nil // a chain without rules sends none
		}
		for _, n := range notes {
			if n.chain == preChain || n.chain == fwdChain {
				read.bases[n.chain] = append(read.bases[n.chain], n)
			} else {
				read.counts[n.chain]++
			}
		}
		read.all = notes
		return read, nil
	}
	for _, ch := range chains {
		notes, err := ruleNotesOn(conn, bridgeTable, ch)
		if err != nil {
			return firewallRead{}, fmt.Errorf("nft -n %s list chain bridge %s %s: %w", ns, bridgeTable.Name, ch, err)
		}
		read.counts[ch] = len(notes)
	}
	for _, base := range []string{preChain, fwdChain} {
		if !exist[base] {
			continue
		}
		notes, err := ruleNotesOn(conn, bridgeTable, base)
		if err != nil {
			continue // reported as a missing base chain
		}
		read.bases[base] = notes
	}
	return read, nil
}

// lookupsInPlace reports whether the port maps exist and the base chains
// hold their lookups, in order, and nothing else: not the jump rules of
// an earlier vnet, nor rules added behind vnet's back.
func lookupsInPlace(bases map[string][]ruleNote, elems map[string][]elemNote) bool {
	if len(elems) != len(portChains) {
		return false
	}
	want := map[string][]string{}
	for _, lk := range portLookups {
		want[lk.base] = append(want[lk.base], lookupComment(lk.kind))
	}
	for base, comments := range want {
		got := make([]string, len(bases[base]))
		for i, n := range bases[base] {
			got[i] = n.comment
		}
		if !slices.Equal(got, comments) {
			return false
		}
	}
	return true
}

// onlyVnetTable reports whether the bridge table is the only one of
// vnet's among tables: then it holds every port's counters there.
func onlyVnetTable(tables []*nftables.Table, bridgeTable *nftables.Table) bool {
	for _, t := range tables {
		if t.Family == nftables.TableFamilyBridge && isVnetTable(t.Name) && t.Name != bridgeTable.Name {
			return false
		}
	}
	return true
}

// Counts are the counters an observation read on the way, by
// namespace (the dataplane's ObserveCounting).
type Counts struct {
	mu   sync.Mutex
	byNS map[string]map[string]map[string]uint64
}

// NewCounts returns counters for an observation to fill.
func NewCounts() *Counts {
	return &Counts{byNS: map[string]map[string]map[string]uint64{}}
}

// ByNS returns the counters read, by namespace.
func (c *Counts) ByNS() map[string]map[string]map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byNS
}

func (c *Counts) put(ns string, counters map[string]map[string]uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byNS[ns] = counters
}

// portCounters adds to out, by port and label, the packets of the
// counting rules among a table's notes.
func portCounters(out map[string]map[string]uint64, notes []ruleNote) map[string]map[string]uint64 {
	for _, n := range notes {
		if n.chain == preChain || n.chain == fwdChain || !n.counted || n.comment == "" {
			continue
		}
		port := n.chain[:max(strings.LastIndex(n.chain, "-"), 0)]
		if out[port] == nil {
			out[port] = map[string]uint64{}
		}
		out[port][n.comment] += n.packets
	}
	return out
}

// portPolicies are the port policies the port maps' elements tell of (of
// the ports in only, when set), each as the digest its elements carry,
// "stale" before it when its elements disagree, or they or its chains'
// rules are not as many as they say.
func portPolicies(ns, table string, only map[string]bool, counts map[string]int, elems map[string][]elemNote) []plan.Resource {
	type seen struct {
		digest       string
		rules, jumps int
		found        int
		mixed        bool
	}
	ports := map[string]*seen{}
	var order []string
	for _, kind := range portChains {
		for _, e := range elems[kind] {
			_, digest, n := parseJumpComment(e.comment)
			s := ports[e.port]
			if s == nil {
				s = &seen{digest: digest, rules: n[0], jumps: n[1]}
				ports[e.port] = s
				order = append(order, e.port)
			}
			s.found++
			if digest != s.digest || n != [2]int{s.rules, s.jumps} {
				s.mixed = true
			}
		}
	}
	var out []plan.Resource
	for _, port := range order {
		if only != nil && !only[port] {
			continue
		}
		s := ports[port]
		rules := 0
		for _, kind := range portChains {
			rules += counts[portChain(port, kind)]
		}
		match := s.digest
		if match == "" || s.mixed || s.found != s.jumps || rules != s.rules {
			match = "stale " + match
		}
		out = append(out, plan.Resource{Kind: plan.KindPortSec, NS: ns, Name: table, Link: port, Match: match})
	}
	return out
}

// Counters reads, for each port of a host namespace, the packets
// its counting rules have seen, by label (forged-mac, acl[0], ...), in
// every firewall of vnet's there (a host's own namespace may hold several
// infrastructures' tables; a port, a link of the namespace, is in one). A
// namespace without a firewall has none.
// Equivalent to: nft -n NS list table bridge vnet (the counters)
func (f *Firewalls) Counters(ns string) (map[string]map[string]uint64, error) {
	out := map[string]map[string]uint64{}
	// One dump per table of vnet's (the lab's, or each infrastructure's
	// in a host's own namespace): a dump per port chain costs a round trip
	// each, and decoding every expression of every rule, for a thousand
	// ports.
	var tables []*nftables.Table
	err := f.nftIn(ns, func(c *nftables.Conn) error {
		all, err := c.ListTablesOfFamily(nftables.TableFamilyBridge)
		for _, t := range all {
			if isVnetTable(t.Name) {
				tables = append(tables, t)
			}
		}
		return err
	})
	switch {
	case noNFTables(err):
		return out, nil
	case err != nil:
		return nil, fmt.Errorf("nft -n %s list tables bridge: %w", ns, err)
	}
	for _, t := range tables {
		notes, err := f.tableNotes(ns, t)
		switch {
		case isNotFound(err):
			continue // deleted meanwhile
		case err != nil:
			return nil, fmt.Errorf("nft -n %s list table bridge %s: %w", ns, t.Name, err)
		}
		portCounters(out, notes)
	}
	return out, nil
}

// comment is an nftables rule comment, as nft(8) writes it in user data.
func comment(s string) []byte {
	return append([]byte{0, byte(len(s) + 1)}, append([]byte(s), 0)...)
}

// commentOf reads a rule's comment; "" when it has none.
func commentOf(r *nftables.Rule) string { return commentIn(r.UserData) }

// commentIn reads the comment from a rule's user data.
func commentIn(b []byte) string {
	for len(b) >= 2 {
		typ, n := b[0], int(b[1])
		if len(b) < 2+n {
			return ""
		}
		if typ == 0 {
			return strings.TrimRight(string(b[2:2+n]), "\x00")
		}
		b = b[2+n:]
	}
	return ""
}

func isNotFound(err error) bool { return errors.Is(err, unix.ENOENT) }

// noNFTables reports whether err says the kernel has no nftables (or not
// the family asked for).
func noNFTables(err error) bool {
	return errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.EOPNOTSUPP)
}

// nftErr turns a missing nftables family into a FeatureError.
func nftErr(ns, what string, err error) error {
	if noNFTables(err) {
		return &feature.Error{Feature: "nftables bridge family (port security and ACLs)", Hint: "CONFIG_NF_TABLES and CONFIG_NF_TABLES_BRIDGE", Err: err}
	}
	return fmt.Errorf("nft -n %s %s: %w", ns, what, err)
}
