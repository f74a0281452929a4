package plan

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

// vnicIP is a generated vNIC's address on a port group, 10.A.B.C/16.
var vnicIP = regexp.MustCompile(`ip: 10\.(\d+)\.\d+\.\d+/16`)

// genSpec is a generated spec: its infrastructure (hosts, switches, port
// groups, networks, host ports) fixed by the round, its VMs changed by it.
type genSpec struct {
	infra string // everything but the VMs
	vms   []genVM
}

type genVM struct {
	name, host string
	cpus       string // "" or a limit
	attach     string // what every vNIC attaches ("": none)
	nics       []string
}

func (g genSpec) text() string {
	var b strings.Builder
	b.WriteString(g.infra)
	b.WriteString("vms:\n")
	for _, vm := range g.vms {
		fmt.Fprintf(&b, "  - {name: %s, host: %s%s, nics: [%s]}\n", vm.name, vm.host, vm.cpus, strings.Join(vm.nics, ", "))
	}
	return b.String()
}

func (g genSpec) clone() genSpec {
	out := genSpec{infra: g.infra, vms: slices.Clone(g.vms)}
	for i := range out.vms {
		out.vms[i].nics = slices.Clone(out.vms[i].nics)
	}
	return out
}

// splicer generates specs and changes of their VMs at random.
type splicer struct {
	rng  *rand.Rand
	pgs  []string // the port groups VMs may use
	nets []string // the networks, with their subnets' third octet
	seq  int      // for fresh names and addresses
}

// infra makes the round's infrastructure: two hosts (a switch tunneled
// between them, or on uplinks over their NICs), a switch of port groups with and without
// port security, shaping and ACLs, and at times pools and a team on an
// uplink, a network, a host port.
func (g *splicer) infra() string {
	var b strings.Builder
	nics := g.rng.IntN(2) == 0
	uplinks := nics && g.rng.IntN(2) == 0
	pools := uplinks && g.rng.IntN(2) == 0
	team := pools && g.rng.IntN(2) == 0
	b.WriteString("name: gen\nhosts:\n")
	for i, h := range []string{"hv1", "hv2"} {
		fmt.Fprintf(&b, "  - name: %s\n    underlay: 10.0.0.%d\n", h, 11+i)
		if nics {
			b.WriteString("    nics: [{name: vmnic0, speed: 1Gbit}, {name: vmnic1, speed: 1Gbit}]\n")
		}
	}
	b.WriteString("switches:\n  - name: sw0\n    hosts: [hv1, hv2]\n")
	if uplinks {
		b.WriteString("    uplinks: [{name: up1, nics: {hv1: vmnic0, hv2: vmnic0}}, {name: up2, nics: {hv1: vmnic1, hv2: vmnic1}}]\n")
	}
	if team {
		b.WriteString("    teaming: {policy: portid, active: [up1, up2]}\n")
	}
	if pools {
		b.WriteString("    ioc: {enabled: true, pools: {vm: {shares: high, limit: 400Mbit}}}\n")
	}
	b.WriteString("    portgroups:\n")
	g.pgs = []string{"plain"}
	b.WriteString("      - {name: plain}\n")
	optional := []struct{ name, text string }{
		{"open", "{name: open, security: {promiscuous: true, macChanges: true, forgedTransmits: true, routerAdvertisements: true, ipSpoofing: true}}"},
		{"strict", "{name: strict, security: {ipSpoofing: false, macChanges: false}}"},
		{"shaped", "{name: shaped, shaping: {egress: {average: 100Mbit, burst: 64KiB}, ingress: {average: 50Mbit, peak: 80Mbit, burst: 64KiB}}}"},
		{"cidracl", "{name: cidracl, acl: {default: deny, rules: [{action: allow, direction: ingress, proto: tcp, dport: 22, from: 10.9.0.0/16}]}}"},
		{"peeracl", "{name: peeracl, acl: {default: deny, rules: [{action: allow, direction: ingress, from: {portgroup: plain}}]}}"},
		{"pooled", "{name: pooled, pool: vm}"},
	}
	for _, o := range optional {
		if o.name == "pooled" && !pools || g.rng.IntN(3) == 0 || o.name == "peeracl" && g.rng.IntN(3) != 0 {
			continue
		}
		g.pgs = append(g.pgs, o.name)
		fmt.Fprintf(&b, "      - %s\n", o.text)
	}
	g.nets = nil
	if g.rng.IntN(2) == 0 {
		b.WriteString("networks:\n  - {name: n1, vni: 5001, subnet: 10.50.0.0/24}\n")
		g.nets = append(g.nets, "n1")
	}
	if g.rng.IntN(3) == 0 {
		b.WriteString("hostports:\n  - {host: hv1, portgroup: plain, ip: 10.8.0.1/24}\n")
	}
	return b.String()
}

