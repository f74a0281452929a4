package service

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"github.com/vnet-project/vnet/internal/spec"
)

// ErrAttached: a rollback, a restore or an apply would take away VMs that
// runtimes attached and still use (containers, pods, libvirt guests),
// because the spec it applies lacks what they sit on. Exit status 2, HTTP
// 409.
var ErrAttached = errors.New("VMs that runtimes attached stand in the way")

// AttachedVM is a VM a runtime attached (a container, a pod's sandbox, a
// libvirt guest: its vNICs carry attach.container), as a rollback or a
// restore meets it.
type AttachedVM struct {
	VM   string `json:"vm"`
	Host string `json:"host"`
	// Container is the runtime's ID: a container's, a guest's UUID.
	Container string        `json:"container"`
	NICs      []AttachedNIC `json:"nics"`
	// Missing says, for one in the way, what the generation gone back to
	// lacks for it, or has of its own in its place.
	Missing string `json:"missing,omitempty"`
}

// AttachedNIC is one of a runtime's attachments: the vNIC's name in the
// container's namespace (or its guest's TAP), the CNI network that made
// it, and what it is on.
type AttachedNIC struct {
	Ifname    string `json:"ifname"`
	Netns     string `json:"netns,omitempty"`
	Tap       string `json:"tap,omitempty"`
	CNI       string `json:"cni,omitempty"`
	PortGroup string `json:"portgroup,omitempty"`
	Network   string `json:"network,omitempty"`
}

// Attached is what a rollback or a restore does with the VMs runtimes
// attached: those attached now are kept as they are, each on its port
// group or network; those the earlier spec held that no runtime attaches
// now are left out, since their runtimes detached them since.
type Attached struct {
	Kept []AttachedVM `json:"kept,omitempty"`
	// InTheWay are the VMs attached now that the earlier spec has no place
	// for (misfit): the change is refused unless asked to drop them
	// (Dropped), which takes them out under their runtimes.
	InTheWay []AttachedVM `json:"in_the_way,omitempty"`
	Dropped  bool         `json:"dropped,omitempty"`
	// LeftOut are the earlier spec's VMs that runtimes had attached and
	// do not now.
	LeftOut []string `json:"left_out,omitempty"`
}

// Empty says there were no VMs of runtimes on either side.
func (a *Attached) Empty() bool {
	return a == nil || len(a.Kept) == 0 && len(a.InTheWay) == 0 && len(a.LeftOut) == 0
}

// AttachedError refuses a rollback, a restore or an apply that would take
// away VMs runtimes attached and still use; it matches ErrAttached.
type AttachedError struct {
	Infra string
	// To says what the change applies: the generation a rollback goes
	// back to ("generation 3"), an apply's file.
	To string
	// Applying says the change is an apply of a spec the user gives,
	// not a rollback to To.
	Applying bool
	VMs      []AttachedVM
}

func (e *AttachedError) Error() string {
	var b strings.Builder
	refused := fmt.Sprintf("rollback %s to %s", e.Infra, e.To)
	if e.Applying {
		refused = fmt.Sprintf("apply %s", e.Infra)
	}
	fmt.Fprintf(&b, "%s: %s has no place for these VMs that runtimes attached and still use, which would be removed under them:",
		refused, e.To)
	for _, vm := range e.VMs {
		fmt.Fprintf(&b, "\n  VM %s on %s (container %s", vm.VM, vm.Host, vm.Container)
		for _, n := range vm.NICs {
			b.WriteString("; " + n.String())
		}
		fmt.Fprintf(&b, "): %s", vm.Missing)
	}
	b.WriteString("\nnothing was changed: let the runtimes detach them first, or --drop-attached (the API's dropAttached=true) to take them out")
	return b.String()
}

func (e *AttachedError) Is(target error) bool { return target == ErrAttached }

// String names the attachment as its runtime knows it.
func (n AttachedNIC) String() string {
	s := fmt.Sprintf("%s in namespace %s on %s%s", n.Ifname, n.Netns, n.PortGroup, n.Network)
	if n.Tap != "" {
		s = fmt.Sprintf("TAP %s on %s%s", n.Tap, n.PortGroup, n.Network)
	}
	if n.CNI != "" {
		s += ", CNI network " + n.CNI
	}
	return s
}

