package spec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestValidateEditIsValidate checks validateEdit against Validate on many
// generated edits of specs that validated: VMs taken out, written in place
// of others and added, valid and broken in every way Validate refuses a
// VM, in specs with and without what makes validateEdit fall back to
// Validate (load balancers, networks, a switch carrying tunnels). Both
// must say the same, error for error.
func TestValidateEditIsValidate(t *testing.T) {
	fast, invalid := map[string]int{}, map[string]int{}
	tried := map[string]int{}
	for seed := uint64(0); seed < 1500; seed++ {
		g := newEditGen(seed)
		base := g.base(t)
		next, at, kind := g.edit(base.Spec)
		tried[kind]++
		probe := func() *Document {
			return &Document{Spec: next, File: "p.yaml", located: &lazyPositions{fill: noPositions}}
		}
		want := Validate(probe())
		got := validateEdit(probe(), at)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d, edit %s: validateEdit says %v, Validate %v\nVMs written at %v: %+v", seed, kind, got, want, at, writtenVMs(next, at))
		}
		if validatesAfterEdit(probe(), at) {
			fast[kind]++
		}
		if len(want) > 0 {
			invalid[kind]++
		}
	}
	// The generator must make what it is meant to: each kind of broken
	// edit refused at least once, and valid edits taken by the checks of
	// the VMs written alone.
	for _, k := range editKinds {
		switch {
		case tried[k] == 0:
			t.Errorf("edit %s never tried", k)
		case k == "valid" || k == "network" || k == "drop":
			if invalid[k] == tried[k] {
				t.Errorf("edit %s: all %d refused", k, tried[k])
			}
		case invalid[k] == 0:
			t.Errorf("edit %s: none of %d refused", k, tried[k])
		}
	}
	if fast["valid"] < tried["valid"]/2 || fast["drop"] < tried["drop"]/2 {
		t.Errorf("checked on their own: %d of %d valid edits, %d of %d drops", fast["valid"], tried["valid"], fast["drop"], tried["drop"])
	}
	t.Logf("tried %v\nrefused %v\nchecked on their own %v", tried, invalid, fast)
}

func writtenVMs(s *Spec, at []int) []VM {
	var out []VM
	for _, i := range at {
		out = append(out, s.VMs[i])
	}
	return out
}

// editKinds are the edits editGen makes: "valid" writes valid VMs, "drop"
// only takes VMs out, "network" writes a valid VM on a network; the rest
// break a VM written as named.
var editKinds = []string{
	"valid", "drop", "network",
	"dupIP", "dupIPHostPort", "dupIPNative", "dupIP6", "dupIPWritten", "dupMAC", "dupMACWritten",
	"unknownPG", "pgNotOnHost", "noPG", "badName", "longName", "hostName", "dupName",
	"unknownHost", "nativeHost", "noHost", "outsideSubnet", "networkAddr", "badIP", "mtuBig", "mtuRange",
	"multicastMAC", "badMAC", "cpus", "dupTap", "dupTapWritten", "vnetNetns", "attachCPUs", "attachMixed",
	"networkDupIP", "networkDupIP6", "networkDupMAC", "networkGateway", "networkNoUnderlay", "pgAndNetwork", "ip6OnPG", "tooManyNICs", "carrier", "badShaping", "dropBackend",
}

type editGen struct {
	r                          *rand.Rand
	native, lb, nets, carrier  bool
	h3                         bool // a host without an underlay address
	netIP6s, netMACs           []string
	next                       int // numbers names and addresses, unique
	pgIPs, ip6s, macs, taps    []string
	hostPortIP, nativeIP, nIPs string
	netIPs                     []string
	kind                       string // the edit to make; "" for one of editKinds
}

func newEditGen(seed uint64) *editGen {
	r := rand.New(rand.NewPCG(seed, 7))
	return &editGen{r: r, native: r.IntN(3) == 0, lb: r.IntN(4) == 0, nets: r.IntN(2) == 0, carrier: r.IntN(4) == 0, h3: r.IntN(4) == 0,
		hostPortIP: "10.1.255.1/16", nativeIP: "10.1.200.1/16"}
}

