package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PortBalancers is what a client's switch port does for the load balancers
// of its network (or port group): the translations of their VIPs, made on
// the client's own host. Its canonical text is a KindLB resource's Match;
// which backends are down is the resource's Why (DownText).
type PortBalancers []Balancer

// Balancer is one load balancer as a port translates it.
type Balancer struct {
	Site      string // its network or port group, as BalancerSite.Name has it; not part of the text
	Name      string
	VIPs      []netip.Addr // an IPv4 one, an IPv6 one, or both
	MAC       string       // the VIPs' MAC: ARP and neighbour discovery answer with it
	Listeners []LBListener
	// Affinity, when not zero, keeps a client on its backend (method
	// source) for that long after its last new connection.
	Affinity time.Duration
	Source   bool // backends chosen by the client's address, not the connection's
	Backends []LBBackend
}

// LBListener is a protocol and port of the VIPs and the backends' port.
type LBListener struct {
	Proto       string // tcp or udp
	Port        int
	BackendPort int
}

// LBBackend is a backend's addresses (either may be missing) and the MAC
// its connections are sent to: its vNIC's, or for a backend on another
// network of the router, the network's gateway's.
type LBBackend struct {
	IP, IP6 netip.Addr
	MAC     string
	Down    bool // not part of the text: DownText carries it
}

// String is the canonical text: "lb web vip 10.1.0.100,fd00:1::100 mac M
// listen tcp:80:8080,udp:53:53 select source 600s backends
// 10.1.0.11/fd00:1::11@M1,10.1.0.12/-@M2; lb ...".
func (pb PortBalancers) String() string {
	parts := make([]string, len(pb))
	for i, b := range pb {
		parts[i] = b.String()
	}
	return strings.Join(parts, "; ")
}

func (b Balancer) String() string {
	var s strings.Builder
	vips := make([]string, len(b.VIPs))
	for i, a := range b.VIPs {
		vips[i] = a.String()
	}
	ls := make([]string, len(b.Listeners))
	for i, l := range b.Listeners {
		ls[i] = fmt.Sprintf("%s:%d:%d", l.Proto, l.Port, l.BackendPort)
	}
	fmt.Fprintf(&s, "lb %s vip %s mac %s listen %s select ", b.Name, strings.Join(vips, ","), b.MAC, strings.Join(ls, ","))
	if b.Source {
		fmt.Fprintf(&s, "source %ds", int64(b.Affinity/time.Second))
	} else {
		s.WriteString("hash")
	}
	bs := make([]string, len(b.Backends))
	for i, be := range b.Backends {
		bs[i] = addrOrDash(be.IP) + "/" + addrOrDash(be.IP6) + "@" + be.MAC
	}
	s.WriteString(" backends " + strings.Join(bs, ","))
	return s.String()
}

func addrOrDash(a netip.Addr) string {
	if !a.IsValid() {
		return "-"
	}
	return a.String()
}

// ParsePortBalancers reads the canonical text back.
func ParsePortBalancers(text string) (PortBalancers, error) {
	var out PortBalancers
	for _, part := range strings.Split(text, "; ") {
		b, err := parseBalancer(part)
		if err != nil {
			return nil, fmt.Errorf("load balancer %q: %w", part, err)
		}
		out = append(out, b)
	}
	return out, nil
}

func parseBalancer(s string) (Balancer, error) {
	f := strings.Fields(s)
	if len(f) < 11 || f[0] != "lb" || f[2] != "vip" || f[4] != "mac" || f[6] != "listen" || f[8] != "select" {
		return Balancer{}, fmt.Errorf("not a load balancer's text")
	}
	b := Balancer{Name: f[1], MAC: f[5]}
	for _, v := range strings.Split(f[3], ",") {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return b, err
		}
		b.VIPs = append(b.VIPs, a)
	}
	for _, l := range strings.Split(f[7], ",") {
		p := strings.Split(l, ":")
		if len(p) != 3 {
			return b, fmt.Errorf("listener %q", l)
		}
		port, err1 := strconv.Atoi(p[1])
		bport, err2 := strconv.Atoi(p[2])
		if err1 != nil || err2 != nil || p[0] != "tcp" && p[0] != "udp" {
			return b, fmt.Errorf("listener %q", l)
		}
		b.Listeners = append(b.Listeners, LBListener{Proto: p[0], Port: port, BackendPort: bport})
	}
	rest := f[9:]
	if rest[0] == "source" {
		if len(rest) < 2 {
			return b, fmt.Errorf("source without a timeout")
		}
		secs, err := strconv.ParseInt(strings.TrimSuffix(rest[1], "s"), 10, 64)
		if err != nil {
			return b, fmt.Errorf("affinity %q", rest[1])
		}
		b.Source, b.Affinity = true, time.Duration(secs)*time.Second
		rest = rest[2:]
	} else if rest[0] == "hash" {
		rest = rest[1:]
	} else {
		return b, fmt.Errorf("selection %q", rest[0])
	}
	if len(rest) != 2 || rest[0] != "backends" {
		return b, fmt.Errorf("no backends")
	}
	for _, be := range strings.Split(rest[1], ",") {
		addrs, mac, ok := strings.Cut(be, "@")
		ip, ip6, ok2 := strings.Cut(addrs, "/")
		if !ok || !ok2 {
			return b, fmt.Errorf("backend %q", be)
		}
		var x LBBackend
		for _, a := range []struct {
			s   string
			dst *netip.Addr
		}{{ip, &x.IP}, {ip6, &x.IP6}} {
			if a.s == "-" {
				continue
			}
			addr, err := netip.ParseAddr(a.s)
			if err != nil {
				return b, fmt.Errorf("backend %q: %w", be, err)
			}
			*a.dst = addr
		}
		if hw, err := net.ParseMAC(mac); err != nil || len(hw) != 6 {
			return b, fmt.Errorf("backend %q: bad MAC", be)
		}
		x.MAC = mac
		b.Backends = append(b.Backends, x)
	}
	return b, nil
}

