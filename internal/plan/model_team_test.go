package plan

import (
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vnet-project/vnet/internal/teaming"
)

const teamBase = `
name: t
hosts:
  - name: esx1
    nics: [{name: vmnic0, speed: 1Gbit}, {name: vmnic1, speed: 1Gbit}, {name: vmnic2, speed: 1Gbit}]
switches:
  - name: dvs0
    uplinks:
      - {name: u1, nics: {esx1: vmnic0}}
      - {name: u2, nics: {esx1: vmnic1}}
      - {name: u3, nics: {esx1: vmnic2}}
    TEAMING
    portgroups: [{name: pg-a}]
vms:
  - {name: vm1, host: esx1, nics: [{portgroup: pg-a, ip: 10.0.0.1/24}]}
  - {name: vm2, host: esx1, nics: [{portgroup: pg-a, ip: 10.0.0.2/24}]}
  - {name: vm3, host: esx1, nics: [{portgroup: pg-a, ip: 10.0.0.3/24}]}
  - {name: vm4, host: esx1, nics: [{portgroup: pg-a, ip: 10.0.0.4/24}]}
hostports:
  - {host: esx1, portgroup: pg-a, ip: 10.0.0.100/24}
`

func teamSpec(t *testing.T, teaming string) string {
	t.Helper()
	if teaming == "" {
		return strings.Replace(teamBase, "    TEAMING\n", "", 1)
	}
	return strings.Replace(teamBase, "TEAMING", "teaming: "+teaming, 1)
}

type teamView struct {
	attached map[string]bool // NIC -> isolated
	ports    map[string]Steer
	why      map[string]teaming.Assignment
	uplinks  map[string]Steer // NIC -> program
}

func viewTeam(t *testing.T, rs []Resource) teamView {
	t.Helper()
	v := teamView{attached: map[string]bool{}, ports: map[string]Steer{}, why: map[string]teaming.Assignment{}, uplinks: map[string]Steer{}}
	for _, r := range rs {
		switch {
		case r.Kind == KindVeth && strings.HasPrefix(r.A.Name, "vmnic") && r.A.Master != "":
			v.attached[r.A.Name] = r.A.Isolated
		case r.Kind == KindSteer:
			s, err := ParseSteer(r.Match)
			if err != nil {
				t.Fatal(err)
			}
			if r.Name != "" {
				v.ports[r.Name] = s
				v.why[r.Name], _ = parseWhy(r.Why)
			} else {
				v.uplinks[r.Link] = s
			}
		}
	}
	return v
}

