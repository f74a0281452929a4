package plan

import "testing"

// The ceiling caps the wires' shapers (and the IOC classes that divide
// them) but not a slower wire, and an unset one changes nothing.
func TestWireCeilingCapsEmulatedWires(t *testing.T) {
	s := load(t, base)
	for _, c := range []struct {
		env  string
		want uint64
	}{{"", 1e9}, {"250mbit", 250e6}, {"10Gbit", 1e9}, {"nonsense", 1e9}} {
		t.Setenv(WireCeilingEnv, c.env)
		n := 0
		for _, r := range Model(s, Options{}) {
			if r.Kind != KindLineRate {
				continue
			}
			n++
			if r.Rate != c.want {
				t.Errorf("%s=%q: %s", WireCeilingEnv, c.env, r)
			}
		}
		if n == 0 {
			t.Fatal("no line rates modelled")
		}
	}
}

func TestWireCeilingRefusesWhatItCannotRead(t *testing.T) {
	for _, c := range []struct {
		env  string
		want uint64
		ok   bool
	}{{"", 0, true}, {"300mbit", 300e6, true}, {"1.5Gbit", 1.5e9, true}, {"300Mbps", 0, false}, {"0", 0, false}, {"fast", 0, false}} {
		t.Setenv(WireCeilingEnv, c.env)
		got, err := WireCeiling()
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("%q: %d, %v", c.env, got, err)
		}
	}
}

func TestWireCeilingSplitsIOCOverTheCappedLine(t *testing.T) {
	s := load(t, `
name: t
hosts:
  - {name: h, nics: [{name: vmnic0, speed: 1Gbit}]}
switches:
  - name: dvs0
    uplinks: [{name: u1, nics: {h: vmnic0}}]
    ioc: {enabled: true, pools: {vm: {shares: 100}, vmotion: {shares: 100}}}
    portgroups: [{name: pg, pool: vm}]
`)
	t.Setenv(WireCeilingEnv, "200Mbit")
	for _, u := range IOCUplinks(s) {
		if u.Line != 200e6 {
			t.Errorf("IOC line %d", u.Line)
		}
		for _, c := range u.Classes {
			if c.Ceil > 200e6 {
				t.Errorf("class %s ceil %d above the capped line", c.Pool, c.Ceil)
			}
		}
	}
}
