package plan

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

func load(t *testing.T, src string) *spec.Spec {
	t.Helper()
	doc, err := spec.Load("test", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return doc.Spec
}

func loadFile(t *testing.T, path string) *spec.Spec {
	t.Helper()
	doc, err := spec.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return doc.Spec
}

const base = `
name: t
hosts:
  - name: esx1
    nics: [{name: vmnic0, speed: 1Gbit}, {name: vmnic1, speed: 1Gbit}]
  - name: esx2
    nics: [{name: vmnic0, speed: 1Gbit}]
switches:
  - name: dvs0
    uplinks:
      - {name: u1, nics: {esx1: vmnic0, esx2: vmnic0}}
      - {name: u2, nics: {esx1: vmnic1}}
    teaming: {active: [u1]}
    portgroups: [{name: pg-a}, {name: pg-b}]
  - name: priv
    hosts: [esx1]
    portgroups: [{name: pg-p}]
vms:
  - name: vm1
    host: esx1
    cpus: 1
    nics: [{portgroup: pg-a, ip: 10.0.0.1/24}]
`

func TestModelNamesFitTheKernel(t *testing.T) {
	for _, f := range []string{"../../examples/demo.yaml"} {
		for _, r := range Model(loadFile(t, f), Options{NumCPU: 2}) {
			for _, name := range []string{r.Name, r.A.Name, r.B.Name, r.Link} {
				if r.Kind != KindNetns && r.Kind != KindCgroup && len(name) > 15 {
					t.Errorf("%s: link name %q longer than 15", r, name)
				}
			}
		}
	}
}

func TestModelUnique(t *testing.T) {
	seen := map[string]bool{}
	links := map[string]bool{}
	for _, r := range Model(loadFile(t, "../../examples/demo.yaml"), Options{}) {
		if seen[r.Key()] {
			t.Errorf("duplicate key %s", r.Key())
		}
		seen[r.Key()] = true
		for _, l := range r.links() {
			if links[l] {
				t.Errorf("two resources are link %s", l)
			}
			links[l] = true
		}
	}
}

func TestUplinkNoTeamNamesIsNotAttached(t *testing.T) {
	rs := Model(load(t, base), Options{})
	masters := map[string]string{}
	for _, r := range rs {
		if r.Kind == KindVeth {
			masters[r.A.NS+"/"+r.A.Name] = r.A.Master
		}
	}
	if got := masters["vnet.t.esx1/vmnic0"]; got != "dvs0" {
		t.Errorf("esx1 vmnic0 master = %q, want dvs0", got)
	}
	if got := masters["vnet.t.esx1/vmnic1"]; got != "" {
		t.Errorf("esx1 vmnic1 (in no team) master = %q, want none", got)
	}
}

func TestDiffIdentical(t *testing.T) {
	rs := Model(load(t, base), Options{})
	if p := Diff(rs, rs); !p.Empty() {
		t.Errorf("diff of identical models:\n%s", p)
	}
}

func TestDiffFromScratchOrdersParentsFirst(t *testing.T) {
	p := Diff(Model(load(t, base), Options{}), nil)
	last := -1
	for _, a := range p.Actions {
		if a.Op != OpCreate {
			t.Fatalf("unexpected %s", a)
		}
		r := rank[a.Subject().Kind]
		if r < last {
			t.Fatalf("%s comes after a higher-ranked kind", a)
		}
		last = r
	}
}

func TestDiffAddVMCreatesOnlyItsObjects(t *testing.T) {
	before := Model(load(t, base), Options{})
	after := Model(load(t, base+`
  - name: vm2
    host: esx2
    nics: [{portgroup: pg-a, ip: 10.0.0.2/24}]
`), Options{})
	p := Diff(after, before)
	for _, a := range p.Actions {
		if a.Op != OpCreate || !strings.Contains(a.Subject().Owner, "vm2") && a.Subject().Kind != KindFirewall {
			t.Errorf("unexpected action %s", a)
		}
	}
	if len(p.Actions) != 5 { // netns, veth, addr; esx2's first port policy and its firewall
		t.Errorf("want 5 actions, got:\n%s", p)
	}
}

func TestDiffMovePortGroupIsInPlace(t *testing.T) {
	before := Model(load(t, base), Options{})
	after := Model(load(t, strings.Replace(base, "{portgroup: pg-a,", "{portgroup: pg-p,", 1)), Options{})
	p := Diff(after, before)
	if len(p.Actions) != 1 || p.Actions[0].Op != OpModify {
		t.Fatalf("want one change, got:\n%s", p)
	}
	if !strings.Contains(p.String(), "b master dvs0 -> priv") {
		t.Errorf("change not described: %s", p)
	}
}

func TestDiffMoveVMToAnotherHostReplacesAndRecreatesAddress(t *testing.T) {
	before := Model(load(t, base), Options{})
	after := Model(load(t, strings.Replace(base, "host: esx1\n    cpus", "host: esx2\n    cpus", 1)), Options{})
	p := Diff(after, before)
	var ops []string
	for _, a := range p.Actions {
		ops = append(ops, string(a.Op)+" "+string(a.Subject().Kind))
	}
	got := strings.Join(ops, ", ")
	// The port policy moves with the port; esx1 has no port left to protect.
	if got != "replace veth, create addr, create firewall, create portsec, delete portsec, delete firewall" {
		t.Errorf("got %s\n%s", got, p)
	}
}

func TestDiffDeleteChildrenFirst(t *testing.T) {
	before := Model(load(t, base), Options{NumCPU: 2})
	p := Diff(nil, before)
	last := 100
	for _, a := range p.Actions {
		if a.Op != OpDelete {
			t.Fatalf("unexpected %s", a)
		}
		r := rank[a.Subject().Kind]
		if r > last {
			t.Fatalf("%s deleted after its parent kind", a)
		}
		last = r
	}
}

func TestDiffChangeRate(t *testing.T) {
	before := Model(load(t, base), Options{})
	after := Model(load(t, strings.Replace(base, "{name: vmnic0, speed: 1Gbit}]\nswitches", "{name: vmnic0, speed: 10Gbit}]\nswitches", 1)), Options{})
	p := Diff(after, before)
	if len(p.Actions) != 2 {
		t.Fatalf("want rate changes in both directions, got:\n%s", p)
	}
	for _, a := range p.Actions {
		if a.Op != OpModify || a.Subject().Kind != KindLineRate || a.New.Rate != 10e9 {
			t.Errorf("unexpected %s", a)
		}
	}
}

func TestCpusetSpreads(t *testing.T) {
	s := load(t, base+`
  - {name: vm2, host: esx1, cpus: 1}
  - {name: vm3, host: esx1, cpus: 1.5}
`)
	var sets []string
	for _, r := range Model(s, Options{NumCPU: 2}) {
		if r.Kind == KindCgroup {
			sets = append(sets, r.CPUs)
		}
	}
	if got := strings.Join(sets, " "); got != "0 1 0,1" {
		t.Errorf("cpusets = %q", got)
	}
}

// A spec that skipped validation must not crash the modeler: NaN and
// infinite CPU counts once reached make() as a negative length.
func TestCpusetSurvivesUnvalidatedCounts(t *testing.T) {
	m := &modeler{opt: Options{NumCPU: 2}}
	for _, cpus := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e19, 0, -1} {
		got := m.cpuset(cpus)
		if cpus > 1 && got != "0,1" {
			t.Errorf("cpuset(%g) = %q, want all CPUs", cpus, got)
		}
		if !(cpus > 0) && got != "" {
			t.Errorf("cpuset(%g) = %q, want no set", cpus, got)
		}
	}
}