// applyWithAttached runs apply with ctx's change keeping the VMs runtimes
// attach now as they are in the spec it applies (keepAttached), worked
// out against the spec in force where the apply reads it, which what
// names in a refusal; the result says what became of them.
func applyWithAttached(ctx context.Context, what func(given *spec.Document) string, drop, applying bool,
	apply func(context.Context) (*ApplyResult, error)) (*ApplyResult, error) {
	var att *Attached
	ctx = withRework(ctx, func(given, now *spec.Document) (*spec.Document, error) {
		next, a, err := keepAttached(given.Spec.Name, what(given), given, now, drop, applying)
		att = a
		return next, err
	}, applying)
	res, err := apply(ctx)
	if res != nil && !att.Empty() {
		res.Attached = att
	}
	return res, err
}

// applyKeeping runs apply, a back end's apply of a spec the user gives
// (a file, a request's body), keeping the VMs runtimes attached
// (keepAttached): those the runtimes attach now stay as they are, in
// place of any the spec holds, since only their runtimes take them away
// (a CNI DEL, the QEMU hook); an apply whose spec has no place for one is
// refused unless o.DropAttached. An apply a rollback, a restore or a link
// makes (a change in ctx) works out its spec itself.
func applyKeeping(ctx context.Context, src Source, o ApplyOptions, apply func(context.Context, Source, ApplyOptions) (*ApplyResult, error)) (*ApplyResult, error) {
	if _, ok := ctx.Value(changeKey{}).(change); ok {
		return apply(ctx, src, o)
	}
	return applyWithAttached(ctx, specWhat, o.DropAttached, true, func(ctx context.Context) (*ApplyResult, error) {
		return apply(ctx, src, o)
	})
}

// specWhat names a spec an apply is given, in a refusal.
func specWhat(doc *spec.Document) string {
	if doc.File != "" {
		return doc.File
	}
	return "the spec"
}

// keepAttached is the spec a rollback, a restore or an apply applies: target, the
// spec the user declared at an earlier generation (or in a snapshot), with
// the VMs runtimes attach now (those of now, nil when nothing is applied)
// as they are, in place of those target held. A VM attached now that
// target has no place for (misfit) is in the way: the result is an
// AttachedError unless drop, which leaves such VMs out. what names the
// target in errors. Applying says target is a spec the user gives to
// apply, not an earlier one: its own runtimes' VMs that no runtime
// attaches now stay as written (a file vnet get wrote applies as it
// says), where a rollback or a restore leaves them out.
func keepAttached(infra, what string, target, now *spec.Document, drop, applying bool) (*spec.Document, *Attached, error) {
	att := &Attached{}
	var stale []string
	var targetVMs map[string]*spec.VM // made once a runtime's VM is found: most specs have none
	for i := range target.Spec.VMs {
		if vm := &target.Spec.VMs[i]; vm.ContainerOf() != "" && !applying {
			stale = append(stale, vm.Name)
		}
	}
	var put []spec.VM
	kept, inTheWay := map[string]bool{}, map[string]bool{}
	if now != nil {
		var taken map[string]string
		for i := range now.Spec.VMs {
			vm := &now.Spec.VMs[i]
			if vm.ContainerOf() == "" {
				continue
			}
			if taken == nil {
				taken, targetVMs = declaredAddresses(target.Spec), vmsByName(target.Spec)
			}
			a := attachedVM(vm)
			if a.Missing = misfit(target.Spec, targetVMs, taken, vm); a.Missing != "" {
				att.InTheWay = append(att.InTheWay, a)
				inTheWay[vm.Name] = true
				continue
			}
			att.Kept = append(att.Kept, a)
			kept[vm.Name] = true
			// One the target has as it is now (a spec edited from the
			// one in force) needs no writing in.
			if old, ok := targetVMs[vm.Name]; !ok || !sameVM(old, vm) {
				put = append(put, *vm)
			}
		}
	}
	if len(att.InTheWay) > 0 && !drop {
		return nil, att, &AttachedError{Infra: infra, To: what, Applying: applying, VMs: att.InTheWay}
	}
	att.Dropped = len(att.InTheWay) > 0
	var gone []string
	for _, name := range stale {
		if !kept[name] {
			gone = append(gone, name)
			if !inTheWay[name] {
				att.LeftOut = append(att.LeftOut, name)
			}
		}
	}
	if len(gone) == 0 && len(put) == 0 {
		return target, att, nil
	}
	next, err := spec.EditVMs(target, gone, put)
	if err != nil {
		return nil, att, fmt.Errorf("%s with the VMs runtimes attached now: %w", what, err)
	}
	return next, att, nil
}

