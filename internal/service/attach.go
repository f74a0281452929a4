package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
)

// Attacher attaches what exists (a container's namespace) to an
// infrastructure one vNIC at a time, each change made to the stored spec by
// one VM and applied as that change alone: what the CNI plugin does, and
// what a command or the API may do the same way. Local and Cluster answer
// it.
type Attacher interface {
	// Attach gives a container a vNIC on a port group or network: the
	// container becomes a VM of the infrastructure, or gets one more vNIC.
	// An attachment that exists already (the same container and name in
	// its namespace) is returned as it is.
	Attach(ctx context.Context, r AttachRequest) (*AttachResult, error)
	// Detach takes a container's vNIC out; the VM goes with its last one.
	// One that is not there is no error: there is nothing to do.
	Detach(ctx context.Context, r DetachRequest) (*DetachResult, error)
	// Attachment is a container's vNIC as the stored spec has it, and on
	// this machine also as the kernel has it; ErrNotFound when it is not
	// attached.
	Attachment(ctx context.Context, r DetachRequest) (*AttachResult, error)
	// CollectAttachments takes out the vNICs a CNI network attached that
	// are not among those it still uses.
	CollectAttachments(ctx context.Context, r CollectRequest) (*CollectResult, error)
}

// AttachRequest is one vNIC for a container.
type AttachRequest struct {
	Infra string
	// Host is where the container runs; "" is the one host the port
	// group's switch (or, for a network, the infrastructure) is on.
	Host string
	// Container is the runtime's ID; PodNamespace and PodName, under
	// Kubernetes, name the VM instead (ContainerVMName).
	Container, PodNamespace, PodName string
	// CNI is the CNI network that asks, kept with the vNIC for
	// CollectAttachments.
	CNI string
	// Netns is the container's namespace, by its name in /run/netns, and
	// Ifname the vNIC's name in it.
	Netns, Ifname string
	// Tap, instead of Netns and Ifname, is a hypervisor guest's TAP (one
	// libvirt made for a domain): it becomes the vNIC's switch port, and
	// the guest owns its addresses. Guest, the domain's name, names the
	// VM (GuestVMName) rather than the container's ID.
	Tap, Guest string
	// PortGroup or Network is where the vNIC goes.
	PortGroup, Network string
	// MAC is the vNIC's; "" derives one from the container and Ifname.
	MAC string
	// IPs are the vNIC's addresses (with prefix length) as the runtime or
	// its IPAM plugin chose them. With none and Allocate, vnet takes the
	// lowest free address of the port group's (or network's) subnet, one
	// per family the network has.
	IPs      []string
	Allocate bool
	// Shaping is the vNIC's own shaper (CNI's bandwidth capability).
	Shaping *spec.Shaping
	// Wait bounds, on this machine, the wait for the infrastructure's lock
	// and, over etcd, the wait for the host to realize the change.
	Wait time.Duration
	Log  io.Writer
}

// AttachResult is a container's vNIC as attached.
type AttachResult struct {
	Infra  string `json:"infra"`
	Host   string `json:"host"`
	VM     string `json:"vm"`
	NIC    int    `json:"nic"`    // its index among the VM's vNICs (ethN in vnet's names)
	Ifname string `json:"ifname"` // its name in the namespace
	Netns  string `json:"netns,omitempty"`
	MAC    string `json:"mac"`
	// Port is the vNIC's switch port on the host.
	Port string   `json:"port"`
	IPs  []string `json:"ips,omitempty"` // with prefix length
	// Gateways are the port group's or network's gateways, one per
	// family, for the container's default routes.
	Gateways []string `json:"gateways,omitempty"`
	// Existed says the attachment was there already: nothing was changed.
	Existed  bool `json:"existed"`
	Executed int  `json:"executed"`
	// Generation is, over etcd, the generation that holds the change.
	Generation int `json:"generation,omitempty"`
	// Up says, where the kernel was read, whether the vNIC is there, up,
	// with its addresses; Problem says what is not.
	Up      bool   `json:"up"`
	Problem string `json:"problem,omitempty"`
}