// nic is a vNIC of vm at random: on a port group or the network, with or
// without its own MAC, offloads, shaping, cut, attaching what vm's vNICs
// attach.
func (g *splicer) nic(vm *genVM) string {
	g.seq++
	var f []string
	if len(g.nets) > 0 && g.rng.IntN(5) == 0 {
		f = append(f, "network: n1", fmt.Sprintf("ip: 10.50.0.%d/24", 10+g.seq%200))
	} else {
		f = append(f, "portgroup: "+g.pgs[g.rng.IntN(len(g.pgs))], fmt.Sprintf("ip: 10.%d.%d.%d/16", 1+g.seq/60000, g.seq/250%240, 1+g.seq%250))
	}
	extras := []string{
		fmt.Sprintf("mac: \"02:aa:00:00:%02x:%02x\"", g.seq/256%256, g.seq%256),
		"offloads: {gro: true}",
		"shaping: {egress: {average: 10Mbit, burst: 32KiB}}",
		"connected: false",
	}
	for _, e := range extras {
		if g.rng.IntN(6) == 0 && !(vm.attach == "tap" && strings.HasPrefix(e, "offloads")) {
			f = append(f, e)
		}
	}
	switch vm.attach {
	case "tap":
		f = append(f, fmt.Sprintf("attach: {tap: tp%d}", g.seq))
	case "netns":
		f = append(f, fmt.Sprintf("attach: {netns: box-%s, ifname: eth%d}", vm.name, g.seq))
	}
	return "{" + strings.Join(f, ", ") + "}"
}

func (g *splicer) vm() genVM {
	g.seq++
	vm := genVM{name: fmt.Sprint("vm", g.seq), host: []string{"hv1", "hv2"}[g.rng.IntN(2)]}
	switch g.rng.IntN(6) {
	case 0:
		vm.attach = "tap"
	case 1:
		vm.attach = "netns"
	case 2:
		vm.cpus = ", cpus: 1" // only a VM vnet runs has a CPU limit
	}
	for range 1 + g.rng.IntN(4)/3 {
		vm.nics = append(vm.nics, g.nic(&vm))
	}
	return vm
}

// change changes one or two VMs of s at random.
func (g *splicer) change(s genSpec) (genSpec, string) {
	next := s.clone()
	var what []string
	for range 1 + g.rng.IntN(4)/3 {
		i := g.rng.IntN(len(next.vms) + 1)
		if i == len(next.vms) || g.rng.IntN(4) == 0 {
			vm := g.vm()
			next.vms = slices.Insert(next.vms, g.rng.IntN(len(next.vms)+1), vm)
			what = append(what, "add "+vm.name)
			continue
		}
		vm := &next.vms[i]
		switch g.rng.IntN(6) {
		case 0:
			what = append(what, "remove "+vm.name)
			next.vms = slices.Delete(next.vms, i, i+1)
		case 1:
			what = append(what, "move "+vm.name)
			vm.host = map[string]string{"hv1": "hv2", "hv2": "hv1"}[vm.host]
		case 2:
			what = append(what, "renic "+vm.name)
			vm.nics[0] = g.nic(vm)
		case 3:
			what = append(what, "cpus of "+vm.name)
			if vm.attach != "" {
				vm.nics[0] += "" // a VM that brings its vNICs has none: no change
			} else if vm.cpus == "" {
				vm.cpus = ", cpus: 0.5"
			} else {
				vm.cpus = ""
			}
		case 4:
			what = append(what, "another vNIC on "+vm.name)
			if len(vm.nics) < 3 {
				vm.nics = append(vm.nics, g.nic(vm))
			} else {
				vm.nics = vm.nics[:1]
			}
		case 5:
			what = append(what, "address of "+vm.name)
			g.seq++
			vm.nics[0] = vnicIP.ReplaceAllString(vm.nics[0], fmt.Sprintf("ip: 10.$1.%d.%d/16", 200+g.seq%50, 1+g.seq%250))
		}
	}
	return next, strings.Join(what, ", ")
}

