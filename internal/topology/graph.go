// Package topology draws an infrastructure: its hosts, the VMs on them with
// their vNICs, host ports, port groups, virtual networks and their
// routers, switches (standard, distributed, private), uplinks, physical
// NICs and the physical network they plug into, as a graph (Build) written
// as Graphviz dot (WriteDOT) or as SVG (WriteSVG). Given a status, the
// graph also shows the state of each vNIC, host port and NIC.
//
// The picture is layered from the workloads down to the wire, the order a
// frame takes out of a VM:
//
//	row 0  VMs (a cell per vNIC) and host ports, boxed by host
//	row 1  port groups and virtual networks
//	row 2  switches and routers
//	row 3  physical NICs, boxed by host under the same host's VMs
//	row 4  the physical network
//
// The SVG is laid out here rather than by Graphviz: the dashboard embeds
// it, and `vnet server` should not need a program installed beside it to
// draw a page; the same spec draws the same bytes whatever machine or
// Graphviz version, which golden files can hold; and the rows above are
// what an operator expects, which a general layout only approximates. The
// dot text is for people who want Graphviz's own layout or another format
// (dot -Tpng).
package topology

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/status"
)

// Kind is what a node stands for.
type Kind string

// The kinds of nodes.
const (
	KindVM        Kind = "vm"
	KindHostPort  Kind = "hostport"
	KindPortGroup Kind = "portgroup"
	KindNetwork   Kind = "network"
	KindSwitch    Kind = "switch"
	KindRouter    Kind = "router"
	KindNIC       Kind = "nic"
	KindPhysical  Kind = "physical"
)

// rowOf is the row a kind of node is drawn in.
var rowOf = map[Kind]int{
	KindVM: 0, KindHostPort: 0,
	KindPortGroup: 1, KindNetwork: 1,
	KindSwitch: 2, KindRouter: 2,
	KindNIC: 3, KindPhysical: 4,
}

const numRows = 5

// Graph is an infrastructure as nodes and edges.
type Graph struct {
	Name  string `json:"name"`
	Hosts []Host `json:"hosts"`
	Nodes []Node `json:"nodes"`
	Edges []Edge `json:"edges"`
}

// Host is a host: the nodes that name it are drawn inside its box.
type Host struct {
	Name   string `json:"name"`
	Native bool   `json:"native,omitempty"`
}

// Node is one thing in the picture.
type Node struct {
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	Name string `json:"name"`
	// Host is the host it lives on, for VMs, host ports and NICs.
	Host string `json:"host,omitempty"`
	// Detail is what is drawn under the name, a line each.
	Detail []string `json:"detail,omitempty"`
	// Ports are a VM's vNICs, drawn as cells of it.
	Ports []Port `json:"ports,omitempty"`
	// State is what a status said of it ("up", "down", ...), if given.
	State string `json:"state,omitempty"`
}

// Port is a vNIC of a VM.
type Port struct {
	Name   string `json:"name"`
	Detail string `json:"detail,omitempty"`
	State  string `json:"state,omitempty"`
}

// Edge joins two nodes, from the upper row to the lower.
type Edge struct {
	From string `json:"from"`
	// FromPort is the vNIC of a VM the edge leaves from.
	FromPort string `json:"from_port,omitempty"`
	To       string `json:"to"`
	Label    string `json:"label,omitempty"`
	// Dashed marks what carries no frames of its own: a vNIC cut from its
	// port group, a network's tunnels over a port group.
	Dashed bool `json:"dashed,omitempty"`
}

// Node IDs name what the node stands for; they are unique in a graph.
func vmID(name string) string        { return "vm/" + name }
func portGroupID(name string) string { return "portgroup/" + name }
func networkID(name string) string   { return "network/" + name }
func switchID(name string) string    { return "switch/" + name }
func routerID(name string) string    { return "router/" + name }
func nicID(host, nic string) string  { return "nic/" + host + "/" + nic }
func hostPortID(host, port string) string {
	return "hostport/" + host + "/" + port
}

const physicalID = "physical"

