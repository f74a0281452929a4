package service

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/vnet-project/vnet/internal/metrics"
	"github.com/vnet-project/vnet/internal/plan"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
)

// The kinds of objects describe shows.
const (
	DescribeVM        = "vm"
	DescribePortGroup = "portgroup"
	DescribeNetwork   = "network"
)

// DescribeKind reads a kind as people write it (vm, VM, vms, portgroup,
// pg, network, net) or says which there are.
func DescribeKind(s string) (string, error) {
	switch strings.ToLower(s) {
	case "vm", "vms":
		return DescribeVM, nil
	case "portgroup", "portgroups", "pg":
		return DescribePortGroup, nil
	case "network", "networks", "net":
		return DescribeNetwork, nil
	}
	return "", Invalid(fmt.Sprintf("%q: not a kind describe shows: want vm, portgroup or network", s))
}

// Description is one object of an infrastructure as an operator looks it
// over: what the applied spec says of it, facts vnet derives (its switch,
// hosts, VNI), each of its ports as the kernel has it (on this machine)
// or as its host reports (over etcd) with its policy and counters, and
// recent events.
type Description struct {
	Infra string `json:"infra"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	// Spec is the object as the applied spec writes it, allocations
	// pinned (YAML).
	Spec  string          `json:"spec"`
	Facts []Fact          `json:"facts"`
	Ports []DescribedPort `json:"ports"`
	// Events are the newest events of the infrastructure that concern
	// the object (its ports' failovers and moves) or all of it (applies,
	// destroys).
	Events []Event `json:"events"`
	// Notes say what could not be read, and why.
	Notes []string `json:"notes,omitempty"`
}

// Fact is one thing vnet derives of an object.
type Fact struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// DescribedPort is a port of the object: its state, its policy and what
// it counted.
type DescribedPort struct {
	VM string `json:"vm,omitempty"` // empty for a host port
	status.Port
	Security *SecurityStatus `json:"security,omitempty"`
	Traffic  *PortTraffic    `json:"traffic,omitempty"`
}

// PortTraffic is a port's byte counters now: what it sent into its switch
// and received from it.
type PortTraffic struct {
	Up      bool   `json:"up"`
	TxBytes uint64 `json:"tx_bytes"`
	RxBytes uint64 `json:"rx_bytes"`
}

// describeEvents is how many of the infrastructure's events describe looks
// through.
const describeEvents = 200

// Describe shows one object of an infrastructure on this machine.
func (l *Local) Describe(ctx context.Context, name, kind, object string) (*Description, error) {
	return describe(ctx, l, name, kind, object)
}

// Describe shows one object of an infrastructure in etcd.
func (c *Cluster) Describe(ctx context.Context, name, kind, object string) (*Description, error) {
	return describe(ctx, c, name, kind, object)
}

// describer is what describe needs of a back end.
type describer interface {
	historian
	Counting() (metrics.Counting, func(), error)
	ReadsKernel() bool
}

func describe(ctx context.Context, b describer, name, kind, object string) (*Description, error) {
	kind, err := DescribeKind(kind)
	if err != nil {
		return nil, err
	}
	a, err := appliedOf(b, name)
	if err != nil {
		return nil, err
	}
	doc, err := b.Load(a.SpecFile, a.Spec)
	if err != nil {
		return nil, err
	}
	d := &Description{Infra: name, Kind: kind, Name: object, Ports: []DescribedPort{}, Events: []Event{}}
	if d.Facts, err = facts(doc.Spec, a.Allocations, kind, object); err != nil {
		return nil, err
	}
	d.Spec = objectYAML(doc.Source, kind, object)
	sts, err := b.Status(ctx, []string{name})
	switch {
	case err != nil:
		d.Notes = append(d.Notes, "status: "+err.Error())
	case len(sts) == 1:
		d.Ports = portsOf(sts[0].Infra, a.Allocations, kind, object)
	}
	d.addTraffic(b, doc.Spec)
	if evs, err := b.Events(ctx, name, describeEvents); err != nil {
		d.Notes = append(d.Notes, "events: "+err.Error())
	} else {
		d.Events = concerning(evs, d.Ports)
	}
	return d, nil
}

// facts are what vnet derives of the object; an object the spec does not
// have is ErrNotFound.
func facts(s *spec.Spec, alloc Allocations, kind, object string) ([]Fact, error) {
	f := []Fact{}
	add := func(name, value string) {
		if value != "" {
			f = append(f, Fact{name, value})
		}
	}
	switch kind {
	case DescribeVM:
		vm, ok := s.VM(object)
		if !ok {
			return nil, notInSpec(s.Name, kind, object)
		}
		add("host", vm.Host)
		if !vm.Attached() {
			add("namespace", plan.NSName(s.Name, vm.Name))
		}
		if vm.CPUs > 0 {
			add("cpus", fmt.Sprint(vm.CPUs))
		}
		for i, n := range vm.NICs {
			on := n.PortGroup
			if n.Network != "" {
				on = "network " + n.Network
			}
			add(fmt.Sprintf("eth%d", i), fmt.Sprintf("%s, MAC %s", on, alloc.MACs[fmt.Sprintf("%s eth%d", vm.Name, i)]))
		}
	case DescribePortGroup:
		pg, sw, ok := s.PortGroup(object)
		if !ok {
			return nil, notInSpec(s.Name, kind, object)
		}
		add("switch", sw.Name)
		add("hosts", strings.Join(sw.SwitchHosts(), ", "))
		add("pool", pg.PoolOf())
		if vni, ok := alloc.VNIs["switch "+sw.Name]; ok {
			add("switch VNI", fmt.Sprint(vni))
		}
	case DescribeNetwork:
		n, ok := s.Network(object)
		if !ok {
			return nil, notInSpec(s.Name, kind, object)
		}
		add("VNI", fmt.Sprint(alloc.VNIs["network "+n.Name]))
		add("hosts", strings.Join(s.NetworkHosts(n.Name), ", "))
		add("router", n.Router)
	}
	return f, nil
}

func notInSpec(infra, kind, object string) error {
	return tagged{ErrNotFound, fmt.Sprintf("%s has no %s %q", infra, kind, object)}
}

// portsOf are the object's ports in a status, with their policies; a
// port the status gives no MAC (over etcd, where no kernel is read) has
// the one vnet allocated.
func portsOf(st *Status, alloc Allocations, kind, object string) []DescribedPort {
	security := map[string]*SecurityStatus{}
	for i := range st.Security {
		security[st.Security[i].Port] = &st.Security[i]
	}
	out := []DescribedPort{}
	for _, vm := range st.VMs {
		for _, p := range vm.NICs {
			if kind == DescribeVM && vm.Name == object || kind == DescribePortGroup && p.PortGroup == object ||
				kind == DescribeNetwork && p.Network == object {
				p.Host = vm.Host
				if p.MAC == "" {
					p.MAC = alloc.MACs[vm.Name+" "+p.Name]
				}
				out = append(out, DescribedPort{VM: vm.Name, Port: p, Security: security[vm.Name+" "+p.Name]})
			}
		}
	}
	if kind == DescribePortGroup {
		for _, p := range st.HostPorts {
			if p.PortGroup == object {
				out = append(out, DescribedPort{Port: p, Security: security[p.Host+" "+p.Name]})
			}
		}
	}
	return out
}

// addTraffic reads the ports' byte counters where the back end reads the
// kernel, and says where they are otherwise.
func (d *Description) addTraffic(b describer, s *spec.Spec) {
	if !b.ReadsKernel() {
		d.Notes = append(d.Notes, "traffic counters are each host's over etcd: its agent's --metrics-addr serves them")
		return
	}
	c, done, err := b.Counting()
	if err != nil {
		d.Notes = append(d.Notes, "traffic: "+err.Error())
		return
	}
	defer done()
	snap, err := metrics.Read(c, s)
	if err != nil {
		d.Notes = append(d.Notes, "traffic: "+err.Error())
		return
	}
	for i := range d.Ports {
		p := &d.Ports[i]
		for _, smp := range snap.Ports {
			if smp.VM == p.VM && smp.VNIC == p.Name && (p.VM != "" || smp.Host == p.Host) {
				p.Traffic = &PortTraffic{Up: smp.Up, TxBytes: smp.TxBytes, RxBytes: smp.RxBytes}
			}
		}
	}
}

// concerning are the events of the object's ports, and those of the whole
// infrastructure (no port), newest first, at most ten.
func concerning(evs []Event, ports []DescribedPort) []Event {
	mine := map[string]bool{}
	for _, p := range ports {
		who := p.VM
		if who == "" {
			who = p.Host
		}
		mine[who+"/"+p.Name] = true
	}
	out := []Event{}
	for _, ev := range evs {
		if (ev.Port == "" || mine[ev.Port]) && len(out) < 10 {
			out = append(out, ev)
		}
	}
	return out
}

// objectYAML is the object's part of a spec's YAML; "" when it is not
// found there.
func objectYAML(src []byte, kind, object string) string {
	var root yaml.Node
	if yaml.Unmarshal(src, &root) != nil || len(root.Content) == 0 {
		return ""
	}
	var found *yaml.Node
	named := func(list *yaml.Node) *yaml.Node {
		if list == nil || list.Kind != yaml.SequenceNode {
			return nil
		}
		for _, item := range list.Content {
			if n := mapValue(item, "name"); n != nil && n.Value == object {
				return item
			}
		}
		return nil
	}
	top := root.Content[0]
	switch kind {
	case DescribeVM:
		found = named(mapValue(top, "vms"))
	case DescribeNetwork:
		found = named(mapValue(top, "networks"))
	case DescribePortGroup:
		if sws := mapValue(top, "switches"); sws != nil && sws.Kind == yaml.SequenceNode {
			for _, sw := range sws.Content {
				if found = named(mapValue(sw, "portgroups")); found != nil {
					break
				}
			}
		}
	}
	if found == nil {
		return ""
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if enc.Encode(blockStyle(found)) != nil {
		return ""
	}
	return buf.String()
}

// blockStyle is a copy of n written in block style, easier to read alone
// than the flow style a spec may use for one object a line.
func blockStyle(n *yaml.Node) *yaml.Node {
	c := *n
	c.Style &^= yaml.FlowStyle
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, child := range n.Content {
		c.Content[i] = blockStyle(child)
	}
	return &c
}

func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
