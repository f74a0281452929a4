package plan

import (
	"strings"
)

// Sysctl is a setting vnet makes in each of its namespaces or on each of its
// bridges. Key is its path under /proc/sys (a bridge's: under its
// net/ipv4/conf/BRIDGE), which shows the namespace of the thread that opens
// it. An Optional one exists only with a module loaded; where it is missing
// there is nothing to set.
type Sysctl struct {
	Key, Value string
	Optional   bool
}

// NamespaceSysctls are part of every namespace resource, so that a setting
// changed behind vnet's back (or a module loaded after the namespace was
// made, which starts its settings at the kernel's defaults) shows in the
// plan and the next apply puts it back.
//
// Strict ARP: with Linux's weak host model a host's bridge answered ARP for
// its host ports' addresses, so their traffic bypassed the port and its
// shaper; likewise one NIC of a multi-NIC native host answered for
// another's address.
//
// Layer-2 bridges: where br_netfilter is loaded, every frame a bridge
// forwards goes through the namespace's IP, IPv6 and ARP firewall hooks.
// vnet puts no rules there, and the hooks cost 3 µs of a 31 µs TCP_RR round
// trip across two switches.
//
// Secondary addresses promoted: a changed address is made before the old
// one is removed (creates come first in a plan), so in the same subnet it
// is a secondary of the old one, and the kernel removes the secondaries
// with their primary unless they are promoted.
var NamespaceSysctls = []Sysctl{
	{Key: "net/ipv4/conf/all/arp_ignore", Value: "1"},
	{Key: "net/ipv4/conf/all/arp_announce", Value: "2"},
	{Key: "net/ipv4/conf/all/promote_secondaries", Value: "1"},
	{Key: "net/bridge/bridge-nf-call-iptables", Value: "0", Optional: true},
	{Key: "net/bridge/bridge-nf-call-ip6tables", Value: "0", Optional: true},
	{Key: "net/bridge/bridge-nf-call-arptables", Value: "0", Optional: true},
}

// BridgeSysctls are part of every bridge resource, for the same reason.
//
// Strict reverse-path filtering on the bridge device: a bridge has no
// address, but the subnet's broadcast route made a host's IP stack take
// every broadcast twice, through its host port and through the bridge.
// The second copy comes in by an interface the sender is not reached by,
// so the filter drops it.
var BridgeSysctls = []Sysctl{
	{Key: "rp_filter", Value: "1"},
}

// BridgeIPv6Off follows BridgeSysctls' settings in the Sysctls of a
// virtual network's bridge when the network has no IPv6 (no subnet6): the
// host's IPv6 is off on the bridge (net.ipv6.conf.BRIDGE.disable_ipv6=1,
// set before the bridge comes up), so it adds no multicast route to the
// host namespace's one IPv6 table, which every link coming up walks. Its
// frames, IPv6 ones too, still cross it. A network with IPv6 keeps it on:
// its bridge holds IPv6 neighbour entries, which a link with IPv6 off
// refuses. Observation adds it where a bridge has IPv6 off.
const BridgeIPv6Off = "disable_ipv6=1"

// BridgeSysctlText is the Sysctls of a bridge vnet makes: BridgeSysctls,
// and BridgeIPv6Off when the bridge has no use for IPv6.
func BridgeSysctlText(ipv6Off bool) string {
	text := WantedSysctls(BridgeSysctls)
	if ipv6Off {
		text += " " + BridgeIPv6Off
	}
	return text
}

// BridgeWantsIPv6Off reports whether a bridge's Sysctls say IPv6 off.
func BridgeWantsIPv6Off(text string) bool {
	return strings.HasSuffix(text, " "+BridgeIPv6Off) || text == BridgeIPv6Off
}

// SysctlText is a resource's Sysctls: "key=value" for each of set in order
// (NamespaceSysctls or BridgeSysctls), the value from values, "?" where it
// has none.
func SysctlText(set []Sysctl, values map[string]string) string {
	parts := make([]string, len(set))
	for i, s := range set {
		v, ok := values[s.Key]
		if !ok {
			v = "?"
		}
		parts[i] = s.Key + "=" + v
	}
	return strings.Join(parts, " ")
}

// SysctlValues reads a Sysctls text back into key -> value.
func SysctlValues(text string) map[string]string {
	values := map[string]string{}
	for _, kv := range strings.Fields(text) {
		k, v, _ := strings.Cut(kv, "=")
		values[k] = v
	}
	return values
}

// WantedSysctls is the Sysctls of every namespace (NamespaceSysctls) or
// bridge (BridgeSysctls) vnet makes.
func WantedSysctls(set []Sysctl) string {
	values := map[string]string{}
	for _, s := range set {
		values[s.Key] = s.Value
	}
	return SysctlText(set, values)
}

// sysctlChanges lists the settings that differ between two Sysctls texts,
// by their last path element: "arp_ignore 0 -> 1".
func sysctlChanges(from, to string) []string {
	old := SysctlValues(from)
	var out []string
	for _, kv := range strings.Fields(to) {
		k, v, _ := strings.Cut(kv, "=")
		if old[k] != v {
			name := k[strings.LastIndex(k, "/")+1:]
			out = append(out, name+" "+orQuestion(old[k])+" -> "+v)
		}
	}
	return out
}

func orQuestion(s string) string {
	if s == "" {
		return "?"
	}
	return s
}
