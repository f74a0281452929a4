package ioc

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseShares(t *testing.T) {
	for in, want := range map[string]int{"low": 25, "normal": 50, "HIGH": 100, "75": 75, "1": 1, "100": 100} {
		if got, err := ParseShares(in); err != nil || got != want {
			t.Errorf("%q: %d %v", in, got, err)
		}
	}
	for _, in := range []string{"0", "101", "medium", "-5", "1.5"} {
		if _, err := ParseShares(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// activeShare is what a pool gets when exactly the given pools send: its
// assured rate plus the idle classes' rates lent in proportion to quantum.
func activeShare(cs []Class, line uint64, active map[string]bool) map[string]float64 {
	var used, quanta float64
	for _, c := range cs {
		if active[c.Pool] {
			used += float64(c.Rate)
			quanta += float64(c.Quantum)
		}
	}
	out := map[string]float64{}
	for _, c := range cs {
		if active[c.Pool] {
			got := float64(c.Rate) + (float64(line)-used)*float64(c.Quantum)/quanta
			out[c.Pool] = min(got, float64(c.Ceil)) / float64(line)
		}
	}
	return out
}

func TestClassesDivideByShares(t *testing.T) {
	const line = 1e9
	tests := []struct {
		name   string
		over   map[string]Pool
		active []string
		want   map[string]float64
	}{
		{"2:1", map[string]Pool{"vm": {Shares: 100}, "vmotion": {Shares: 50}}, []string{"vm", "vmotion"},
			map[string]float64{"vm": 2.0 / 3, "vmotion": 1.0 / 3}},
		{"100:50:25", map[string]Pool{"vm": {Shares: 100}, "vmotion": {Shares: 50}, "nfs": {Shares: 25}}, []string{"vm", "vmotion", "nfs"},
			map[string]float64{"vm": 100.0 / 175, "vmotion": 50.0 / 175, "nfs": 25.0 / 175}},
		{"S4 scenario 2", map[string]Pool{"ft": {Shares: 100}, "nfs": {Shares: 75}, "vm": {Shares: 75}, "iscsi": {Shares: 75}, "vmotion": {Shares: 50}, "management": {Shares: 50}},
			[]string{"ft", "nfs", "vm", "iscsi", "vmotion", "management"},
			map[string]float64{"ft": 100.0 / 425, "nfs": 75.0 / 425, "vm": 75.0 / 425, "iscsi": 75.0 / 425, "vmotion": 50.0 / 425, "management": 50.0 / 425}},
		{"lone low pool takes the line", map[string]Pool{"backup": {Shares: 25}}, []string{"backup"}, map[string]float64{"backup": 1}},
		{"limit caps", map[string]Pool{"vmotion": {Shares: 100, Limit: 300e6}}, []string{"vmotion"}, map[string]float64{"vmotion": 0.3}},
	}
	for _, tt := range tests {
		cs := Classes(line, Pools(tt.over))
		active := map[string]bool{}
		for _, a := range tt.active {
			active[a] = true
		}
		got := activeShare(cs, line, active)
		for pool, want := range tt.want {
			if d := got[pool] - want; d > 0.001 || d < -0.001 {
				t.Errorf("%s: %s gets %.4f, want %.4f", tt.name, pool, got[pool], want)
			}
		}
	}
}

// HTB hands a borrowing class at least one frame a turn, so a class whose
// quantum is under a 64 KiB GSO frame takes more than its shares' part of
// what others leave: every quantum must hold one, and stay in proportion.
func TestQuantumHoldsAFrameAndFollowsShares(t *testing.T) {
	for _, over := range []map[string]Pool{
		nil, // every pool normal
		{"vm": {Shares: 25}, "vmotion": {Shares: 100}},
		{"vm": {Shares: 100}, "vmotion": {Shares: 50}, "backup": {Shares: 25}},
		{"tiny": {Shares: 1}, "vm": {Shares: 100}},
		{"odd": {Shares: 3}, "vm": {Shares: 7}},
	} {
		cs := Classes(1e9, Pools(over))
		shares := map[string]int{Unclassified: Normal}
		for _, p := range Pools(over) {
			shares[p.Name] = p.Shares
		}
		perShare := float64(cs[0].Quantum) / Normal
		for _, c := range cs {
			if c.Quantum < largestFrame {
				t.Errorf("%v: %s lends %d bytes a round, under a %d-byte frame", over, c.Pool, c.Quantum, largestFrame)
			}
			if got := float64(c.Quantum) / float64(shares[c.Pool]); got != perShare {
				t.Errorf("%v: %s lends %.1f bytes per share, the unclassified class %.1f", over, c.Pool, got, perShare)
			}
		}
	}
}

func TestClassesReservationAndOrder(t *testing.T) {
	cs := Classes(1e9, Pools(map[string]Pool{"nfs": {Shares: 75, Reservation: 200e6}, "backup": {Shares: 25}, "alpha": {Shares: 50}}))
	var names []string
	var sum uint64
	for _, c := range cs {
		names = append(names, c.Pool)
		sum += c.Rate
		if c.Rate%8 != 0 || c.Ceil%8 != 0 || c.Rate > c.Ceil {
			t.Errorf("%+v", c)
		}
		if c.Pool == "nfs" && c.Rate < 200e6 {
			t.Errorf("nfs rate %d below its reservation", c.Rate)
		}
	}
	if got := strings.Join(names, ","); got != Unclassified+",management,vmotion,ft,iscsi,nfs,vm,alpha,backup" {
		t.Errorf("order %s", got)
	}
	if sum > 1e9 || sum < 1e9-100 {
		t.Errorf("assured rates add up to %d, want the line", sum)
	}
	if cs[7].Minor != 0x107 || cs[0].Minor != UnclassifiedMinor {
		t.Errorf("minors %x %x", cs[7].Minor, cs[0].Minor)
	}
}

func TestAdmit(t *testing.T) {
	if err := Admit([]Pool{{Reservation: 500e6}, {Reservation: 250e6}}, 1e9); err != nil {
		t.Errorf("75%% refused: %v", err)
	}
	err := Admit([]Pool{{Reservation: 500e6}, {Reservation: 251e6}}, 1e9)
	if err == nil || !strings.Contains(err.Error(), "more than 75% of the slowest uplink (1Gbit)") {
		t.Errorf("over 75%%: %v", err)
	}
}

func TestMatchKeys(t *testing.T) {
	k, err := SrcMACKeys("02:aa:bb:cc:dd:ee")
	if err != nil || !reflect.DeepEqual(k, []Key{{-8, 0xffffffff, 0x02aabbcc}, {-4, 0xffff0000, 0xddee0000}}) {
		t.Errorf("%v %v", k, err)
	}
	k, err = RuleKeys(Rule{Proto: "tcp", DPort: 2049, DSCP: -1, Dst: "10.1.0.0/16"})
	want := []Key{{8, 0x00ff0000, 6 << 16}, {16, 0xffff0000, 0x0a010000}, {20, 0x0000ffff, 2049}}
	if err != nil || !reflect.DeepEqual(k, want) {
		t.Errorf("%v %v", k, err)
	}
	k, _ = RuleKeys(Rule{DSCP: 46})
	if !reflect.DeepEqual(k, []Key{{0, 0x00fc0000, 46 << 18}}) {
		t.Errorf("dscp %v", k)
	}
	for _, bad := range []Rule{{Proto: "sctp", DSCP: -1}, {DPort: 80, DSCP: -1}, {Proto: "tcp", DPort: 70000, DSCP: -1}, {DSCP: 64}, {Src: "fd00::/8", DSCP: -1}} {
		if _, err := RuleKeys(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	enc := EncodeKeys(want)
	back, err := DecodeKeys(enc)
	if err != nil || !reflect.DeepEqual(back, want) {
		t.Errorf("round trip %q -> %v %v", enc, back, err)
	}
}