func TestSplitNSName(t *testing.T) {
	tests := []struct {
		in          string
		infra, node string
		ok          bool
	}{
		{"vnet.demo.esx1", "demo", "esx1", true},
		{"vnet.demo._pswitch", "demo", "_pswitch", true},
		{"vnet.demo", "", "", false},
		{"other", "", "", false},
	}
	for _, tt := range tests {
		i, n, ok := SplitNSName(tt.in)
		if i != tt.infra || n != tt.node || ok != tt.ok {
			t.Errorf("SplitNSName(%q) = %q %q %v", tt.in, i, n, ok)
		}
	}
}

func TestStableMAC(t *testing.T) {
	a, b := StableMAC("x", "vm/0"), StableMAC("x", "vm/0")
	if a != b || a == StableMAC("y", "vm/0") {
		t.Errorf("MACs not stable or not distinct: %s %s", a, b)
	}
	if a[1] != '2' && a[1] != '6' && a[1] != 'a' && a[1] != 'e' {
		t.Errorf("%s is not locally administered unicast", a)
	}
}

// A vNIC's GRO setting only means something if its port hands it MTU-sized
// frames, so setting it either way makes the port segment; TSO alone does not.
func TestVNICGROMakesItsPortSegment(t *testing.T) {
	for _, tc := range []struct {
		offloads    string
		vnic        string // the vNIC's offloads resource, "" for none
		portSegment bool
	}{
		{"", "", false},
		{", offloads: {tso: false}", "gro default, tso off", false},
		{", offloads: {gro: true}", "gro on, tso default", true},
		{", offloads: {gro: false, tso: true}", "gro off, tso on", true},
	} {
		src := strings.Replace(base, "ip: 10.0.0.1/24}", "ip: 10.0.0.1/24"+tc.offloads+"}", 1)
		var vnic string
		port := false
		for _, r := range Model(load(t, src), Options{}) {
			if r.Kind != KindOffloads {
				continue
			}
			switch {
			case r.NS == "vnet.t.vm1" && r.Link == "eth0":
				vnic = fmt.Sprintf("gro %s, tso %s", r.GRO, r.TSO)
			case r.NS == "vnet.t.esx1" && r.Link == VNICPortName("t", "vm1", 0):
				port = r.GRO == Unset && r.TSO == Off
			default:
				t.Errorf("offloads%s: unexpected %s", tc.offloads, r)
			}
		}
		if vnic != tc.vnic || port != tc.portSegment {
			t.Errorf("offloads%s: vNIC %q, port segments %v; want %q, %v", tc.offloads, vnic, port, tc.vnic, tc.portSegment)
		}
	}
}