// DetachRequest names a container's vNIC.
type DetachRequest struct {
	Infra, Container, Ifname string
	// CNI, when set, must be the network that attached the vNIC.
	CNI  string
	Wait time.Duration
	Log  io.Writer
}

// DetachResult is what a detach took out.
type DetachResult struct {
	Infra    string   `json:"infra"`
	VM       string   `json:"vm,omitempty"`
	Removed  bool     `json:"removed"`       // false: there was nothing to take out
	IPs      []string `json:"ips,omitempty"` // the addresses it had
	Executed int      `json:"executed"`
}

// AttachmentKey names a vNIC a runtime still uses.
type AttachmentKey struct {
	Container string `json:"container"`
	Ifname    string `json:"ifname"`
}

// CollectRequest asks to take out what a CNI network attached and no
// longer uses.
type CollectRequest struct {
	Infra, CNI string
	Keep       []AttachmentKey
	Wait       time.Duration
	Log        io.Writer
}

// CollectResult lists what was taken out.
type CollectResult struct {
	Removed []DetachResult `json:"removed"`
}

// vmNameLen is how long a container's VM name is at most (spec's limit).
const vmNameLen = 32

// ContainerVMName is the name of the VM a container becomes: under
// Kubernetes "p-" and its pod's namespace and name, else "c-" and its ID,
// as much of them as fits in lower-case letters, digits and dashes,
// followed by 16 hex digits of the SHA-256 of the whole (namespace/name,
// or ID). The same container always gets the same name; two get the same
// one only if 64 bits of their hashes agree. A pod keeps its VM's name
// when the runtime makes its sandbox again with another ID.
func ContainerVMName(container, podNamespace, podName string) string {
	if podNamespace != "" && podName != "" {
		return hashedVMName("p-", podNamespace+"/"+podName)
	}
	return hashedVMName("c-", container)
}

// GuestVMName is the name of the VM a libvirt domain becomes: "g-" and as
// much of the domain's name as fits, then 16 hex digits of its SHA-256, as
// ContainerVMName does for containers.
func GuestVMName(domain string) string {
	return hashedVMName("g-", domain)
}