// Build makes the graph of a spec; st, when not nil, adds the states it
// read (a port's, a NIC's). The spec is expected to be valid: an edge to
// something the spec does not define is left out.
func Build(s *spec.Spec, st *status.Infra) *Graph {
	g := &Graph{Name: s.Name, Hosts: []Host{}, Nodes: []Node{}, Edges: []Edge{}}
	states := statesOf(st)
	for _, h := range s.Hosts {
		g.Hosts = append(g.Hosts, Host{Name: h.Name, Native: h.Native})
	}
	g.addWorkloads(s, states)
	g.addNetworks(s)
	g.addSwitches(s, st)
	g.addNICs(s, states)
	g.dropDangling()
	return g
}

func (g *Graph) addWorkloads(s *spec.Spec, states map[string]string) {
	for _, vm := range s.VMs {
		n := Node{ID: vmID(vm.Name), Kind: KindVM, Name: vm.Name, Host: vm.Host}
		if vm.CPUs > 0 {
			n.Detail = append(n.Detail, strconv.FormatFloat(vm.CPUs, 'g', -1, 64)+" CPU")
		}
		for i, nic := range vm.NICs {
			eth := "eth" + strconv.Itoa(i)
			n.Ports = append(n.Ports, Port{Name: eth, Detail: vnicDetail(&nic), State: states["vm/"+vm.Name+"/"+eth]})
			e := Edge{From: n.ID, FromPort: eth, Dashed: !nic.IsConnected()}
			switch {
			case nic.PortGroup != "":
				e.To = portGroupID(nic.PortGroup)
			case nic.Network != "":
				e.To = networkID(nic.Network)
			default:
				continue
			}
			g.Edges = append(g.Edges, e)
		}
		g.Nodes = append(g.Nodes, n)
	}
	for i, hp := range s.HostPorts {
		name := s.HostPortName(i)
		id := hostPortID(hp.Host, name)
		g.Nodes = append(g.Nodes, Node{ID: id, Kind: KindHostPort, Name: name, Host: hp.Host, Detail: nonEmpty(address(hp.IP)),
			State: states["hostport/"+hp.Host+"/"+name]})
		g.Edges = append(g.Edges, Edge{From: id, To: portGroupID(hp.PortGroup)})
	}
}

// vnicDetail is what a vNIC's cell says under its name: its address, or
// what it attaches.
func vnicDetail(n *spec.VNIC) string {
	switch {
	case n.IP != "":
		return address(n.IP)
	case n.IP6 != "":
		return address(n.IP6)
	case n.TapName() != "":
		return "tap " + n.TapName()
	case n.NetnsName() != "":
		return "netns " + n.NetnsName()
	}
	return ""
}

// address is an address without its prefix length, which the picture has
// no room for.
func address(cidr string) string {
	a, _, _ := strings.Cut(cidr, "/")
	return a
}

func (g *Graph) addNetworks(s *spec.Spec) {
	var routers []string
	seen := map[string]bool{}
	for _, n := range s.Networks {
		var detail []string
		if n.VNI != 0 {
			detail = append(detail, "VNI "+strconv.Itoa(n.VNI))
		}
		detail = append(detail, nonEmpty(n.Subnet)...)
		detail = append(detail, nonEmpty(n.Subnet6)...)
		g.Nodes = append(g.Nodes, Node{ID: networkID(n.Name), Kind: KindNetwork, Name: n.Name, Detail: detail})
		if n.Router != "" {
			g.Edges = append(g.Edges, Edge{From: networkID(n.Name), To: routerID(n.Router)})
			if !seen[n.Router] {
				seen[n.Router] = true
				routers = append(routers, n.Router)
			}
		}
		if n.PortGroup != "" {
			g.Edges = append(g.Edges, Edge{From: networkID(n.Name), To: portGroupID(n.PortGroup), Label: "tunnels", Dashed: true})
		}
	}
	for _, r := range routers {
		g.Nodes = append(g.Nodes, Node{ID: routerID(r), Kind: KindRouter, Name: r, Detail: []string{"router"}})
	}
}

