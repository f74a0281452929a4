package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/vnet-project/vnet/internal/spec"
)

const hostTeamSpec = `
name: rt
hosts:
  - name: hv1
    nics:
      - {name: vmnic0, device: eth1, speed: 1Gbit}
      - {name: vmnic1, device: eth2, speed: 1Gbit}
      - {name: vmnic2, speed: 1Gbit}
      - {name: vmnic3, speed: 1Gbit}
switches:
  - name: dvs0
    uplinks:
      - {name: up1, nics: {hv1: vmnic0}}
      - {name: up2, nics: {hv1: vmnic1}}
      - {name: up3, nics: {hv1: vmnic2}}
    teaming: {policy: failover, active: [up1, up2, up3]}
    ioc:
      enabled: true
      pools:
        vm: {shares: high, limit: 400Mbit}
    portgroups:
      - {name: pg, pool: vm}
  - name: dvs1
    uplinks:
      - {name: e1, nics: {hv1: vmnic3}}
    portgroups:
      - {name: pg1}
vms:
  - {name: db1, host: hv1, nics: [{portgroup: pg1, ip: 10.2.0.1/24}]}
  - {name: web1, host: hv1, nics: [{portgroup: pg, ip: 10.1.0.1/24}]}
  - name: guest1
    host: hv1
    nics: [{portgroup: pg, attach: {tap: tap-g1}, mac: "52:54:00:00:00:01"}]
`

func hostTeamDoc(t *testing.T, text string) *spec.Document {
	t.Helper()
	doc, err := spec.Load("rt.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// Teaming two real uplinks on a host steers as in the lab, on the devices
// and switch ports in the host's namespace; an uplink whose NIC names no
// device is no part of the team on a real host.
func TestHostModelTeamsRealUplinks(t *testing.T) {
	s := hostTeamDoc(t, hostTeamSpec).Spec
	opt := Options{Host: "hv1", HostNS: "machine"}
	byKey := map[string]Resource{}
	for _, r := range Model(s, opt) {
		byKey[r.Key()] = r
		if r.Kind == KindSteer && r.NS != "machine" {
			t.Errorf("steering outside the host's namespace: %s", r)
		}
	}
	for _, dev := range []string{"eth1", "eth2"} {
		if d := byKey["device/machine/"+dev]; !d.Isolate || d.Link != HostBridgeName("rt", "dvs0") {
			t.Errorf("%s: %+v, want an isolated port of the switch's bridge", dev, d)
		}
	}
	web := byKey["steer/machine/"+VNICPortName("rt", "web1", 0)]
	if st, err := ParseSteer(web.Match); err != nil || !st.Out || !slices.Equal(st.To, []string{"eth1"}) || web.Name != "web1/eth0" {
		t.Errorf("web1's port steering: %+v (%v), want out to eth1", web, err)
	}
	if g := byKey["steer/machine/tap-g1"]; !strings.Contains(g.Match, "out to=eth1") || !strings.Contains(g.Match, "52:54:00:00:00:01") {
		t.Errorf("the TAP's steering: %+v", g)
	}
	bcast := 0
	for _, dev := range []string{"eth1", "eth2"} {
		st, err := ParseSteer(byKey["steer/machine/"+dev].Match)
		if err != nil || st.Out {
			t.Errorf("%s: no uplink program (%v)", dev, err)
		}
		if st.Bcast {
			bcast++
		}
	}
	if bcast != 1 {
		t.Errorf("%d uplinks take broadcasts, want 1", bcast)
	}
	if _, ok := byKey["steer/machine/vmnic2"]; ok {
		t.Error("steering on an emulated NIC on a real host")
	}
	// A switch whose only uplink on the host is an emulated NIC is still
	// on the host: its bridge and its VMs' ports.
	br1 := HostBridgeName("rt", "dvs1")
	if _, ok := byKey["link/machine/"+br1]; !ok {
		t.Errorf("no bridge %s for dvs1 on hv1", br1)
	}
	if p := byKey["link/"+NSName("rt", "db1")+"/eth0"]; p.B.Master != br1 || p.B.NS != "machine" {
		t.Errorf("db1's port: %+v, want in machine on %s", p.B, br1)
	}
	pool := func(dev string, o Options) uint64 {
		for _, r := range Model(s, o) {
			if r.Kind == KindPool && r.NS == "machine" && r.Link == dev && r.Ceil < 1e9 {
				return r.Ceil
			}
		}
		return 0
	}
	if a, b := pool("eth1", opt), pool("eth2", opt); a != 200e6 || b != 200e6 {
		t.Errorf("the pool's limit split %d/%d, want 200M each: the emulated NIC takes no part", a, b)
	}

	teams, limits := Teaming(s, opt)
	if len(teams) != 1 || teams[0].NS != "machine" || teams[0].NIC["up1"] != "eth1" || teams[0].NIC["up2"] != "eth2" ||
		!slices.Equal(teams[0].Uplinks, []string{"up1", "up2"}) || len(teams[0].Ports) != 2 || teams[0].Ports[1].Link != "tap-g1" {
		t.Errorf("teams: %+v", teams)
	}
	if len(limits) != 1 || limits[0].NS != "machine" || !slices.Equal(limits[0].NICs, []string{"eth1", "eth2"}) {
		t.Fatalf("limits: %+v", limits)
	}

	// The agent's state, in the host's names, reaches the lab's model.
	down := opt
	down.Down = map[string]bool{"hv1/up1": true}
	for _, r := range Model(s, down) {
		if r.Kind == KindSteer && r.Link == VNICPortName("rt", "web1", 0) && !strings.Contains(r.Match, "out to=eth2") {
			t.Errorf("with up1 down web1 steers %s, want to eth2", r.Match)
		}
	}
	split := opt
	split.PoolCeils = map[string]uint64{LimitKey("machine", "eth1", limits[0].Minor): 300e6, LimitKey("machine", "eth2", limits[0].Minor): 100e6}
	if a, b := pool("eth1", split), pool("eth2", split); a != 300e6 || b != 100e6 {
		t.Errorf("the kept split: %d/%d, want 300M/100M", a, b)
	}
}

// A guest's TAP without mac: cannot be steered over several real uplinks.
func TestCheckHostFactsTeamedTapNeedsMAC(t *testing.T) {
	text := strings.Replace(hostTeamSpec, `, mac: "52:54:00:00:00:01"`, "", 1)
	doc := hostTeamDoc(t, text)
	f := HostFacts{Links: map[string]LinkFacts{"eth1": {Type: "veth"}, "eth2": {Type: "veth"}, "tap-g1": {Type: "tuntap", Tap: true}}}
	_, err := CheckHostFacts(doc, "hv1", f, AllVMs)
	if err == nil || !strings.Contains(err.Error(), "vms[2].nics[0]: TAP tap-g1 has no mac:, but switch dvs0 teams 2 real uplinks") {
		t.Errorf("got %v", err)
	}
	if _, err := CheckHostFacts(hostTeamDoc(t, hostTeamSpec), "hv1", f, AllVMs); err != nil {
		t.Errorf("with the guest's MAC: %v", err)
	}
}