// attachedVM describes a runtime's VM.
func attachedVM(vm *spec.VM) AttachedVM {
	a := AttachedVM{VM: vm.Name, Host: vm.Host, Container: vm.ContainerOf()}
	for i, n := range vm.NICs {
		an := AttachedNIC{Ifname: attachName(&n, i), Netns: n.NetnsName(), Tap: n.TapName(), PortGroup: n.PortGroup, Network: n.Network}
		if n.Attach != nil {
			an.CNI = n.Attach.CNI
		}
		a.NICs = append(a.NICs, an)
	}
	return a
}

// misfit says what s lacks for a runtime's VM to stay as it is: its host,
// a port group on a switch of its host, a network, the VM's name or its
// addresses, which what s declares has (taken: declaredAddresses); "" when
// it fits.
func misfit(s *spec.Spec, vms map[string]*spec.VM, taken map[string]string, vm *spec.VM) string {
	var missing []string
	h, ok := s.Host(vm.Host)
	if !ok {
		return "no host " + vm.Host
	}
	if own, ok := vms[vm.Name]; ok && own.ContainerOf() == "" {
		missing = append(missing, "a VM of its own named "+vm.Name)
	}
	for _, n := range vm.NICs {
		for _, addr := range nicAddresses(&n) {
			if who, ok := taken[addr]; ok {
				missing = append(missing, fmt.Sprintf("its address %s, which %s has", addr, who))
			}
		}
		switch {
		case n.PortGroup != "":
			sw, ok := s.PortGroupSwitch(n.PortGroup)
			if !ok {
				missing = append(missing, "no port group "+n.PortGroup)
			} else if !slices.Contains(sw.SwitchHosts(), vm.Host) {
				missing = append(missing, fmt.Sprintf("port group %s's switch %s not on host %s", n.PortGroup, sw.Name, vm.Host))
			}
		case n.Network != "":
			if _, ok := s.Network(n.Network); !ok {
				missing = append(missing, "no network "+n.Network)
			} else if h.Native {
				missing = append(missing, fmt.Sprintf("host %s native, which carries no network", vm.Host))
			}
		}
	}
	return strings.Join(missing, ", ")
}

// vmsByName are the spec's VMs by name (the first of a name).
func vmsByName(s *spec.Spec) map[string]*spec.VM {
	vms := make(map[string]*spec.VM, len(s.VMs))
	for i := range s.VMs {
		if _, dup := vms[s.VMs[i].Name]; !dup {
			vms[s.VMs[i].Name] = &s.VMs[i]
		}
	}
	return vms
}

// sameVM reports whether two VMs are written the same. An edit of a spec
// shares the vNICs of the VMs it keeps with the spec it edits, which
// tells most at a glance.
func sameVM(a, b *spec.VM) bool {
	if a.Name != b.Name || a.Host != b.Host || a.CPUs != b.CPUs || len(a.NICs) != len(b.NICs) {
		return false
	}
	return len(a.NICs) == 0 || &a.NICs[0] == &b.NICs[0] || reflect.DeepEqual(a.NICs, b.NICs)
}

// declaredAddresses are the addresses and MACs the spec's own VMs and host
// ports are given, and who has each: a runtime's VM kept with one of them
// would clash with what the user declared.
func declaredAddresses(s *spec.Spec) map[string]string {
	taken := map[string]string{}
	for _, vm := range s.VMs {
		if vm.ContainerOf() != "" {
			continue
		}
		for _, n := range vm.NICs {
			for _, addr := range nicAddresses(&n) {
				taken[addr] = "VM " + vm.Name
			}
		}
	}
	for _, hp := range s.HostPorts {
		if addr := addressOf(hp.IP); addr != "" {
			taken[addr] = "a host port of " + hp.Host
		}
	}
	return taken
}

// nicAddresses are a vNIC's IPv4 and IPv6 addresses and its MAC, those
// it is given.
func nicAddresses(n *spec.VNIC) []string {
	var addrs []string
	for _, a := range []string{addressOf(n.IP), addressOf(n.IP6), strings.ToLower(n.MAC)} {
		if a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// addressOf is the address of an address with a prefix length ("" for
// none, or for one that does not parse, which validation refuses).
func addressOf(ip string) string {
	p, err := netip.ParsePrefix(ip)
	if err != nil {
		return ""
	}
	return p.Addr().String()
}