// base is a spec of 3 to 20 VMs that validates.
func (g *editGen) base(t *testing.T) *Document {
	var b strings.Builder
	b.WriteString("name: prop\nhosts:\n")
	b.WriteString("  - {name: h1, underlay: 192.168.0.1, nics: [{name: eth0, speed: 1Gbit}]}\n")
	b.WriteString("  - {name: h2, underlay: 192.168.0.2, nics: [{name: eth0, speed: 1Gbit}]}\n")
	if g.h3 {
		b.WriteString("  - {name: h3, nics: [{name: eth0, speed: 1Gbit}]}\n")
	}
	if g.native {
		b.WriteString("  - {name: n1, native: true, nics: [{name: eth0, speed: 1Gbit, ip: " + g.nativeIP + "}]}\n")
	}
	b.WriteString("switches:\n  - name: sw0\n    hosts: [h1, h2]\n    mtu: 9000\n    portgroups:\n")
	b.WriteString("      - {name: pg-a, subnet: 10.1.0.0/16, gateway: 10.1.0.254}\n")
	if g.lb {
		b.WriteString("      - {name: pg-b, loadBalancers: [{name: web, vip: 10.2.0.100, listeners: [{protocol: tcp, port: 80}], backends: [{vm: lb0}]}]}\n")
	} else {
		b.WriteString("      - {name: pg-b}\n")
	}
	b.WriteString("  - {name: sw1, hosts: [h1], portgroups: [{name: pg-c}]}\n")
	if g.carrier {
		b.WriteString("  - {name: sw2, mtu: 9000, uplinks: [{name: up1, nics: {h1: eth0, h2: eth0}}], portgroups: [{name: pg-t}]}\n")
	}
	b.WriteString("hostports:\n  - {host: h1, portgroup: pg-a, ip: " + g.hostPortIP + "}\n")
	if g.carrier {
		b.WriteString("  - {host: h1, portgroup: pg-t, ip: 172.16.0.1/24}\n  - {host: h2, portgroup: pg-t, ip: 172.16.0.2/24}\n")
	}
	if g.nets {
		b.WriteString("networks:\n  - {name: net1, subnet: 10.50.0.0/16, gateway: 10.50.0.254, subnet6: fd50::/64")
		if g.carrier {
			b.WriteString(", portgroup: pg-t")
		}
		b.WriteString("}\n")
	}
	b.WriteString("vms:\n")
	if g.lb {
		b.WriteString("  - {name: lb0, host: h1, nics: [{portgroup: pg-b, ip: 10.2.0.10/24}]}\n")
	}
	for n := 3 + g.r.IntN(18); n > 0; n-- {
		b.WriteString("  - " + FlowVM(g.vm()) + "\n")
	}
	doc, err := Load("p.yaml", []byte(b.String()))
	if err != nil {
		t.Fatalf("base spec:\n%s\n%v", b.String(), err)
	}
	return doc
}

// vm is a valid VM of new names and addresses, which it notes.
func (g *editGen) vm() VM {
	g.next++
	k := g.next
	vm := VM{Name: fmt.Sprintf("v%d", k), Host: []string{"h1", "h2"}[g.r.IntN(2)]}
	attach := g.r.IntN(5)
	if attach > 1 && g.r.IntN(2) == 0 {
		vm.CPUs = 0.5
	}
	for j := range 1 + g.r.IntN(2) {
		var n VNIC
		switch c := g.r.IntN(5); {
		case c == 0 && g.nets && !g.carrier:
			n.Network, n.IP = "net1", fmt.Sprintf("10.50.%d.%d/16", 100*j+k/200, k%200+1)
			g.netIPs = append(g.netIPs, n.IP)
			if g.r.IntN(2) == 0 {
				n.IP6 = fmt.Sprintf("fd50::%x:%x/64", j, k)
				g.netIP6s = append(g.netIP6s, n.IP6)
			}
			if g.r.IntN(2) == 0 {
				n.MAC = fmt.Sprintf("02:50:00:%02x:%02x:%02x", j, k/256, k%256)
				g.netMACs = append(g.netMACs, n.MAC)
			}
		case c == 1:
			n.PortGroup = "pg-b"
			if g.r.IntN(2) == 0 {
				n.IP = fmt.Sprintf("fd00::%x:%x/64", j, k)
				g.ip6s = append(g.ip6s, n.IP)
			}
		case c == 2 && vm.Host == "h1":
			n.PortGroup = "pg-c"
		default:
			n.PortGroup, n.IP = "pg-a", fmt.Sprintf("10.1.%d.%d/16", k/200, 10*j+k%200+1)
			if j > 0 {
				n.IP = fmt.Sprintf("10.1.%d.%d/16", 100+k/200, k%200+1)
			}
			g.pgIPs = append(g.pgIPs, n.IP)
		}
		if n.PortGroup != "" && g.r.IntN(3) == 0 {
			n.MAC = fmt.Sprintf("02:00:00:%02x:%02x:%02x", j, k/256, k%256)
			g.macs = append(g.macs, n.MAC)
		}
		if n.PortGroup != "" && g.r.IntN(4) == 0 {
			n.MTU = 1500
		}
		switch attach {
		case 0:
			n.Attach = &Attach{Netns: fmt.Sprintf("ns-%d", k), Ifname: fmt.Sprintf("eth%d", j)}
		case 1:
			n.Attach = &Attach{Tap: fmt.Sprintf("tap%d-%d", k, j)}
			g.taps = append(g.taps, vm.Host+"/"+n.Attach.Tap)
		}
		vm.NICs = append(vm.NICs, n)
	}
	return vm
}

