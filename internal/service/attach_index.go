package service

import (
	"net/netip"
	"sync"

	"github.com/vnet-project/vnet/internal/spec"
)

// attachIndex is what a container's ADD or DEL looks up in a spec of
// thousands of containers: which VM a container is, which VM names are
// taken, which addresses are given and where the lowest free one of a
// subnet may be. Making it (build) reads every VM once; each change of
// attachments then moves it on to the spec it makes (advance), reading
// only the VMs that change, so that a server, whose next change reads the
// spec its last one applied, finds it made. Until it is made, its look-ups
// read the spec: a process that makes one change (a command) makes no
// index, and one that makes a second change of the spec its first made
// makes it then (attachIndexes.take).
type attachIndex struct {
	doc *spec.Document // the spec it indexes
	// The rest is nil until build.
	// vmAt is where each VM is in doc.Spec.VMs, by name: exact after an
	// ADD, a hint after a DEL moved the VMs behind the one it took out
	// (vm checks it and looks further).
	vmAt        map[string]int
	byContainer map[string]string // a runtime's ID -> its VM's name
	// used counts, by address, the vNICs, host ports and gateways given
	// it: two port groups may give one address twice.
	used map[netip.Addr]int
	// low is, for each subnet allocated from, an address below which all
	// of the subnet's are taken: the next allocation scans from there.
	low map[netip.Prefix]netip.Addr
}

// newAttachIndex is an index of doc not made yet: its look-ups read doc.
func newAttachIndex(doc *spec.Document) *attachIndex { return &attachIndex{doc: doc} }

// built reports whether the index is made.
func (x *attachIndex) built() bool { return x.vmAt != nil }

// build makes the index of the spec's VMs, host ports and gateways.
func (x *attachIndex) build() *attachIndex {
	if x.built() {
		return x
	}
	s := x.doc.Spec
	x.vmAt, x.byContainer = make(map[string]int, len(s.VMs)), make(map[string]string, len(s.VMs))
	x.used, x.low = make(map[netip.Addr]int, len(s.VMs)), map[netip.Prefix]netip.Addr{}
	for i := range s.VMs {
		x.addVM(&s.VMs[i], i)
	}
	for _, hp := range s.HostPorts {
		x.take(addrOf(hp.IP), 1)
	}
	for _, sw := range s.Switches {
		for _, pg := range sw.PortGroups {
			x.take(parseAddr(pg.Gateway), 1)
		}
	}
	for _, n := range s.Networks {
		x.take(parseAddr(n.Gateway), 1)
		x.take(parseAddr(n.Gateway6), 1)
	}
	return x
}

// addVM indexes the VM at position i.
func (x *attachIndex) addVM(vm *spec.VM, i int) {
	if _, dup := x.vmAt[vm.Name]; !dup {
		x.vmAt[vm.Name] = i
	}
	if c := vm.ContainerOf(); c != "" {
		if _, dup := x.byContainer[c]; !dup {
			x.byContainer[c] = vm.Name
		}
	}
	x.takeNICs(vm, 1)
}

// removeVM forgets a VM that a change took out or wrote anew.
func (x *attachIndex) removeVM(vm *spec.VM) {
	delete(x.vmAt, vm.Name)
	if c := vm.ContainerOf(); c != "" && x.byContainer[c] == vm.Name {
		delete(x.byContainer, c)
	}
	x.takeNICs(vm, -1)
}

// takeNICs counts the VM's addresses in (by 1) or out (by -1).
func (x *attachIndex) takeNICs(vm *spec.VM, by int) {
	for j := range vm.NICs {
		x.take(addrOf(vm.NICs[j].IP), by)
		x.take(addrOf(vm.NICs[j].IP6), by)
	}
}

// take counts an address in or out; an address given back below where a
// subnet's scan starts moves the start back to it.
func (x *attachIndex) take(a netip.Addr, by int) {
	if !a.IsValid() {
		return
	}
	x.used[a] += by
	if x.used[a] > 0 {
		return
	}
	delete(x.used, a)
	for sub, low := range x.low {
		if sub.Contains(a) && a.Less(low) {
			x.low[sub] = a
		}
	}
}