// Over generated specs of VMs on port groups (with port security on and
// off, shaping, ACLs, pools and teams, CPU limits, TAPs and namespaces
// attached, a network beside them) and random changes of their VMs, a
// spliced model is the model made whole, on each host and in the lab, with
// and without port programs and cpusets; and the common changes (VMs on
// port groups without pools, teams or ACLs naming members, none with a
// CPU limit) are spliced.
func TestSpliceModelOfPortGroupsIsTheWholeModel(t *testing.T) {
	g := &splicer{rng: rand.New(rand.NewPCG(7, 35))}
	spliced, refused := 0, 0
	for round := range 300 {
		s := genSpec{infra: g.infra()}
		for range 2 + g.rng.IntN(6) {
			s.vms = append(s.vms, g.vm())
		}
		last := load(t, s.text())
		for range 4 {
			nextGen, what := g.change(s)
			next := load(t, nextGen.text())
			for _, opt := range []Options{{}, {Host: "hv1"}, {Host: "hv2", PortPrograms: true}, {NumCPU: 2, PortPrograms: true}, {Host: "hv1", NumCPU: 2}} {
				name := fmt.Sprintf("round %d, %s, host %q, programs %v, cpus %d", round, what, opt.Host, opt.PortPrograms, opt.NumCPU)
				ok := checkSplice(t, name, last, next, opt)
				if ok && !strings.Contains(s.infra, "uplinks:") && !MaySplice(last, next, opt) {
					t.Errorf("%s: spliced, but MaySplice says it would not", name)
				}
				if ok {
					spliced++
				} else {
					refused++
					if bounded(s.text()+nextGen.text(), what, opt) {
						t.Errorf("%s: not spliced\n%s", name, whyRefused(last, next, opt))
					}
				}
			}
			s, last = nextGen, next
		}
	}
	t.Logf("%d spliced, %d refused", spliced, refused)
}

// bounded says whether a change between the two specs (text: both) is
// one a splice must make: no pools, teams (in the lab, any uplinks), ACL,
// CPU limits with cpusets, VM on the network.
func bounded(text, what string, opt Options) bool {
	for _, unbounded := range []string{"pool", "acl:", "network: n1"} {
		if strings.Contains(text, unbounded) {
			return false
		}
	}
	if opt.Host == "" && strings.Contains(text, "uplinks:") {
		return false // the lab teams a switch's uplinks: its ports' steering
	}
	return opt.NumCPU == 0 || !strings.Contains(text, "cpus:")
}

// checkSplice splices next from last's model with opt and, when it does,
// fails the test unless the result is next's whole model.
func checkSplice(t *testing.T, name string, last, next *spec.Spec, opt Options) bool {
	t.Helper()
	before, want := Model(last, opt), Model(next, opt)
	sp, ok := SpliceModel(last, next, before, nil, nil, opt)
	if !ok {
		return false
	}
	byKey := map[string]Resource{}
	for _, r := range want {
		byKey[r.Key()] = r
	}
	if got, want := sortedKeys(sp.Model), sortedKeys(want); !slices.Equal(got, want) {
		t.Fatalf("%s: spliced model holds what the whole one does not:\n%s\nlacks:\n%s", name, strings.Join(minus(got, want), "\n"), strings.Join(minus(want, got), "\n"))
	}
	for _, r := range sp.Model {
		if r != byKey[r.Key()] {
			t.Fatalf("%s: spliced %+v\nwant %+v", name, r, byKey[r.Key()])
		}
	}
	if !slices.Equal(sp.Keys, keysOf(sp.Model)) {
		t.Fatalf("%s: keys are not the model's", name)
	}
	if got, want := ModelScope(sp.Before, sp.After), ModelScope(before, want); !scopesEqual(got, want) {
		t.Fatalf("%s: scope of the parts %v, of the whole models %v", name, got, want)
	}
	return true
}