func TestTeamSteering(t *testing.T) {
	tests := []struct {
		name     string
		teaming  string
		down     []string
		attached []string
		check    func(t *testing.T, v teamView)
	}{
		{name: "default portid pins each port to one uplink", attached: []string{"vmnic0", "vmnic1", "vmnic2"},
			check: func(t *testing.T, v teamView) {
				used := map[string]bool{}
				for id, s := range v.ports {
					if len(s.To) != 1 || v.why[id].Reason != teaming.Pinned {
						t.Errorf("%s: to %v (%s), want one pinned uplink", id, s.To, v.why[id].Reason)
					}
					used[s.To[0]] = true
				}
				if len(used) < 2 {
					t.Errorf("five ports all on %v: portid should spread them", used)
				}
			}},
		{name: "a down uplink's ports fail over and it stops taking broadcasts", down: []string{"esx1/u1"}, attached: []string{"vmnic0", "vmnic1", "vmnic2"},
			check: func(t *testing.T, v teamView) {
				for id, s := range v.ports {
					if len(s.To) != 1 || s.To[0] == "vmnic0" {
						t.Errorf("%s still leaves by %v", id, s.To)
					}
				}
				if v.uplinks["vmnic0"].Bcast || !v.uplinks["vmnic1"].Bcast {
					t.Errorf("broadcast taker: vmnic0 %v vmnic1 %v, want vmnic1", v.uplinks["vmnic0"].Bcast, v.uplinks["vmnic1"].Bcast)
				}
			}},
		{name: "iphash spreads every port over all active uplinks", teaming: "{policy: iphash}", attached: []string{"vmnic0", "vmnic1", "vmnic2"},
			check: func(t *testing.T, v teamView) {
				for id, s := range v.ports {
					if !reflect.DeepEqual(s.To, []string{"vmnic0", "vmnic1", "vmnic2"}) {
						t.Errorf("%s: to %v", id, s.To)
					}
				}
				for nic, s := range v.uplinks {
					if len(s.Accept) != 5 {
						t.Errorf("%s accepts %d ports' unicast, want all 5", nic, len(s.Accept))
					}
				}
			}},
		{name: "failover order: first active, then the standby", teaming: "{policy: failover, active: [u2, u1], standby: [u3]}", down: []string{"esx1/u2", "esx1/u1"},
			attached: []string{"vmnic0", "vmnic1", "vmnic2"},
			check: func(t *testing.T, v teamView) {
				for id, s := range v.ports {
					if !reflect.DeepEqual(s.To, []string{"vmnic2"}) || v.why[id].Reason != teaming.FailedTo {
						t.Errorf("%s: to %v (%s), want vmnic2 by failover", id, s.To, v.why[id].Reason)
					}
				}
			}},
		{name: "an uplink no team names stays out", teaming: "{active: [u1, u2]}", attached: []string{"vmnic0", "vmnic1"},
			check: func(t *testing.T, v teamView) {
				if _, ok := v.uplinks["vmnic2"]; ok {
					t.Error("steering on an unattached uplink")
				}
			}},
		{name: "one attached uplink needs no steering", teaming: "{active: [u1]}", attached: []string{"vmnic0"},
			check: func(t *testing.T, v teamView) {
				if len(v.ports)+len(v.uplinks) != 0 || v.attached["vmnic0"] {
					t.Errorf("single uplink: %d steering programs, isolated %v; want none", len(v.ports)+len(v.uplinks), v.attached["vmnic0"])
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			down := map[string]bool{}
			for _, d := range tt.down {
				down[d] = true
			}
			v := viewTeam(t, Model(load(t, teamSpec(t, tt.teaming)), Options{Down: down}))
			var attached []string
			for nic, isolated := range v.attached {
				attached = append(attached, nic)
				if isolated != (len(tt.attached) > 1) {
					t.Errorf("%s isolated = %v with %d uplinks", nic, isolated, len(tt.attached))
				}
			}
			sort.Strings(attached)
			if !reflect.DeepEqual(attached, tt.attached) {
				t.Errorf("attached %v, want %v", attached, tt.attached)
			}
			checkTeamInvariants(t, v)
			tt.check(t, v)
		})
	}
}

// checkTeamInvariants holds for every team: one broadcast taker at most,
// every port's unicast taken by the uplinks it leaves by and no other, and
// every program knowing every local MAC.
func checkTeamInvariants(t *testing.T, v teamView) {
	t.Helper()
	if len(v.uplinks) == 0 {
		return
	}
	bcast := 0
	for _, s := range v.uplinks {
		if s.Bcast {
			bcast++
		}
		if len(s.Local) != 5 {
			t.Errorf("uplink program knows %d local MACs, want 5", len(s.Local))
		}
	}
	if bcast != 1 {
		t.Errorf("%d uplinks take broadcasts, want exactly 1", bcast)
	}
	for id, s := range v.ports {
		mac := ""
		for _, m := range s.Local {
			n := 0
			for nic, u := range v.uplinks {
				if contains(u.Accept, m) {
					n++
					if mac == "" && contains(s.To, nic) {
						mac = m
					}
				}
			}
			if n == 0 {
				t.Errorf("no uplink takes unicast for %s", m)
			}
		}
		if mac == "" && len(s.To) > 0 {
			t.Errorf("%s: none of its uplinks %v takes its unicast", id, s.To)
		}
	}
}

func TestTeamAssignmentsSurviveReapply(t *testing.T) {
	s := load(t, teamSpec(t, "{policy: loadbased}"))
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	first := Model(s, Options{Now: t0})
	prev := Assignments(first)
	if len(prev) != 5 {
		t.Fatalf("read back %d assignments, want 5", len(prev))
	}
	// An LBT move recorded by the agent stands through the next apply.
	var port string
	for id := range prev {
		port = id
		break
	}
	from := prev[port].Uplink
	to := "u1"
	if from == "u1" {
		to = "u2"
	}
	prev[port] = teaming.Assignment{Uplink: to, Reason: teaming.Moved, Since: t0.Add(time.Minute)}
	moved := Model(s, Options{Teams: prev, Now: t0.Add(2 * time.Minute)})
	if got := Assignments(moved)[port]; got.Uplink != to || got.Reason != teaming.Moved || !got.Since.Equal(t0.Add(time.Minute)) {
		t.Errorf("after reapply %s is %+v, want moved to %s at +1m", port, got, to)
	}
	again := Model(s, Options{Teams: Assignments(moved), Now: t0.Add(time.Hour)})
	if p := Diff(again, moved); !p.Empty() {
		t.Errorf("a third apply changes:\n%s", p)
	}
}

func TestSteerTextRoundTrip(t *testing.T) {
	for _, s := range []Steer{
		{Out: true, To: []string{"vmnic0"}, Local: []string{"02:00:00:00:00:01", "02:00:00:00:00:02"}},
		{Out: true},
		{Bcast: true, Accept: []string{"02:00:00:00:00:01"}, Local: []string{"02:00:00:00:00:01"}},
		{},
	} {
		got, err := ParseSteer(s.String())
		if err != nil || !reflect.DeepEqual(got, s) {
			t.Errorf("%q read back as %+v, %v", s, got, err)
		}
	}
	for _, bad := range []string{"", "sideways to=a", "out to", "out colour=red"} {
		if _, err := ParseSteer(bad); err == nil {
			t.Errorf("ParseSteer(%q) accepted", bad)
		}
	}
}

func TestDisconnectedVNICLeavesTheSwitch(t *testing.T) {
	src := strings.Replace(teamSpec(t, ""), "{portgroup: pg-a, ip: 10.0.0.1/24}", "{portgroup: pg-a, ip: 10.0.0.1/24, connected: false}", 1)
	rs := Model(load(t, src), Options{})
	for _, r := range rs {
		if r.Kind == KindVeth && r.A.NS == "vnet.t.vm1" && (r.B.Master != "" || !r.B.Down) {
			t.Errorf("disconnected vNIC's port: master %q down %v", r.B.Master, r.B.Down)
		}
		if r.Kind == KindSteer && r.Name == "vm1/eth0" {
			t.Error("a disconnected vNIC is steered")
		}
	}
	before := Model(load(t, teamSpec(t, "")), Options{})
	for _, a := range Diff(rs, before).Actions {
		if a.Op == OpReplace || a.Op == OpCreate {
			t.Errorf("disconnecting recreates: %s", a)
		}
	}
}

func TestResolveSteerPutsTextsBack(t *testing.T) {
	model := Model(load(t, teamSpec(t, "")), Options{})
	var observed []Resource
	for _, r := range model {
		if r.Kind == KindSteer {
			r.Match = SteerDigest(r.Match)
		}
		observed = append(observed, r)
	}
	if p := Diff(model, ResolveSteer(observed, model)); !p.Empty() {
		t.Errorf("resolved observation differs from the model:\n%s", p)
	}
	other := Model(load(t, teamSpec(t, "{policy: iphash}")), Options{})
	for _, r := range ResolveSteer(observed, other) {
		if r.Kind == KindSteer && !IsDigest(r.Match) {
			t.Errorf("%s resolved from a model that did not produce it", r)
		}
	}
}
