package plan

import (
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/ioc"
)

const iocBase = `
name: t
hosts:
  - name: esx1
    nics: [{name: vmnic0, speed: 1Gbit}]
  - name: client
    native: true
    nics: [{name: eth0, speed: 1Gbit, ip: 10.0.0.100/24}]
switches:
  - name: dvs0
    uplinks: [{name: u1, nics: {esx1: vmnic0}}]
    ioc:
      enabled: true
      pools:
        vm: {shares: high}
        vmotion: {shares: normal, limit: 300Mbit}
        backup: {shares: low}
    portgroups:
      - name: pg-vm
        pool: vm
        shaping:
          egress: {average: 500Mbit, peak: 800Mbit, burst: 100KiB}
          ingress: {average: 300Mbit, burst: 1MiB}
      - name: pg-backup
        pool: backup
        classify: [{proto: tcp, dport: 2049, pool: nfs}]
vms:
  - {name: vm1, host: esx1, nics: [{portgroup: pg-vm, ip: 10.0.0.1/24}]}
  - {name: vm2, host: esx1, nics: [{portgroup: pg-backup, ip: 10.0.0.2/24}]}
`

func byKind(rs []Resource, k Kind) []Resource {
	var out []Resource
	for _, r := range rs {
		if r.Kind == k {
			out = append(out, r)
		}
	}
	return out
}

func TestIOCModel(t *testing.T) {
	rs := Model(load(t, iocBase), Options{})
	pools := byKind(rs, KindPool)
	if len(pools) != 7 { // six system pools and backup
		t.Fatalf("want 7 pool classes, got %d", len(pools))
	}
	for _, p := range pools {
		if p.NS != "vnet.t.esx1" || p.Link != "vmnic0" {
			t.Errorf("pool class not on the uplink: %s", p)
		}
		if strings.Contains(p.Owner, "vmotion") && p.Ceil != 300e6 {
			t.Errorf("vmotion limit not its ceil: %s", p)
		}
	}
	filters := byKind(rs, KindFilter)
	if len(filters) != 3 { // vm1's port, vm2's port, vm2's nfs rule
		t.Fatalf("want 3 filters, got:\n%v", filters)
	}
	for _, f := range filters {
		if strings.Contains(f.Owner, "rule") != (f.Prio < portPrioBase) {
			t.Errorf("rules must come before port matches: %s", f)
		}
	}
	for _, lr := range byKind(rs, KindLineRate) {
		iocLink := lr.NS == "vnet.t.esx1" && lr.Link == "vmnic0"
		if iocLink != (lr.LeafRate != 0) {
			t.Errorf("leaf rate only where IOC divides the line: %s", lr)
		}
	}
	for _, r := range append(byKind(rs, KindLineRate), byKind(rs, KindPool)...) {
		ceil := r.Ceil
		if r.Kind == KindLineRate {
			ceil = r.Rate
		}
		if r.Burst != ClassBurst(ceil) || r.Burst < 64<<10 {
			t.Errorf("%s: bucket %d bytes, want ClassBurst (%d): room for a 64 KiB GSO frame", r, r.Burst, ClassBurst(ceil))
		}
	}
	shapers := byKind(rs, KindShaper)
	if len(shapers) != 2 {
		t.Fatalf("want an egress and an ingress shaper for vm1, got %v", shapers)
	}
	for _, s := range shapers {
		switch {
		case s.NS == "vnet.t.vm1" && s.Link == "eth0":
			if s.Rate != 500e6 || s.Ceil != 800e6 || s.Burst != 100<<10 {
				t.Errorf("egress %s", s)
			}
		case s.NS == "vnet.t.esx1":
			if s.Rate != 300e6 || s.Ceil != 0 || s.Burst != 1<<20 {
				t.Errorf("ingress %s", s)
			}
		default:
			t.Errorf("shaper on the wrong end: %s", s)
		}
	}
}

func TestIOCFiltersStableWhenPortsAreAdded(t *testing.T) {
	before := Model(load(t, iocBase), Options{})
	after := Model(load(t, iocBase+"  - {name: vm3, host: esx1, nics: [{portgroup: pg-vm, ip: 10.0.0.3/24}]}\n"), Options{})
	for _, a := range Diff(after, before).Actions {
		if a.Op != OpCreate || !strings.Contains(a.Subject().Owner, "vm3") {
			t.Errorf("adding a VM changed %s", a)
		}
	}
}

func TestIOCOffRemovesClassesAndFilters(t *testing.T) {
	before := Model(load(t, iocBase), Options{})
	off := strings.NewReplacer("enabled: true", "enabled: false", "        pool: vm\n", "", "        pool: backup\n", "",
		"        classify: [{proto: tcp, dport: 2049, pool: nfs}]\n", "").Replace(iocBase)
	p := Diff(Model(load(t, off), Options{}), before)
	var kinds []string
	for _, a := range p.Actions {
		kinds = append(kinds, string(a.Op)+" "+string(a.Subject().Kind))
	}
	got := strings.Join(kinds, ",")
	if !strings.HasPrefix(got, "change linerate,") || strings.Index(got, "delete filter") > strings.Index(got, "delete pool") {
		t.Errorf("plan: %s", got)
	}
}

// A VM that attaches a container's namespace is a port of its port
// group's pool like any VM: its vNIC's MAC, not its switch port's, sorts
// its traffic into the pool, though its pair names the switch port first.
func TestIOCFiltersAttachedVNICs(t *testing.T) {
	const mac = "02:00:00:00:aa:01"
	rs := Model(load(t, iocBase+"  - {name: box1, host: esx1, nics: [{portgroup: pg-vm, attach: {netns: box1}, mac: \""+mac+"\", ip: 10.0.0.4/24}]}\n"), Options{})
	keys, err := ioc.SrcMACKeys(mac)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, f := range byKind(rs, KindFilter) {
		if strings.Contains(f.Owner, "box1") {
			found = true
			if f.Match != ioc.EncodeKeys(keys) || f.NS != "vnet.t.esx1" || f.Link != "vmnic0" {
				t.Errorf("box1's filter %s: want its vNIC's MAC %s matched on esx1's vmnic0", f, mac)
			}
		}
	}
	if !found {
		t.Errorf("no filter sorts box1's traffic into pool vm: %v", byKind(rs, KindFilter))
	}
}
