package teaming

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func ports(n int) []Port {
	var out []Port
	for i := 0; i < n; i++ {
		out = append(out, Port{ID: fmt.Sprintf("vm%d/eth0", i), MAC: fmt.Sprintf("02:00:00:00:00:%02x", i)})
	}
	return out
}

func allUp(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

func TestParsePolicy(t *testing.T) {
	for _, s := range []string{"loadbased", "portid", "srcmac", "iphash", "failover", ""} {
		if _, err := ParsePolicy(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	if _, err := ParsePolicy("roundrobin"); err == nil {
		t.Error("unknown policy accepted")
	}
}

func TestPoliciesStayInTheTeamAndSpread(t *testing.T) {
	team := Team{Active: []string{"u1", "u2"}, Standby: []string{"u3"}}
	for _, pol := range []Policy{PortID, SrcMAC, IPHash, LoadBased, Failover} {
		team.Policy = pol
		a := Assign(team, allUp("u1", "u2", "u3"), ports(40), nil, t0)
		count := map[string]int{}
		for _, x := range a {
			count[x.Uplink]++
		}
		if count["u3"] > 0 || count[""] > 0 {
			t.Errorf("%s: standby or nothing used while actives are up: %v", pol, count)
		}
		if pol == Failover {
			if count["u1"] != 40 {
				t.Errorf("failover: %v, want all on u1", count)
			}
		} else if count["u1"] < 10 || count["u2"] < 10 {
			t.Errorf("%s: does not spread: %v", pol, count)
		}
	}
}

func TestPinningIsStableAcrossRestarts(t *testing.T) {
	team := Team{Policy: PortID, Active: []string{"u1", "u2", "u3"}}
	a := Assign(team, allUp("u1", "u2", "u3"), ports(20), nil, t0)
	b := Assign(team, allUp("u1", "u2", "u3"), ports(20), nil, t0.Add(time.Hour))
	for id := range a {
		if a[id].Uplink != b[id].Uplink {
			t.Errorf("%s moved between runs", id)
		}
	}
}

func TestFailoverMovesOnlyTheFailedUplinksPorts(t *testing.T) {
	team := Team{Policy: PortID, Active: []string{"u1", "u2", "u3"}, Standby: []string{"u4"}, Failback: true}
	p := ports(30)
	before := Assign(team, allUp("u1", "u2", "u3", "u4"), p, nil, t0)
	after := Assign(team, allUp("u1", "u3", "u4"), p, before, t0.Add(time.Second))
	for id, a := range after {
		was := before[id]
		switch {
		case was.Uplink == "u2" && (a.Uplink == "u2" || a.Uplink == "u4" || a.Reason != FailedTo):
			t.Errorf("%s on the failed uplink went to %+v", id, a)
		case was.Uplink != "u2" && a != was:
			t.Errorf("%s moved although its uplink is up: %+v -> %+v", id, was, a)
		}
	}
	// Failback: u2 returns and takes its ports back.
	back := Assign(team, allUp("u1", "u2", "u3", "u4"), p, after, t0.Add(2*time.Second))
	for id := range back {
		if back[id].Uplink != before[id].Uplink || back[id].Reason != Pinned {
			t.Errorf("%s did not fail back: %+v", id, back[id])
		}
	}
	// Without failback they stay where failover put them.
	team.Failback = false
	stay := Assign(team, allUp("u1", "u2", "u3", "u4"), p, after, t0.Add(2*time.Second))
	for id := range stay {
		if before[id].Uplink == "u2" && (stay[id].Uplink == "u2" || stay[id].Reason != Stayed) {
			t.Errorf("%s failed back without failback: %+v", id, stay[id])
		}
	}
}

func TestStandbysInOrderWhenNoActiveIsUp(t *testing.T) {
	team := Team{Policy: SrcMAC, Active: []string{"u1", "u2"}, Standby: []string{"s1", "s2"}}
	a := Assign(team, allUp("s2"), ports(5), nil, t0)
	for id, x := range a {
		if x.Uplink != "s2" || x.Reason != FailedTo {
			t.Errorf("%s: %+v", id, x)
		}
	}
	a = Assign(team, allUp("s1", "s2"), ports(5), nil, t0)
	for id, x := range a {
		if x.Uplink != "s1" {
			t.Errorf("%s: %+v, want the first standby", id, x)
		}
	}
	if a := Assign(team, allUp(), ports(1), nil, t0); a["vm0/eth0"].Reason != NoUplink {
		t.Errorf("nothing up: %+v", a)
	}
}

func TestFailoverPolicyOrder(t *testing.T) {
	team := Team{Policy: Failover, Active: []string{"u1", "u2"}, Standby: []string{"u3"}, Failback: true}
	for _, c := range []struct {
		up   []string
		want string
	}{{[]string{"u1", "u2", "u3"}, "u1"}, {[]string{"u2", "u3"}, "u2"}, {[]string{"u3"}, "u3"}} {
		a := Assign(team, allUp(c.up...), ports(3), nil, t0)
		for id, x := range a {
			if x.Uplink != c.want {
				t.Errorf("up %v: %s on %s, want %s", c.up, id, x.Uplink, c.want)
			}
		}
	}
}

func TestIPHashIsPerFlow(t *testing.T) {
	team := Team{Policy: IPHash, Active: []string{"u1", "u2"}}
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		u := FlowUplink(team, allUp("u1", "u2"), "10.0.0.1", fmt.Sprintf("10.0.1.%d", i))
		if u != FlowUplink(team, allUp("u1", "u2"), "10.0.0.1", fmt.Sprintf("10.0.1.%d", i)) {
			t.Fatal("a flow's uplink is not stable")
		}
		seen[u] = true
	}
	if !seen["u1"] || !seen["u2"] {
		t.Errorf("flows of one source do not spread: %v", seen)
	}
	if FlowUplink(team, allUp("u2"), "a", "b") != "u2" {
		t.Error("flow not failed over")
	}
}

// lbtSetup: two active uplinks, both VMs' ports pinned to u1.
func lbtSetup(cfg LBTConfig) (*Balancer, Team, map[string]Assignment) {
	team := Team{Policy: LoadBased, Active: []string{"u1", "u2"}, Standby: []string{"u3"}, LBT: cfg}
	assign := map[string]Assignment{
		"a": {Uplink: "u1", Reason: Pinned}, "b": {Uplink: "u1", Reason: Pinned}, "c": {Uplink: "u2", Reason: Pinned},
	}
	return NewBalancer(cfg), team, assign
}

func feed(b *Balancer, from time.Time, d time.Duration, util map[string]float64) time.Time {
	now := from
	for s := time.Duration(0); s <= d; s += time.Second {
		now = from.Add(s)
		for u, v := range util {
			b.Observe(u, Load{At: now, TxUtil: v})
		}
	}
	return now
}

func TestLBTDecisions(t *testing.T) {
	cfg := LBTConfig{Threshold: 0.75, Window: 10 * time.Second, Interval: 10 * time.Second}
	load := map[string]float64{"a": 0.5, "b": 0.3, "c": 0.05}
	up := allUp("u1", "u2", "u3")
	tests := []struct {
		name string
		util map[string]float64
		span time.Duration
		want string // "port from->to" or ""
	}{
		{"below threshold", map[string]float64{"u1": 0.74, "u2": 0.05}, 12 * time.Second, ""},
		{"above threshold: busiest port that fits", map[string]float64{"u1": 0.8, "u2": 0.05}, 12 * time.Second, "a u1->u2"},
		{"window not yet covered", map[string]float64{"u1": 0.9, "u2": 0.05}, 5 * time.Second, ""},
		{"busiest does not fit, next does", map[string]float64{"u1": 0.9, "u2": 0.4}, 12 * time.Second, "b u1->u2"},
		{"nothing fits", map[string]float64{"u1": 0.95, "u2": 0.7}, 12 * time.Second, ""},
	}
	for _, tt := range tests {
		b, team, assign := lbtSetup(cfg)
		now := feed(b, t0, tt.span, tt.util)
		m := b.Decide(now, team, up, assign, load)
		got := ""
		if m != nil {
			got = fmt.Sprintf("%s %s->%s", m.Port, m.From, m.To)
		}
		if got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestLBTMinimumIntervalAndNeverOutsideTheTeam(t *testing.T) {
	cfg := LBTConfig{Threshold: 0.75, Window: 10 * time.Second, Interval: 10 * time.Second}
	b, team, assign := lbtSetup(cfg)
	load := map[string]float64{"a": 0.2, "b": 0.2, "c": 0.05}
	now := feed(b, t0, 12*time.Second, map[string]float64{"u1": 0.9, "u2": 0.1})
	m := b.Decide(now, team, allUp("u1", "u2", "u3"), assign, load)
	if m == nil {
		t.Fatal("no first move")
	}
	m.Apply(assign, now)
	now = feed(b, now, 5*time.Second, map[string]float64{"u1": 0.9, "u2": 0.3})
	if m2 := b.Decide(now, team, allUp("u1", "u2", "u3"), assign, load); m2 != nil {
		t.Errorf("second move within the interval: %+v", m2)
	}
	now = feed(b, now, 6*time.Second, map[string]float64{"u1": 0.9, "u2": 0.3})
	if m2 := b.Decide(now, team, allUp("u1", "u2", "u3"), assign, load); m2 == nil || m2.Port == m.Port {
		t.Errorf("after the interval: %+v (first moved %s)", m2, m.Port)
	}
	// With u2 down only the standby is left: LBT never moves to a standby.
	b2, team2, assign2 := lbtSetup(cfg)
	now = feed(b2, t0, 12*time.Second, map[string]float64{"u1": 0.95, "u3": 0})
	if m := b2.Decide(now, team2, allUp("u1", "u3"), assign2, load); m != nil {
		t.Errorf("moved to a standby or outside the team: %+v", m)
	}
}

func TestAssignKeepsLBTMoves(t *testing.T) {
	team := Team{Policy: LoadBased, Active: []string{"u1", "u2"}, Failback: true}
	p := ports(1)
	a := Assign(team, allUp("u1", "u2"), p, nil, t0)
	other := map[string]string{"u1": "u2", "u2": "u1"}[a["vm0/eth0"].Uplink]
	a["vm0/eth0"] = Assignment{Uplink: other, Reason: Moved, Since: t0}
	b := Assign(team, allUp("u1", "u2"), p, a, t0.Add(time.Second))
	if b["vm0/eth0"].Uplink != other || b["vm0/eth0"].Reason != Moved {
		t.Errorf("an LBT move was undone: %+v", b)
	}
	c := Assign(team, allUp(map[string]string{"u1": "u2", "u2": "u1"}[other]), p, b, t0.Add(2*time.Second))
	if c["vm0/eth0"].Uplink == other {
		t.Errorf("kept a move to an uplink that is down: %+v", c)
	}
}
