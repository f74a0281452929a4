package plan

import (
	"crypto/sha256"
	"fmt"
	"net"
	"strings"
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

// VNICPortName is the switch port in the host for a VM's vNIC.
func VNICPortName(vm string, idx int) string { return hashName("vn", fmt.Sprintf("%s/%d", vm, idx)) }

// hostPortPeerName is the switch port in the host for a host port.
func hostPortPeerName(name string) string { return hashName("vk", name) }

// StableMAC derives a locally administered unicast MAC from what the
// interface is, so that a recreated interface gets its old address back and
// neighbours' caches stay right.
func StableMAC(infra, what string) string {
	sum := sha256.Sum256([]byte(infra + "/" + what))
	sum[0] = sum[0]&0xfc | 0x02 // locally administered, unicast
	return net.HardwareAddr(sum[:6]).String()
}