func (g *Graph) addSwitches(s *spec.Spec, st *status.Infra) {
	types := map[string]string{}
	if st != nil {
		for _, sw := range st.Switches {
			types[sw.Name] = sw.Type
		}
	}
	for i := range s.Switches {
		sw := &s.Switches[i]
		typ := types[sw.Name]
		if typ == "" {
			typ = switchType(sw)
		}
		detail := []string{typ}
		if sw.IOCEnabled() {
			detail = append(detail, "NIOC")
		}
		if sw.MTU != 0 {
			detail = append(detail, "MTU "+strconv.Itoa(sw.MTU))
		}
		g.Nodes = append(g.Nodes, Node{ID: switchID(sw.Name), Kind: KindSwitch, Name: sw.Name, Detail: detail})
		for j := range sw.PortGroups {
			pg := &sw.PortGroups[j]
			g.Nodes = append(g.Nodes, Node{ID: portGroupID(pg.Name), Kind: KindPortGroup, Name: pg.Name, Detail: portGroupDetail(sw, pg)})
			g.Edges = append(g.Edges, Edge{From: portGroupID(pg.Name), To: switchID(sw.Name)})
		}
		for _, u := range sw.Uplinks {
			for _, host := range slices.Sorted(maps.Keys(u.NICs)) {
				g.Edges = append(g.Edges, Edge{From: switchID(sw.Name), To: nicID(host, u.NICs[host]), Label: u.Name})
			}
		}
	}
}

// switchType says what kind of switch a spec makes, as vnet status does:
// private without uplinks, distributed with uplinks on several hosts.
func switchType(sw *spec.Switch) string {
	switch {
	case len(sw.Uplinks) == 0:
		return "private"
	case len(sw.SwitchHosts()) > 1:
		return "distributed"
	}
	return "standard"
}

// portGroupDetail is a port group's policy in short: its pool where the
// switch runs Network I/O Control, its shaping, its ACL.
func portGroupDetail(sw *spec.Switch, pg *spec.PortGroup) []string {
	var out []string
	if sw.IOCEnabled() {
		out = append(out, "pool "+pg.PoolOf())
	}
	if sh := pg.Shaping; sh != nil {
		var dirs []string
		if sh.Egress != nil && sh.Egress.Average > 0 {
			dirs = append(dirs, "out "+sh.Egress.Average.String())
		}
		if sh.Ingress != nil && sh.Ingress.Average > 0 {
			dirs = append(dirs, "in "+sh.Ingress.Average.String())
		}
		if len(dirs) > 0 {
			out = append(out, strings.Join(dirs, ", "))
		}
	}
	if pg.HasACL() {
		rules := "ACL, " + strconv.Itoa(len(pg.ACL.Rules)) + " rules"
		if len(pg.ACL.Rules) == 1 {
			rules = "ACL, 1 rule"
		}
		out = append(out, rules)
	}
	return out
}

func (g *Graph) addNICs(s *spec.Spec, states map[string]string) {
	for _, h := range s.Hosts {
		for _, n := range h.NICs {
			var detail []string
			if n.Speed > 0 {
				detail = append(detail, n.Speed.String())
			}
			if n.IsDevice() {
				detail = append(detail, "device "+n.Device)
			}
			detail = append(detail, nonEmpty(address(n.IP))...)
			g.Nodes = append(g.Nodes, Node{ID: nicID(h.Name, n.Name), Kind: KindNIC, Name: n.Name, Host: h.Name, Detail: detail,
				State: states["nic/"+h.Name+"/"+n.Name]})
			g.Edges = append(g.Edges, Edge{From: nicID(h.Name, n.Name), To: physicalID})
		}
	}
	for _, e := range g.Edges {
		if e.To == physicalID {
			g.Nodes = append(g.Nodes, Node{ID: physicalID, Kind: KindPhysical, Name: "physical network"})
			break
		}
	}
}

// dropDangling leaves out the edges to nodes the spec does not define.
func (g *Graph) dropDangling() {
	ids := make(map[string]bool, len(g.Nodes))
	for _, n := range g.Nodes {
		ids[n.ID] = true
	}
	kept := g.Edges[:0]
	for _, e := range g.Edges {
		if ids[e.From] && ids[e.To] {
			kept = append(kept, e)
		}
	}
	g.Edges = kept
}

// statesOf indexes a status's states by the ids of what they are of:
// vm/NAME/ethN, hostport/HOST/NAME, nic/HOST/NAME.
func statesOf(st *status.Infra) map[string]string {
	out := map[string]string{}
	if st == nil {
		return out
	}
	for _, vm := range st.VMs {
		for _, p := range vm.NICs {
			out["vm/"+vm.Name+"/"+p.Name] = p.State
		}
	}
	for _, p := range st.HostPorts {
		out["hostport/"+p.Host+"/"+p.Name] = p.State
	}
	for _, h := range st.Hosts {
		for _, n := range h.NICs {
			out["nic/"+h.Name+"/"+n.Name] = n.State
		}
	}
	return out
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