// An offload the last applied spec set and this one leaves out is asked
// back to a veth's default, on links that stay; links that go are left to go.
func TestResetDroppedOffloads(t *testing.T) {
	gro := ", offloads: {gro: true}"
	for _, tc := range []struct {
		name       string
		last, now  string // the vNIC's offloads in each spec
		vnic, port string // the offloads asked for on each link, "" for none
	}{
		{"nothing before", "", gro, "gro on, tso default", "gro default, tso off"},
		{"unchanged", gro, gro, "gro on, tso default", "gro default, tso off"},
		{"gro dropped", gro, "", "gro off, tso default", "gro default, tso on"},
		{"gro dropped, tso kept", ", offloads: {gro: true, tso: false}", ", offloads: {tso: false}", "gro off, tso off", "gro default, tso on"},
		{"tso dropped", ", offloads: {tso: false}", "", "gro default, tso on", ""},
		{"never set", "", "", "", ""},
	} {
		model := func(offloads string) []Resource {
			return Model(load(t, strings.Replace(base, "ip: 10.0.0.1/24}", "ip: 10.0.0.1/24"+offloads+"}", 1)), Options{})
		}
		got := map[string]string{}
		for _, r := range ResetDroppedOffloads(model(tc.now), model(tc.last)) {
			if r.Kind == KindOffloads {
				got[r.Link] = fmt.Sprintf("gro %s, tso %s", r.GRO, r.TSO)
			}
		}
		if got["eth0"] != tc.vnic || got[VNICPortName("t", "vm1", 0)] != tc.port || len(got) > 2 {
			t.Errorf("%s: got %v, want vNIC %q and port %q", tc.name, got, tc.vnic, tc.port)
		}
	}
	// The VM goes: its links go with their offloads, nothing is reset.
	last := Model(load(t, strings.Replace(base, "ip: 10.0.0.1/24}", "ip: 10.0.0.1/24"+gro+"}", 1)), Options{})
	noVM := Model(load(t, base[:strings.Index(base, "vms:")]), Options{})
	for _, r := range ResetDroppedOffloads(noVM, last) {
		if r.Kind == KindOffloads {
			t.Errorf("with the VM gone: %s", r)
		}
	}
}

// A namespace whose settings drifted is changed in place, and the plan names
// only the settings that differ.
func TestNamespaceSysctlDrift(t *testing.T) {
	want := WantedSysctls(NamespaceSysctls)
	drifted := strings.Replace(want, "arp_ignore=1", "arp_ignore=0", 1)
	drifted = strings.Replace(drifted, "bridge-nf-call-arptables=0", "bridge-nf-call-arptables=?", 1)
	d := Resource{Kind: KindNetns, Name: "vnet.t.esx1", Sysctls: want}
	o := Resource{Kind: KindNetns, Name: "vnet.t.esx1", Sysctls: drifted}
	p := Diff([]Resource{d}, []Resource{o})
	if len(p.Actions) != 1 || p.Actions[0].Op != OpModify {
		t.Fatalf("want one change in place, got:\n%s", p)
	}
	if got, wantText := describeChange(o, d), "arp_ignore 0 -> 1, bridge-nf-call-arptables ? -> 0"; got != wantText {
		t.Errorf("change reads %q, want %q", got, wantText)
	}
	if p := Diff([]Resource{d}, []Resource{d}); !p.Empty() {
		t.Errorf("same settings planned:\n%s", p)
	}
}

func TestClassBurst(t *testing.T) {
	for _, c := range []struct {
		ceil, want uint64
	}{
		{100e6, 64<<10 + 1600}, // 2 ms is 25 KB: a GSO frame is more
		{262e6, 64<<10 + 1600},
		{1e9, 250000},
		{10e9, 2500000},
		{100e9, 25000000},
	} {
		if got := ClassBurst(c.ceil); got != c.want {
			t.Errorf("ClassBurst(%d bit/s) = %d bytes, want %d", c.ceil, got, c.want)
		}
	}
}