// edit is base with an edit of its VMs made as EditVMs makes it: VMs
// taken out, VMs written in place of those of their names or at the end;
// at are the indexes of the VMs written, kind the edit's kind.
func (g *editGen) edit(base *Spec) (*Spec, []int, string) {
	kind := g.kind
	if kind == "" {
		kind = editKinds[g.r.IntN(len(editKinds))]
	}
	dropped := map[string]bool{}
	for n := g.r.IntN(3); n > 0; n-- {
		dropped[base.VMs[g.r.IntN(len(base.VMs))].Name] = true
	}
	var put []VM
	appended := map[int]bool{} // put items added even when the name is taken
	if kind != "drop" && kind != "dropBackend" {
		for n := 1 + g.r.IntN(2); n > 0; n-- {
			vm := g.vm()
			if g.r.IntN(3) == 0 { // in place of a VM of the spec
				vm.Name = base.VMs[g.r.IntN(len(base.VMs))].Name
				delete(dropped, vm.Name)
			}
			put = append(put, vm)
		}
		put = g.breakVM(kind, base, put, dropped, appended)
	}
	if kind == "dropBackend" {
		dropped[base.VMs[0].Name] = true
	}
	s := *base
	s.VMs = nil
	var at []int
	done := map[int]bool{}
	for _, vm := range base.VMs {
		if dropped[vm.Name] {
			continue
		}
		j := slicesIndex(put, vm.Name)
		if j >= 0 && !appended[j] && !done[j] {
			at = append(at, len(s.VMs))
			s.VMs = append(s.VMs, put[j])
			done[j] = true
			continue
		}
		s.VMs = append(s.VMs, vm)
	}
	for j := range put {
		if !done[j] {
			at = append(at, len(s.VMs))
			s.VMs = append(s.VMs, put[j])
		}
	}
	return &s, at, kind
}

func slicesIndex(vms []VM, name string) int {
	for i := range vms {
		if vms[i].Name == name {
			return i
		}
	}
	return -1
}

