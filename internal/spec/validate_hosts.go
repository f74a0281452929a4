package spec

import (
	"fmt"
	"strings"
)

// maxNetnsName is the longest namespace name: a file name in /run/netns.
const maxNetnsName = 255

// checkRealHosts checks the fields that name what a real machine already
// has: NICs that are existing devices, vNICs that are a hypervisor's TAP
// or a container's namespace. Whether these exist is the host's to say
// (plan.CheckHostFacts); here only their form and how they combine.
func (v *validator) checkRealHosts() {
	for i, h := range v.s.Hosts {
		devices := map[string]string{}
		for j, n := range h.NICs {
			p := fmt.Sprintf("hosts[%d].nics[%d]", i, j)
			if !n.IsDevice() {
				if n.Shared {
					v.errf(p+".shared", "shared says that a device: of the machine is shared with its own traffic; this NIC names none")
				}
				continue
			}
			if !v.checkLinkName(p+".device", n.Device, "a device") {
				continue
			}
			v.unique(devices, n.Device, p+".device", "device")
			if h.Native {
				v.errf(p+".device", "host %q is native, an emulated machine: a real device belongs to a hypervisor host", h.Name)
			}
			if n.IP != "" {
				v.errf(p+".ip", "vnet leaves a real device's addresses alone; configure %s's address on the machine", n.Device)
			}
		}
	}
	taps := map[string]string{} // host/tap -> path
	for i := range v.s.VMs {
		v.checkAttachedVM(i, taps)
	}
}

// checkAttachedVM checks the attachments of VM i's vNICs, when it brings
// its own: each a TAP (unique on its host among those in taps) or one
// namespace, all of one kind.
func (v *validator) checkAttachedVM(i int, taps map[string]string) {
	vm := &v.s.VMs[i]
	if !vm.Attached() {
		return
	}
	p := indexPath("vms", i)
	var kind, netns, container string
	ifnames := map[string]string{}
	for j, n := range vm.NICs {
		np := indexPath(p+".nics", j)
		a := n.Attach
		if a == nil {
			v.errf(np+".attach", "VM %s attaches its other vNICs; attach this one too (tap or netns)", vm.Name)
			continue
		}
		switch {
		case a.Tap != "" && a.Netns != "":
			v.errf(np+".attach", "attach either a tap or a netns, not both")
			continue
		case a.Tap == "" && a.Netns == "":
			v.errf(np+".attach", "attach needs tap: NAME (a TAP device) or netns: NAME (a network namespace)")
			continue
		}
		v.checkAttachIdentity(np, j, n, ifnames, &container)
		this := "tap"
		if a.Netns != "" {
			this = "netns"
		}
		if kind == "" {
			kind = this
		} else if kind != this {
			v.errf(np+".attach", "VM %s's vNICs attach both TAP devices and a namespace; a VM is one or the other", vm.Name)
		}
		if a.Tap != "" {
			if v.checkLinkName(np+".attach.tap", a.Tap, "a TAP device") {
				v.unique(taps, vm.Host+"/"+a.Tap, np+".attach.tap", "TAP device")
			}
			if n.Offloads != nil {
				v.errf(np+".offloads", "a TAP's offloads are its guest's to set (virtio-net features), not vnet's")
			}
		}
		if a.Netns != "" {
			v.checkNetnsName(np+".attach.netns", a.Netns)
			if netns == "" {
				netns = a.Netns
			} else if netns != a.Netns {
				v.errf(np+".attach.netns", "VM %s's vNICs are in namespace %q already; one VM is one namespace", vm.Name, netns)
			}
		}
	}
	if vm.CPUs != 0 {
		v.errf(p+".cpus", "VM %s brings its own vNICs, so vnet does not run it: limit its CPUs where it runs (QEMU's or the container's cgroup)", vm.Name)
	}
}

func (v *validator) checkNetnsName(path, name string) {
	switch {
	case len(name) > maxNetnsName:
		v.errf(path, "namespace name is longer than %d bytes", maxNetnsName)
	case name == "." || name == ".." || strings.ContainsAny(name, "/\x00"):
		v.errf(path, "namespace %q is not a name in /run/netns", name)
	case strings.HasPrefix(name, "vnet."):
		v.errf(path, "namespace %q is named like vnet's own; attach a namespace that vnet does not manage", name)
	}
}