// DownText is the text of the backends that are down, a KindLB resource's
// Why: "web/10.1.0.12,web/fd00:1::12" (each down backend's addresses of
// the families of its load balancer's VIPs, sorted), "" when all are up.
func (pb PortBalancers) DownText() string {
	var down []string
	for _, b := range pb {
		for _, be := range b.Backends {
			if !be.Down {
				continue
			}
			// An address is a backend's only where a VIP of its family is.
			for _, vip := range b.VIPs {
				if a := be.IP; vip.Is4() && a.IsValid() {
					down = append(down, b.Name+"/"+a.String())
				}
				if a := be.IP6; vip.Is6() && a.IsValid() {
					down = append(down, b.Name+"/"+a.String())
				}
			}
		}
	}
	slices.Sort(down)
	return strings.Join(down, ",")
}

// WithDown marks the backends a DownText names down, and the others up.
func (pb PortBalancers) WithDown(text string) PortBalancers {
	down := map[string]bool{}
	for _, d := range strings.Split(text, ",") {
		if d != "" {
			down[d] = true
		}
	}
	out := make(PortBalancers, len(pb))
	for i, b := range pb {
		b.Backends = slices.Clone(b.Backends)
		for j := range b.Backends {
			be := &b.Backends[j]
			be.Down = down[b.Name+"/"+addrOrDash(be.IP)] || down[b.Name+"/"+addrOrDash(be.IP6)]
		}
		out[i] = b
	}
	return out
}

// The slot tables' sizes: primes, so that every backend's permutation
// reaches every slot, and at least about twenty slots a backend, so that
// backends get shares within a few percent of each other.
var slotSizes = []int{257, 1031, 2053}

// SlotCount is the size of the slot table of a load balancer with n
// backends.
func SlotCount(n int) int {
	for _, m := range slotSizes {
		if m >= 20*n {
			return m
		}
	}
	return slotSizes[len(slotSizes)-1]
}

// Slots fills a table of m slots with the indexes of the backends that are
// up (ids names each backend, up says which are), as Maglev does: each
// backend takes, in turn, the next slot of its own permutation of the
// table that is still free, so the backends' shares differ by at most one
// slot, and a backend going down gives up its own slots and few others.
// A slot is -1 when no backend is up. The table depends only on ids, up
// and m, so every host computes the same.
func Slots(ids []string, up []bool, m int) []int {
	table := make([]int, m)
	for i := range table {
		table[i] = -1
	}
	type perm struct{ idx, offset, skip, next int }
	var ps []perm
	for i, id := range ids {
		if !up[i] {
			continue
		}
		sum := sha256.Sum256([]byte(id))
		h1, h2 := binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16])
		ps = append(ps, perm{idx: i, offset: int(h1 % uint64(m)), skip: int(h2%uint64(m-1)) + 1})
	}
	if len(ps) == 0 {
		return table
	}
	for filled := 0; ; {
		for k := range ps {
			p := &ps[k]
			for {
				slot := (p.offset + p.next*p.skip) % m
				p.next++
				if table[slot] < 0 {
					table[slot] = p.idx
					filled++
					break
				}
			}
			if filled == m {
				return table
			}
		}
	}
}

// BackendID is what the slot tables know a backend by: its addresses and
// MAC, the same on every host.
func BackendID(b LBBackend) string {
	return addrOrDash(b.IP) + "/" + addrOrDash(b.IP6) + "@" + b.MAC
}

// BackendKey names a backend of a load balancer in Options.LBDown and in
// the host agents' health reports: "network a-web/web/a2/0" (the site,
// the load balancer, the VM and its vNIC).
func BackendKey(site, lb, vm string, nic int) string {
	return site + "/" + lb + "/" + vm + "/" + strconv.Itoa(nic)
}