// The common changes of VMs on port groups splice: a VM added, its address
// changed, removed, on a port group with port security on (the default)
// and off, with shaping, as a container's namespace, in the lab and on a
// host, with and without port programs.
func TestSpliceModelOfPortGroups(t *testing.T) {
	const infra = `name: one
hosts:
  - {name: h1, underlay: 10.0.0.1}
  - {name: h2, underlay: 10.0.0.2}
switches:
  - name: sw0
    hosts: [h1, h2]
    portgroups:
      - {name: pg}
      - {name: open, security: {promiscuous: true, macChanges: true, forgedTransmits: true, routerAdvertisements: true, ipSpoofing: true}}
      - {name: shaped, shaping: {egress: {average: 100Mbit, burst: 64KiB}, ingress: {average: 50Mbit, burst: 64KiB}}}
vms:
`
	// An ACL of addresses splices with port programs: without them the
	// host's firewall tracks connections for every port.
	const filtered = "      - {name: filtered, acl: {default: deny, rules: [{action: allow, direction: ingress, proto: tcp, dport: 80, from: 10.9.0.0/16}]}}\n"
	var vms strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&vms, "  - {name: vm%d, host: h%d, nics: [{portgroup: %s, ip: 10.1.0.%d/16}]}\n", i, 1+i%2, []string{"pg", "open", "shaped"}[i%3], i)
	}
	base := infra + vms.String()
	changes := map[string]struct {
		next     string
		programs bool // only with port programs (an ACL)
	}{
		"add a VM":                     {next: base + "  - {name: new, host: h1, nics: [{portgroup: pg, ip: 10.1.1.1/16}]}\n"},
		"add a VM without security":    {next: base + "  - {name: new, host: h1, nics: [{portgroup: open, ip: 10.1.1.1/16}]}\n"},
		"add a shaped VM":              {next: base + "  - {name: new, host: h2, nics: [{portgroup: shaped, ip: 10.1.1.1/16}]}\n"},
		"add a container":              {next: base + "  - {name: new, host: h1, nics: [{portgroup: pg, ip: 10.1.1.1/16, attach: {netns: cni-1, ifname: eth0}}]}\n"},
		"add a VM on a TAP":            {next: base + "  - {name: new, host: h2, nics: [{portgroup: pg, attach: {tap: tap-new}}]}\n"},
		"add a VM of a vNIC shaped":    {next: base + "  - {name: new, host: h1, nics: [{portgroup: pg, ip: 10.1.1.1/16, shaping: {egress: {average: 1Mbit, burst: 32KiB}}}]}\n"},
		"add a VM behind an ACL":       {next: base + "  - {name: new, host: h1, nics: [{portgroup: filtered, ip: 10.1.1.1/16}]}\n", programs: true},
		"change a VM's address":        {next: strings.Replace(base, "ip: 10.1.0.7/16", "ip: 10.1.2.7/16", 1)},
		"move a VM to the other host":  {next: strings.Replace(base, "{name: vm7, host: h2,", "{name: vm7, host: h1,", 1)},
		"move a VM to another group":   {next: strings.Replace(base, "{name: vm7, host: h2, nics: [{portgroup: pg,", "{name: vm7, host: h2, nics: [{portgroup: shaped,", 1)},
		"remove a VM":                  {next: strings.Replace(base, "  - {name: vm7, host: h2, nics: [{portgroup: pg, ip: 10.1.0.7/16}]}\n", "", 1)},
		"cut a VM from its switch":     {next: strings.Replace(base, "ip: 10.1.0.7/16}", "ip: 10.1.0.7/16, connected: false}", 1)},
		"give a VM its own MAC":        {next: strings.Replace(base, "ip: 10.1.0.7/16}", "ip: 10.1.0.7/16, mac: \"02:00:00:00:00:07\"}", 1)},
		"give a VM a second vNIC":      {next: strings.Replace(base, "ip: 10.1.0.7/16}]", "ip: 10.1.0.7/16}, {portgroup: open}]", 1)},
		"remove the only VM of a host": {next: strings.Replace(strings.ReplaceAll(base, "host: h2,", "host: h1,"), "{name: vm1, host: h1,", "{name: vm1, host: h2,", 1)},
	}
	withACL := func(s string) string { return strings.Replace(s, "vms:\n", filtered+"vms:\n", 1) }
	for name, c := range changes {
		for _, opt := range []Options{{}, {PortPrograms: true}, {Host: "h1", NumCPU: 2}, {Host: "h2", PortPrograms: true}} {
			if c.programs && !opt.PortPrograms {
				continue
			}
			acl := opt.PortPrograms
			t.Run(fmt.Sprintf("%s, host %q, programs %v", name, opt.Host, opt.PortPrograms), func(t *testing.T) {
				lastText, nextText := base, c.next
				if acl {
					lastText, nextText = withACL(base), withACL(c.next)
				}
				last, next := load(t, lastText), load(t, nextText)
				if !MaySplice(last, next, opt) || !checkSplice(t, t.Name(), last, next, opt) {
					t.Fatal("not spliced")
				}
				if !checkSplice(t, t.Name()+", back", next, last, opt) {
					t.Fatal("not spliced back")
				}
			})
		}
	}
}

// whyRefused tells what of a change a splice refuses: the touched VMs and
// networks, and the resources the last part makes unlike the last model.
func whyRefused(last, next *spec.Spec, opt Options) string {
	nets, vms, ok := touched(last, next)
	if !ok {
		return "touched"
	}
	lm := Model(last, opt)
	before := Model(part(last, nets, vms), opt)
	at := map[string]Resource{}
	for _, r := range lm {
		at[r.Key()] = r
	}
	out := fmt.Sprint(nets, vms, "\n")
	for _, r := range before {
		if w, ok := at[r.Key()]; !ok || w != r {
			out += fmt.Sprintf("%v\n part %+v\n whole %+v\n", ok, r, w)
		}
	}
	return out
}