// hashedVMName is prefix, a slug of whole and a hash of whole, within the
// spec's length of a VM name.
func hashedVMName(prefix, whole string) string {
	sum := sha256.Sum256([]byte(whole))
	hash := hex.EncodeToString(sum[:8])
	room := vmNameLen - len(prefix) - 1 - len(hash)
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(whole) {
		if b.Len() >= room {
			break
		}
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	slug := strings.TrimRight(b.String(), "-")
	if slug == "" {
		return prefix + hash
	}
	return prefix + slug + "-" + hash
}

// ContainerMAC is the MAC a container's vNIC gets when the runtime gives
// none: derived from the infrastructure, the container and the vNIC's
// name, so that it stays the same whatever vNICs come and go beside it.
func ContainerMAC(infra, container, ifname string) string {
	return plan.StableMAC(infra, "container/"+container+"/"+ifname)
}

// findAttachment finds a container's VM and, by its name in the
// namespace, its vNIC (-1 when the VM has no such vNIC).
func findAttachment(s *spec.Spec, container, ifname string) (vm *spec.VM, nic int) {
	for i := range s.VMs {
		v := &s.VMs[i]
		if v.ContainerOf() != container {
			continue
		}
		for j := range v.NICs {
			if attachName(&v.NICs[j], j) == ifname {
				return v, j
			}
		}
		return v, -1
	}
	return nil, -1
}

// attachName is what names a vNIC among its VM's for the attacher: a
// guest's TAP, else its name in the container's namespace.
func attachName(n *spec.VNIC, i int) string {
	if t := n.TapName(); t != "" {
		return t
	}
	return n.LinkName(i)
}

// planAttach works out the spec with the container's vNIC attached, and
// what the attachment is. It returns a nil document when the attachment
// exists already.
func planAttach(doc *spec.Document, r AttachRequest) (*spec.Document, *AttachResult, error) {
	return newAttachIndex(doc).attach(r)
}

// attach is planAttach of the indexed spec, which looks up only what the
// container's vNIC touches; the index moves on to the spec it returns.
func (x *attachIndex) attach(r AttachRequest) (*spec.Document, *AttachResult, error) {
	doc := x.doc
	s := doc.Spec
	if r.Tap != "" {
		if r.Netns != "" || r.Ifname != "" && r.Ifname != r.Tap {
			return nil, nil, Invalid("a vNIC is a TAP or in a namespace, not both")
		}
		r.Ifname = r.Tap // a TAP's vNIC is named by the TAP (spec.VNIC.LinkName)
	}
	if r.Container == "" || r.Ifname == "" || r.Netns == "" && r.Tap == "" {
		return nil, nil, Invalid("an attachment needs the container's ID, its namespace and the vNIC's name in it, or a guest's ID and its TAP")
	}
	if vm, i := x.attachment(r.Container, r.Ifname); vm != nil && i >= 0 {
		res := resultOf(s, vm, i)
		res.Existed = true
		return nil, res, nil
	}
	host, err := attachHost(s, r)
	if err != nil {
		return nil, nil, err
	}
	n := spec.VNIC{PortGroup: r.PortGroup, Network: r.Network, MAC: strings.ToLower(r.MAC), Shaping: r.Shaping,
		Attach: &spec.Attach{Netns: r.Netns, Ifname: r.Ifname, Container: r.Container, CNI: r.CNI}}
	if r.Tap != "" {
		n.Attach.Ifname, n.Attach.Tap = "", r.Tap
	}
	if n.MAC == "" {
		n.MAC = ContainerMAC(s.Name, r.Container, r.Ifname)
	}
	if err := x.addresses(&n, r); err != nil {
		return nil, nil, err
	}
	vm, err := x.containerVM(r, host)
	if err != nil {
		return nil, nil, err
	}
	vm.NICs = append(vm.NICs, n)
	e := vmsEdit{put: []spec.VM{vm}}
	next, err := x.edit(e)
	if err != nil {
		return nil, nil, fmt.Errorf("attach %s %s to %s: %w", r.Container, r.Ifname, s.Name, err)
	}
	v, _ := x.vm(vm.Name)
	return next, resultOf(next.Spec, v, len(vm.NICs)-1), nil
}

// containerVM is the VM the container is, as it is to be written: its VM
// so far, or a new one. A VM of that name that another container made
// (the same pod, in a sandbox made again) is the runtime's leftover: the
// new one takes its place, without its vNICs. A VM of that name that no
// container made is the spec's own, and is refused.
func (x *attachIndex) containerVM(r AttachRequest, host string) (spec.VM, error) {
	s := x.doc.Spec
	if old, _ := x.attachment(r.Container, r.Ifname); old != nil {
		if old.Host != host {
			return spec.VM{}, Invalid(fmt.Sprintf("container %s is VM %s on host %s, not on %s", r.Container, old.Name, old.Host, host))
		}
		if (old.NICs[0].TapName() == "") != (r.Tap == "") {
			return spec.VM{}, Invalid(fmt.Sprintf("%s's vNICs are all TAPs or all in one namespace", old.Name))
		}
		if ns := old.NICs[0].NetnsName(); ns != r.Netns {
			return spec.VM{}, Invalid(fmt.Sprintf("container %s's vNICs are in namespace %s, not %s", r.Container, ns, r.Netns))
		}
		vm := *old
		vm.NICs = slices.Clone(old.NICs)
		return vm, nil
	}
	name := ContainerVMName(r.Container, r.PodNamespace, r.PodName)
	if r.Guest != "" {
		name = GuestVMName(r.Guest)
	}
	if old, ok := x.vm(name); ok && old.ContainerOf() == "" {
		return spec.VM{}, Invalid(fmt.Sprintf("%s has a VM %s of its own, which no container attached: it is the name container %s's VM would take", s.Name, name, r.Container))
	}
	return spec.VM{Name: name, Host: host}, nil
}

// attachHost is the host a container's vNIC goes on: the request's, else
// the one host its port group's switch is on (for a network, the one
// host of the infrastructure).
func attachHost(s *spec.Spec, r AttachRequest) (string, error) {
	var where []string
	switch {
	case r.PortGroup != "" && r.Network != "":
		return "", Invalid("a vNIC is on a port group or on a network, not both")
	case r.PortGroup != "":
		sw, ok := s.PortGroupSwitch(r.PortGroup)
		if !ok {
			return "", Invalid(fmt.Sprintf("%s has no port group %q", s.Name, r.PortGroup))
		}
		where = sw.SwitchHosts()
	case r.Network != "":
		if _, ok := s.Network(r.Network); !ok {
			return "", Invalid(fmt.Sprintf("%s has no network %q", s.Name, r.Network))
		}
		for _, h := range s.Hosts {
			if !h.Native {
				where = append(where, h.Name)
			}
		}
	default:
		return "", Invalid("say which port group or network the vNIC is on")
	}
	switch {
	case r.Host != "" && slices.Contains(where, r.Host):
		return r.Host, nil
	case r.Host != "":
		return "", Invalid(fmt.Sprintf("host %q of %s does not carry %s%s (it is on %s)", r.Host, s.Name, r.PortGroup, r.Network, strings.Join(where, ", ")))
	case len(where) == 1:
		return where[0], nil
	}
	return "", Invalid(fmt.Sprintf("%s%s of %s is on hosts %s: say which one the container runs on", r.PortGroup, r.Network, s.Name, strings.Join(where, ", ")))
}

// addresses gives the vNIC its addresses: those the request brings, else,
// when asked, the lowest free ones of its subnets.
func (x *attachIndex) addresses(n *spec.VNIC, r AttachRequest) error {
	s := x.doc.Spec
	var subnets []string
	if pg, _, ok := s.PortGroup(r.PortGroup); ok && pg.Subnet != "" {
		subnets = append(subnets, pg.Subnet)
	}
	if net, ok := s.Network(r.Network); ok {
		for _, sub := range []string{net.Subnet, net.Subnet6} {
			if sub != "" {
				subnets = append(subnets, sub)
			}
		}
	}
	ips := r.IPs
	if len(ips) == 0 && r.Allocate {
		if len(subnets) == 0 {
			return Invalid(fmt.Sprintf("%s%s has no subnet to allocate addresses from: give it subnet:, or delegate to an IPAM plugin", r.PortGroup, r.Network))
		}
		for _, sub := range subnets {
			p, err := netip.ParsePrefix(sub)
			if err != nil {
				return err
			}
			ip, err := x.freeAddress(p)
			if err != nil {
				return fmt.Errorf("%s%s: %w", r.PortGroup, r.Network, err)
			}
			ips = append(ips, ip)
		}
	}
	for _, ip := range ips {
		p, err := netip.ParsePrefix(ip)
		if err != nil {
			return Invalid(fmt.Sprintf("address %q is not an address with a prefix length", ip))
		}
		switch {
		case r.Network != "" && p.Addr().Is6() && n.IP6 == "":
			n.IP6 = p.String()
		case r.Network != "" && p.Addr().Is4() && n.IP == "":
			n.IP = p.String()
		case r.Network == "" && n.IP == "":
			n.IP = p.String()
		default:
			return Invalid(fmt.Sprintf("vnet gives a vNIC on a port group one address and one on a network one of each family; got %s", strings.Join(ips, ", ")))
		}
	}
	return nil
}

// resultOf describes the i-th vNIC of a container's VM.
func resultOf(s *spec.Spec, vm *spec.VM, i int) *AttachResult {
	n := vm.NICs[i]
	res := &AttachResult{Infra: s.Name, Host: vm.Host, VM: vm.Name, NIC: i, Ifname: attachName(&n, i), Netns: n.NetnsName(),
		MAC: n.MAC, Port: plan.SwitchPort(s.Name, vm, i)}
	for _, ip := range []string{n.IP, n.IP6} {
		if ip != "" {
			res.IPs = append(res.IPs, ip)
		}
	}
	if pg, _, ok := s.PortGroup(n.PortGroup); ok && pg.Gateway != "" {
		res.Gateways = append(res.Gateways, pg.Gateway)
	}
	if net, ok := s.Network(n.Network); ok {
		for _, gw := range []string{net.Gateway, net.Gateway6} {
			if gw != "" {
				res.Gateways = append(res.Gateways, gw)
			}
		}
	}
	return res
}

// planDetach works out the spec without the container's vNIC; nil when
// there is none.
func planDetach(doc *spec.Document, r DetachRequest) (*spec.Document, *DetachResult, error) {
	return newAttachIndex(doc).detach(r)
}

// detach is planDetach of the indexed spec; the index moves on to the
// spec it returns.
func (x *attachIndex) detach(r DetachRequest) (*spec.Document, *DetachResult, error) {
	doc := x.doc
	res := &DetachResult{Infra: doc.Spec.Name}
	vm, i := x.attachment(r.Container, r.Ifname)
	if vm == nil || i < 0 || r.CNI != "" && vm.NICs[i].Attach.CNI != r.CNI {
		return nil, res, nil
	}
	res.VM, res.Removed = vm.Name, true
	res.IPs = resultOf(doc.Spec, vm, i).IPs
	next, err := x.withoutVNICs(map[string][]int{vm.Name: {i}})
	return next, res, err
}

// vmsEdit is a change of a spec's VMs: those named in drop taken out,
// those in put written in place of the VM of their name, or added at the
// end (spec.EditVMs).
type vmsEdit struct {
	drop []string
	put  []spec.VM
}

// edit makes e of the indexed spec, and moves the index on to the result.
func (x *attachIndex) edit(e vmsEdit) (*spec.Document, error) {
	next, err := spec.EditVMs(x.doc, e.drop, e.put)
	if err != nil {
		return nil, err
	}
	x.advance(next, e)
	return next, nil
}

// withoutVNICs is the indexed spec without the listed vNICs of VMs (by
// index); a VM left with none goes.
func (x *attachIndex) withoutVNICs(gone map[string][]int) (*spec.Document, error) {
	var e vmsEdit
	for _, name := range sortedNames(gone) {
		vm, ok := x.vm(name)
		if !ok {
			continue
		}
		kept := *vm
		kept.NICs = nil
		for j, n := range vm.NICs {
			if !slices.Contains(gone[name], j) {
				kept.NICs = append(kept.NICs, n)
			}
		}
		if len(kept.NICs) == 0 {
			e.drop = append(e.drop, name)
		} else {
			e.put = append(e.put, kept)
		}
	}
	return x.edit(e)
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// planCollect works out the spec without the vNICs the CNI network
// attached that it does not keep; nil when there are none.
func planCollect(doc *spec.Document, r CollectRequest) (*spec.Document, *CollectResult, error) {
	return newAttachIndex(doc).collect(r)
}

// collect is planCollect of the indexed spec; the index moves on to the
// spec it returns.
func (x *attachIndex) collect(r CollectRequest) (*spec.Document, *CollectResult, error) {
	doc := x.doc
	keep := map[AttachmentKey]bool{}
	for _, k := range r.Keep {
		keep[k] = true
	}
	res := &CollectResult{}
	gone := map[string][]int{}
	for i := range doc.Spec.VMs {
		vm := &doc.Spec.VMs[i]
		for j, n := range vm.NICs {
			a := n.Attach
			if a == nil || a.CNI != r.CNI || a.Container == "" || keep[AttachmentKey{a.Container, n.LinkName(j)}] {
				continue
			}
			gone[vm.Name] = append(gone[vm.Name], j)
			res.Removed = append(res.Removed, DetachResult{Infra: doc.Spec.Name, VM: vm.Name, Removed: true, IPs: resultOf(doc.Spec, vm, j).IPs})
		}
	}
	if len(gone) == 0 {
		return nil, res, nil
	}
	next, err := x.withoutVNICs(gone)
	return next, res, err
}