// breakVM makes put[0] wrong as kind says, or with a VM it adds to put.
func (g *editGen) breakVM(kind string, base *Spec, put []VM, dropped map[string]bool, appended map[int]bool) []VM {
	vm := &put[0]
	n := &vm.NICs[0]
	pick := func(from []string) string {
		if len(from) == 0 {
			return "10.1.0.1/16"
		}
		return from[g.r.IntN(len(from))]
	}
	onPGA := func(ip string) {
		n.PortGroup, n.Network, n.IP, n.Attach = "pg-a", "", ip, nil
		vm.NICs = vm.NICs[:1]
		vm.CPUs = 0
	}
	switch kind {
	case "dupIP":
		onPGA(pick(g.pgIPs))
	case "dupIPHostPort":
		onPGA(strings.Replace(g.hostPortIP, "/16", "/24", 1))
	case "dupIPNative":
		onPGA(g.nativeIP)
	case "dupIP6":
		n.PortGroup, n.Network = "pg-b", ""
		n.IP = strings.Replace(pick(append(g.ip6s, "fd00::1/64")), "fd00::", "fd00:0:0::", 1)
	case "dupIPWritten":
		onPGA(fmt.Sprintf("10.1.250.%d/16", g.r.IntN(250)+1))
		w := g.vm()
		w.NICs = []VNIC{{PortGroup: "pg-a", IP: n.IP}}
		w.CPUs = 0
		put = append(put, w)
	case "dupMAC":
		n.PortGroup, n.Network = "pg-b", ""
		n.MAC = strings.ToUpper(strings.ReplaceAll(pick(append(g.macs, "02:00:00:00:00:01")), ":", "-"))
	case "dupMACWritten":
		n.PortGroup, n.Network, n.MAC = "pg-b", "", "02:aa:00:00:00:01"
		w := g.vm()
		w.NICs[0].PortGroup, w.NICs[0].Network, w.NICs[0].MAC, w.NICs[0].IP = "pg-c", "", "02:AA:00:00:00:01", ""
		w.Host = "h1"
		put = append(put, w)
	case "unknownPG":
		n.PortGroup, n.Network = "pg-x", ""
	case "pgNotOnHost":
		n.PortGroup, n.Network, n.IP, n.MAC = "pg-c", "", "", ""
		vm.Host = "h2"
	case "noPG":
		n.PortGroup, n.Network = "", ""
	case "badName":
		vm.Name = []string{"Bad", "-x", "a_b", ""}[g.r.IntN(4)]
	case "longName":
		vm.Name = strings.Repeat("v", 33)
	case "hostName":
		vm.Name = "h2"
	case "dupName":
		vm.Name = base.VMs[g.r.IntN(len(base.VMs))].Name
		delete(dropped, vm.Name)
		appended[0] = true
	case "unknownHost":
		vm.Host = "h9"
	case "nativeHost":
		vm.Host = "n1"
	case "noHost":
		vm.Host = ""
	case "outsideSubnet":
		onPGA("10.9.0.1/16")
	case "networkAddr":
		onPGA("10.1.0.0/24")
	case "badIP":
		onPGA([]string{"10.1.0.1", "x/16", "::ffff:10.1.0.9/112", "10.1.0.1/0", "127.0.0.1/8"}[g.r.IntN(5)])
	case "mtuBig":
		n.PortGroup, n.Network, n.IP, n.MAC, n.MTU = "pg-c", "", "", "", 1600
		vm.Host = "h1"
	case "mtuRange":
		n.MTU = 67
	case "multicastMAC":
		n.PortGroup, n.Network, n.MAC = "pg-b", "", "01:00:5e:00:00:01"
	case "badMAC":
		n.PortGroup, n.Network, n.MAC = "pg-b", "", []string{"zz", "00:00:00:00:00:00", "02:00:00:00:00:00:00:01"}[g.r.IntN(3)]
	case "cpus":
		vm.CPUs = 5000
		for i := range vm.NICs {
			vm.NICs[i].Attach = nil
		}
	case "dupTap":
		tap := pick(append(g.taps, "h1/tapx"))
		host, name, _ := strings.Cut(tap, "/")
		vm.Host, vm.CPUs = host, 0
		n.PortGroup, n.Network, n.IP, n.Attach = "pg-a", "", "10.1.251.1/16", &Attach{Tap: name}
		vm.NICs = vm.NICs[:1]
	case "dupTapWritten":
		vm.Host, vm.CPUs = "h1", 0
		n.PortGroup, n.Network, n.IP, n.Attach = "pg-b", "", "", &Attach{Tap: "tapdup"}
		vm.NICs = vm.NICs[:1]
		w := g.vm()
		w.Host, w.CPUs = "h1", 0
		w.NICs = []VNIC{{PortGroup: "pg-b", Attach: &Attach{Tap: "tapdup"}}}
		put = append(put, w)
	case "vnetNetns":
		for i := range vm.NICs {
			vm.NICs[i].Attach = &Attach{Netns: "vnet.x", Ifname: fmt.Sprintf("eth%d", i)}
		}
		vm.CPUs = 0
	case "attachCPUs":
		n.Attach = &Attach{Netns: "ns-cpus"}
		vm.NICs, vm.CPUs = vm.NICs[:1], 1
	case "attachMixed":
		vm.NICs = append(vm.NICs[:1], VNIC{PortGroup: "pg-b"})
		vm.NICs[0].Attach, vm.NICs[1].Attach = &Attach{Netns: "ns-m"}, &Attach{Tap: "tapm"}
		vm.CPUs = 0
	case "network":
		if g.nets {
			n.PortGroup, n.Network, n.MAC = "", "net1", ""
			n.IP = fmt.Sprintf("10.50.250.%d/16", g.r.IntN(250)+1)
		}
	case "networkDupIP":
		n.PortGroup, n.Network, n.MAC, n.IP = "", "net1", "", pick(append(g.netIPs, "10.50.0.1/16"))
		if !g.nets {
			n.Network = "net-none"
		}
	case "networkDupIP6":
		n.PortGroup, n.Network, n.MAC, n.IP = "", "net1", "", ""
		n.IP6 = strings.Replace(pick(append(g.netIP6s, "fd50::1/64")), "fd50::", "fd50:0::", 1)
	case "networkDupMAC":
		n.PortGroup, n.Network, n.IP = "", "net1", ""
		n.MAC = strings.ToUpper(pick(append(g.netMACs, "02:50:00:00:00:01")))
	case "networkGateway":
		n.PortGroup, n.Network, n.MAC, n.IP = "", "net1", "", "10.50.0.254/16"
	case "networkNoUnderlay":
		n.PortGroup, n.Network, n.MAC, n.IP, n.Attach = "", "net1", "", "10.50.251.1/16", nil
		vm.NICs, vm.Host, vm.CPUs = vm.NICs[:1], "h3", 0
	case "pgAndNetwork":
		n.PortGroup, n.Network = "pg-b", "net1"
	case "ip6OnPG":
		n.PortGroup, n.Network, n.IP6 = "pg-b", "", "fd00::99/64"
	case "tooManyNICs":
		for len(vm.NICs) <= MaxVNICs {
			vm.NICs = append(vm.NICs, VNIC{PortGroup: "pg-b"})
		}
		for i := range vm.NICs {
			vm.NICs[i].Attach = nil
		}
	case "carrier":
		n.PortGroup, n.Network, n.IP, n.MAC = "pg-t", "", "", ""
		if !g.carrier {
			n.PortGroup = "pg-none"
		}
	case "badShaping":
		n.Shaping = &Shaping{Egress: &Shaper{Average: 1, Burst: 1}}
	}
	return put
}

