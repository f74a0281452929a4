package plan

import (
	"crypto/sha256"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/vnet-project/vnet/internal/spec"
)

// NSPrefix starts the name of every namespace vnet creates.
const NSPrefix = "vnet."

// AliasPrefix starts the alias of every link vnet creates.
const AliasPrefix = "vnet:"

// PhysSwitch is the node name of the emulated physical switch. The leading
// underscore cannot start a host or VM name, so it never clashes with one.
const PhysSwitch = "_pswitch"

// PhysBridge is the bridge inside the physical switch's namespace.
const PhysBridge = "pswitch"

// NSName is the namespace of a host, VM or the physical switch.
func NSName(infra, node string) string { return NSPrefix + infra + "." + node }

// InfraNSPrefix is what the namespaces of one infrastructure start with.
func InfraNSPrefix(infra string) string { return NSPrefix + infra + "." }

// SplitNSName returns the infra and node of a vnet namespace name.
func SplitNSName(ns string) (infra, node string, ok bool) {
	rest, ok := strings.CutPrefix(ns, NSPrefix)
	if !ok {
		return "", "", false
	}
	infra, node, ok = strings.Cut(rest, ".")
	if !ok || infra == "" || node == "" {
		return "", "", false
	}
	return infra, node, true
}

// CgroupName is the cgroup of a VM, relative to vnet's cgroup root.
func CgroupName(infra, vm string) string { return "vnet/" + infra + "/" + vm }

// Link names are at most 15 bytes, so links whose names the user does not
// choose are named by a short hash of what they are: stable across applies
// and unique within their namespace.
func hashName(prefix, what string) string {
	sum := sha256.Sum256([]byte(what))
	return fmt.Sprintf("%s%x", prefix, sum[:4])
}

// physPortName is the physical switch's port for a host's NIC.
func physPortName(host, nic string) string { return hashName("p", host+"/"+nic) }

// ModelRevision changes whenever this build models a spec differently
// from the builds before it in a way an apply must find on the host, as
// when what it makes is named anew (2: vNIC ports name their
// infrastructure; 3: so do host ports on a real host). A record made
// under another revision makes the next apply read the whole host, which
// replaces what it made under the old names: an apply that read only what
// the spec's change touches would find nothing to do.
const ModelRevision = 3

// VNICPortName is the switch port in the host for a VM's vNIC. It names
// the infrastructure too: on a real host the ports of every
// infrastructure share the machine's namespace, where two VMs of one name
// in two infrastructures would otherwise get one port name. (Before
// ModelRevision 2 it named the VM and index alone.)
func VNICPortName(infra, vm string, idx int) string {
	return hashName("vn", fmt.Sprintf("%s/%s/%d", infra, vm, idx))
}

// IsVNICPortName reports whether name is one VNICPortName makes.
func IsVNICPortName(name string) bool {
	hex, ok := strings.CutPrefix(name, "vn")
	if !ok || len(hex) != 8 {
		return false
	}
	for _, c := range hex {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// hostPortPeerName is the switch port in the host for a host port in the
// lab, where each host's namespace is its infrastructure's own.
func hostPortPeerName(name string) string { return hashName("vk", name) }

// HostPortLink is the interface of the i-th host port on a real host,
// where the host ports of every infrastructure on the machine share its
// namespace: the name the spec gives (the user chose it, to be free on
// the machine), else "vh" and a hash of the infrastructure, the host and
// the default name, which two infrastructures would otherwise both take.
// (Before ModelRevision 3 it was the default name, vmk0, ..., itself.)
func HostPortLink(s *spec.Spec, i int) string {
	hp := &s.HostPorts[i]
	if hp.Name != "" {
		return hp.Name
	}
	return hashName("vh", s.Name+"/"+hp.Host+"/"+s.HostPortName(i))
}

// HostPortSwitchPortOnHost is the switch port of host port name on a real
// host: it names the infrastructure and host too, for the reason
// HostPortLink does. (Before ModelRevision 3 it was the lab's.)
func HostPortSwitchPortOnHost(infra, host, name string) string {
	return hashName("vk", infra+"/"+host+"/"+name)
}

// StableMAC derives a locally administered unicast MAC from what the
// interface is, so that a recreated interface gets its old address back and
// neighbours' caches stay right.
func StableMAC(infra, what string) string {
	sum := sha256.Sum256([]byte(infra + "/" + what))
	sum[0] = sum[0]&0xfc | 0x02 // locally administered, unicast
	return net.HardwareAddr(sum[:6]).String()
}

// A Mark says which state store made a namespace or a VM's cgroup, so
// that vnet touches only its own: two stores naming one infrastructure,
// or an object that merely looks like vnet's, are told apart by it. It
// lives in the kernel with the object (a namespace's loopback alias, a
// cgroup directory's extended attribute) and dies with it. The store's ID
// says whose the object is; the directory only names where that store
// was, which a move changes (store.Find finds it again).
type Mark struct {
	Infra string // the infrastructure the object belongs to
	Store string // the store's ID
	Dir   string // where the store was, to name it in messages; may be empty
}

// maxAlias is the longest link alias the kernel keeps (IFALIASZ - 1).
const maxAlias = 255

// String is the alias text: vnet:<infra>:<store>[:<dir>]. The directory is
// left out when it would not fit.
func (m Mark) String() string {
	s := AliasPrefix + m.Infra + ":" + m.Store
	if m.Dir != "" && len(s)+1+len(m.Dir) <= maxAlias {
		s += ":" + m.Dir
	}
	return s
}

// ParseMark reads a loopback's alias; ok is false when it is no mark.
func ParseMark(alias string) (m Mark, ok bool) {
	rest, ok := strings.CutPrefix(alias, AliasPrefix)
	if !ok {
		return Mark{}, false
	}
	parts := strings.SplitN(rest, ":", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return Mark{}, false
	}
	m = Mark{Infra: parts[0], Store: parts[1]}
	if len(parts) == 3 {
		m.Dir = parts[2]
	}
	return m, true
}

// MarkOwned returns rs with every namespace and cgroup marked as made by
// store (whose directory is dir): rs itself when each is marked so
// already (a host of TAPs has few namespaces or none, and its model tens
// of thousands of resources), else a copy.
func MarkOwned(rs []Resource, infra, store, dir string) []Resource {
	mark := Mark{Infra: infra, Store: store, Dir: dir}.String()
	first := 0
	for first < len(rs) && (!Markable(rs[first].Kind) || rs[first].Mark == mark) {
		first++
	}
	if first == len(rs) {
		return rs
	}
	out := slices.Clone(rs)
	for i := first; i < len(out); i++ {
		if Markable(out[i].Kind) {
			out[i].Mark = mark
		}
	}
	return out
}

// Markable reports whether objects of a kind carry a Mark: those that
// stand by themselves on the host. Everything else lives inside a
// namespace and goes with it.
func Markable(k Kind) bool { return k == KindNetns || k == KindCgroup }

// Namespace is the namespace a resource lives in (for a veth, its first
// end's) and, for a cgroup, the namespace of its VM.
func (r Resource) Namespace() string {
	switch r.Kind {
	case KindNetns:
		return r.Name
	case KindVeth:
		return r.A.NS
	case KindCgroup:
		parts := strings.Split(r.Name, "/") // vnet/<infra>/<vm>
		if len(parts) == 3 {
			return NSName(parts[1], parts[2])
		}
		return ""
	}
	return r.NS
}