// vm is the VM of that name in the indexed spec.
func (x *attachIndex) vm(name string) (*spec.VM, bool) {
	if !x.built() {
		return x.doc.Spec.VM(name)
	}
	at, ok := x.vmAt[name]
	if !ok {
		return nil, false
	}
	vms := x.doc.Spec.VMs
	if i := findVM(vms, name, at); i >= 0 {
		x.vmAt[name] = i
		return &vms[i], true
	}
	return nil, false
}

// findVM is where the VM of that name is in vms, or -1: a change of
// attachments adds VMs at the end and writes one anew where it was, and
// one it takes out moves those behind it towards the front, so that a VM
// once at hint (-1: none) is now at the end, or at hint or before it.
func findVM(vms []spec.VM, name string, hint int) int {
	if n := len(vms); n > 0 && vms[n-1].Name == name {
		return n - 1
	}
	if hint < 0 || hint >= len(vms) {
		hint = len(vms) - 1
	}
	for i := hint; i >= 0; i-- {
		if vms[i].Name == name {
			return i
		}
	}
	return -1
}

// attachment is findAttachment through the index.
func (x *attachIndex) attachment(container, ifname string) (*spec.VM, int) {
	if !x.built() {
		return findAttachment(x.doc.Spec, container, ifname)
	}
	name, ok := x.byContainer[container]
	if !ok {
		return nil, -1
	}
	vm, ok := x.vm(name)
	if !ok {
		return nil, -1
	}
	for j := range vm.NICs {
		if attachName(&vm.NICs[j], j) == ifname {
			return vm, j
		}
	}
	return vm, -1
}

// advance moves the index on to next, the spec that e made of the
// indexed one: only the VMs e takes out or writes in are read again.
func (x *attachIndex) advance(next *spec.Document, e vmsEdit) {
	if !x.built() {
		x.doc = next
		return
	}
	for _, name := range e.drop {
		if vm, ok := x.vm(name); ok {
			x.removeVM(vm)
		}
	}
	was := make([]int, len(e.put))
	for k := range e.put {
		was[k] = -1
		if vm, ok := x.vm(e.put[k].Name); ok {
			was[k] = x.vmAt[vm.Name]
			x.removeVM(vm)
		}
	}
	x.doc = next
	vms := next.Spec.VMs
	for k := range e.put {
		if i := findVM(vms, e.put[k].Name, was[k]); i >= 0 {
			x.addVM(&vms[i], i)
		}
	}
}

// attachIndexes keeps the index of each infrastructure's spec that the
// last change of attachments made, for the next one. An index is taken
// out while a change uses it, so that two at once never share one.
type attachIndexes struct {
	mu      sync.Mutex
	byInfra map[string]*attachIndex
}

// take is the index of doc: the one kept, made when it was not, when it
// is of doc (the spec the change before made); else one not made, since
// doc may be the only spec this process changes.
func (k *attachIndexes) take(doc *spec.Document) *attachIndex {
	k.mu.Lock()
	x := k.byInfra[doc.Spec.Name]
	delete(k.byInfra, doc.Spec.Name)
	k.mu.Unlock()
	if x == nil || x.doc != doc {
		return newAttachIndex(doc)
	}
	return x.build()
}

// keep keeps x for the next change of its infrastructure.
func (k *attachIndexes) keep(x *attachIndex) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byInfra == nil {
		k.byInfra = map[string]*attachIndex{}
	}
	k.byInfra[x.doc.Spec.Name] = x
}

// forget drops what is kept of an infrastructure (destroyed).
func (k *attachIndexes) forget(infra string) {
	k.mu.Lock()
	delete(k.byInfra, infra)
	k.mu.Unlock()
}

// addrOf is the address of an address with a prefix length; not valid
// for "" or one that does not parse, which validation refuses.
func addrOf(cidr string) netip.Addr {
	if cidr == "" {
		return netip.Addr{}
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return netip.Addr{}
	}
	return p.Addr()
}

// parseAddr is an address, or not valid for "" or one that does not
// parse.
func parseAddr(s string) netip.Addr {
	if s == "" {
		return netip.Addr{}
	}
	a, _ := netip.ParseAddr(s)
	return a
}