// TestLoadAfterIsLoad checks LoadAfter against Load on generated specs
// that change VMs of one that validated: whenever LoadAfter reads one, Load
// reads the same spec, with the same positions and the same VNIs pinned;
// a spec Load refuses LoadAfter leaves to it.
func TestLoadAfterIsLoad(t *testing.T) {
	read, valid := 0, 0
	for seed := uint64(0); seed < 600; seed++ {
		g := newEditGen(seed)
		if seed%2 == 0 {
			g.kind = []string{"valid", "drop", "network"}[seed/2%3]
		}
		base := g.base(t)
		next, _, kind := g.edit(base.Spec)
		src := withVMs(t, base.Source, next.VMs, g.r)
		if g.r.IntN(3) == 0 { // a network after the VMs, whose VNI pinning writes in
			src = append(src, "networks:\n  - {name: late, subnet: 10.77.0.0/24}\n"...)
			if !bytes.Contains(src, []byte("\nnetworks:\n  - {name: net1")) {
				base = mustLoad(t, append(slices.Clip(base.Source), "networks:\n  - {name: late, subnet: 10.77.0.0/24}\n"...))
			} else {
				continue // two networks: keys would repeat
			}
		}
		want, err := Load("p.yaml", src)
		got, ok := LoadAfter(base, "p.yaml", src)
		switch {
		case ok && err != nil:
			t.Fatalf("seed %d, edit %s: LoadAfter read what Load refuses: %v\n%s", seed, kind, err, src)
		case !ok:
			if err == nil {
				valid++
			}
			continue
		}
		valid++
		read++
		if !reflect.DeepEqual(got.Spec, want.Spec) {
			t.Fatalf("seed %d, edit %s: LoadAfter read %+v, Load %+v", seed, kind, got.Spec.VMs, want.Spec.VMs)
		}
		for i := range want.Spec.VMs {
			p := indexPath("vms", i) + ".nics[0].portgroup"
			if got.PosOf(p) != want.PosOf(p) {
				t.Fatalf("seed %d: %s at %v, Load says %v", seed, p, got.PosOf(p), want.PosOf(p))
			}
		}
		gp, err1 := PinVNIs(got, nil)
		wp, err2 := PinVNIs(want, nil)
		if (err1 == nil) != (err2 == nil) || err1 == nil && !bytes.Equal(gp.Source, wp.Source) {
			t.Fatalf("seed %d: pinned VNIs differ: %v / %v\n%s\n%s", seed, err1, err2, gp.Source, wp.Source)
		}
	}
	if read < valid*3/4 {
		t.Errorf("LoadAfter read %d of %d valid specs", read, valid)
	}
	t.Logf("LoadAfter read %d of %d valid specs", read, valid)
}

func mustLoad(t *testing.T, src []byte) *Document {
	t.Helper()
	doc, err := Load("p.yaml", src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	return doc
}

// withVMs is src with its block list of VMs written anew as vms, one line
// each, with here and there a comment or an item in block style.
func withVMs(t *testing.T, src []byte, vms []VM, r *rand.Rand) []byte {
	t.Helper()
	it, ok := findVMItems(src)
	if !ok || it.key < 0 || len(it.starts) == 0 {
		t.Fatalf("no block list of VMs in\n%s", src)
	}
	var b bytes.Buffer
	b.Write(src[:it.starts[0]])
	for _, vm := range vms {
		switch r.IntN(8) {
		case 0:
			b.WriteString("  # a comment\n")
		case 1:
			fmt.Fprintf(&b, "  - name: %q\n    host: %q\n    nics: [%s]\n", vm.Name, vm.Host, flowVNICs(vm))
			continue
		}
		b.WriteString("  - " + FlowVM(vm) + "\n")
	}
	b.Write(src[it.end:])
	return b.Bytes()
}

func flowVNICs(vm VM) string {
	var out []string
	for _, n := range vm.NICs {
		out = append(out, flowVNIC(n))
	}
	return strings.Join(out, ", ")
}

// A spec that changes anything but VMs, or whose VMs' items anchor or
// refer, is Load's to read.
func TestLoadAfterLeavesTheRestToLoad(t *testing.T) {
	base := mustLoad(t, []byte(`name: t
hosts: [{name: h1}]
switches: [{name: sw0, hosts: [h1], portgroups: [{name: pg}]}]
vms:
  - {name: a, host: h1, nics: [{portgroup: pg, ip: 10.0.0.1/24}]}
  - {name: b, host: h1, nics: [{portgroup: pg, ip: 10.0.0.2/24}]}
`))
	for _, tc := range []struct {
		name, old, new string
		read           bool
	}{
		{"a VM's address", "10.0.0.2/24", "10.0.0.3/24", true},
		{"a VM added", "10.0.0.2/24}]}\n", "10.0.0.2/24}]}\n  - {name: c, host: h1, nics: [{portgroup: pg}]}\n", true},
		{"a VM taken out", "  - {name: a, host: h1, nics: [{portgroup: pg, ip: 10.0.0.1/24}]}\n", "", true},
		{"every VM taken out", "  - {name: a, host: h1, nics: [{portgroup: pg, ip: 10.0.0.1/24}]}\n  - {name: b, host: h1, nics: [{portgroup: pg, ip: 10.0.0.2/24}]}\n", "", false},
		{"the name", "name: t", "name: u", false},
		{"a port group", "{name: pg}", "{name: pg, subnet: 10.0.0.0/24}", false},
		{"an anchor", "{name: b,", "&x {name: b,", false},
		{"an alias", "  - {name: b, host: h1, nics: [{portgroup: pg, ip: 10.0.0.2/24}]}\n", "  - *x\n", false},
		{"a duplicate address", "10.0.0.2/24", "10.0.0.1/24", false},
		{"a bad field", "{name: b,", "{nom: b,", false},
		{"the indentation", "  - {name: b", " - {name: b", false},
	} {
		src := strings.Replace(string(base.Source), tc.old, tc.new, 1)
		got, ok := LoadAfter(base, "t.yaml", []byte(src))
		if ok != tc.read {
			t.Errorf("%s: LoadAfter read it: %v, want %v", tc.name, ok, tc.read)
			continue
		}
		if ok {
			want := mustLoad(t, []byte(src))
			if !reflect.DeepEqual(got.Spec, want.Spec) {
				t.Errorf("%s: LoadAfter read %+v, Load %+v", tc.name, got.Spec, want.Spec)
			}
		}
	}
}

// A MAC is found among the others' however it is written, and only the
// canonical form skips the parse.
func TestMACIn(t *testing.T) {
	macs := map[string]string{"02:ab:00:00:00:01": "vms[0].nics[0].mac"}
	tests := []struct {
		mac       string
		in, canon bool
	}{
		{"02:ab:00:00:00:01", true, true},
		{"02:AB:00:00:00:01", true, false},
		{"02-ab-00-00-00-01", true, false},
		{"02ab.0000.0001", true, false},
		{"02:ab:00:00:00:02", false, true},
		{"02:ab:00:00:00:0g", false, false},
		{"02:ab:00:00:00", false, false},
		{"", false, false},
	}
	for _, tt := range tests {
		if got := macIn(macs, tt.mac); got != tt.in {
			t.Errorf("macIn(%q) = %v, want %v", tt.mac, got, tt.in)
		}
		if got := canonicalMAC(tt.mac); got != tt.canon {
			t.Errorf("canonicalMAC(%q) = %v, want %v", tt.mac, got, tt.canon)
		}
	}
}
